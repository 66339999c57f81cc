"""MMEngine's checkpoint layout on Lightning's checkpoints: what ``runner.save_checkpoint`` writes and
``runner.load_checkpoint`` reads, the Runner's ``state_dict`` keys, and the message hub in loadable tensors.

A checkpoint the adapter writes is Lightning's dict plus MMEngine's keys (``meta``, ``message_hub``, ``optimizer``,
``param_schedulers``), so both hosts resume from it. When the OpenMMLab model sits inside the LightningModule,
``state_dict`` holds the model's own keys, as the Runner writes them, and the LightningModule's other entries travel
under :data:`OUTSIDE_MODEL`; :func:`to_lightning_keys` undoes that before Lightning loads the file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.optim import OptimWrapper, OptimWrapperDict

from lightning_hooks.callbacks.checkpoint_io import durable_checkpoint_io
from lightning_hooks.core.checkpoint_files import load_checkpoint_file
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.safety import plain

#: checkpoint key of what :func:`add_mmengine_layout` moved out of ``state_dict``: the model's prefix in the
#: LightningModule and the LightningModule's entries outside the model
OUTSIDE_MODEL = "lightning_hooks_outside_model"


@dataclass
class PendingSave:
    """What a ``runner.save_checkpoint`` call asks of the file Lightning is writing for it.

    Example::

        PendingSave(meta=dict(epoch=1, iter=8), optimizer=True, param_schedulers=True, model_keys=True)
    """

    meta: dict[str, Any] = field(default_factory=dict)
    optimizer: bool = True
    param_schedulers: bool = True
    #: ``state_dict`` under the Runner's keys (a file of ``runner.save_checkpoint``, e.g. CheckpointHook's)
    model_keys: bool = False


def save_meta(meta: dict | None, by_epoch: bool, epoch: int, it: int) -> dict[str, Any]:
    """``meta`` with the ``epoch`` / ``iter`` the Runner's ``save_checkpoint`` records: the epoch that ended
    (``by_epoch``) or the iteration that ended."""
    meta = dict(meta or {})
    meta.setdefault("epoch", epoch + 1 if by_epoch else epoch)
    meta.setdefault("iter", it if by_epoch else it + 1)
    return meta


def write(trainer: pl.Trainer, path: str) -> None:
    """``trainer.save_checkpoint(path)`` (collective, written by rank 0): a full checkpoint, since
    ``before_save_checkpoint`` hooks (EMAHook) only run on those, written atomically and durably unless the Trainer
    has a CheckpointIO of the user's."""
    with durable_checkpoint_io(trainer):
        trainer.save_checkpoint(path, weights_only=False)


def read(filename: str, map_location: Any, weights_only: bool) -> dict[str, Any]:
    """A checkpoint file (``torch.load(weights_only=...)``) or, for URLs and other backends, MMEngine's loader."""
    from mmengine.runner.checkpoint import _load_checkpoint

    if os.path.isfile(filename) or "://" not in filename:  # a local path (not there: an error naming it)
        return load_checkpoint_file(filename, owner="runner.load_checkpoint", map_location=map_location,
                                    weights_only=weights_only)  # fmt: skip  # arguments aligned under the call
    return _load_checkpoint(filename, map_location=map_location)


def load_into_model(model: torch.nn.Module, checkpoint: dict[str, Any], strict: bool) -> Any:
    """MMEngine's loading of a checkpoint's weights into ``model`` (unwrapped from DDP)."""
    from mmengine.runner.checkpoint import _load_checkpoint_to_model

    return _load_checkpoint_to_model(getattr(model, "module", model), checkpoint, strict)


def add_mmengine_layout(
    checkpoint: dict[str, Any],
    pending: PendingSave,
    *,
    run_meta: dict[str, Any],
    hub: MessageHub,
    model_prefix: str,
    schedulers: list[Any],
    saved: Mapping[str, Any] | None = None,
    wrappers: OptimWrapper | OptimWrapperDict | None = None,
) -> dict[str, Any]:
    """Add MMEngine's checkpoint layout to Lightning's ``checkpoint`` dict, in place, sharing its tensors.

    ``run_meta`` (``cfg``, ``seed``, ``experiment_name``) joins ``pending.meta``; the ``message_hub`` and
    ``param_schedulers`` states are those ``saved`` already holds (the adapter's own state, so the file stores them
    once), else ``hub``'s and ``schedulers``'. ``optimizer`` is ``wrappers.state_dict()`` as the Runner writes it (see
    :func:`optimizer_entry`)."""
    import mmengine

    saved = saved or {}
    meta = dict(pending.meta)
    meta.update(run_meta, time=time.strftime("%Y%m%d_%H%M%S", time.localtime()), mmengine_version=mmengine.__version__)
    checkpoint["meta"] = meta
    checkpoint["message_hub"] = saved.get("message_hub") or hub_state(hub)
    if pending.model_keys:
        _to_model_keys(checkpoint, model_prefix)
    states = checkpoint.get("optimizer_states")
    if pending.optimizer and states:
        checkpoint["optimizer"] = optimizer_entry(states, wrappers)
    elif not pending.optimizer:
        checkpoint.pop("optimizer_states", None)
    if pending.param_schedulers and schedulers:
        checkpoint["param_schedulers"] = saved.get("param_schedulers") or [plain(s.state_dict()) for s in schedulers]
    return checkpoint


def optimizer_entry(states: list[dict[str, Any]], wrappers: OptimWrapper | OptimWrapperDict | None) -> dict[str, Any]:
    """The checkpoint's ``optimizer``, as the Runner's ``optim_wrapper.state_dict()``: each of Lightning's optimizer
    ``states`` (sharing its tensors) plus what its ``OptimWrapper`` adds (``AmpOptimWrapper``'s ``loss_scaler``,
    ``base_param_settings``, a subclass's own keys); an ``OptimWrapperDict``'s under its names, else ``optimizer{i}``.

    Example: ``optimizer_entry([sgd.state_dict()], AmpOptimWrapper(optimizer=sgd))`` holds ``state``,
    ``param_groups`` and ``loss_scaler``."""
    named = list(wrappers.items()) if isinstance(wrappers, OptimWrapperDict) else [(None, wrappers)]
    if len(named) != len(states):  # no wrappers (or not Lightning's optimizers): Lightning's states alone
        named = [(None, None)] * len(states)
    entries = [state if wrapper is None else {**state, **_wrapper_extras(wrapper)} for state, (_, wrapper) in
               zip(states, named, strict=True)]  # fmt: skip  # the comprehension's for clause under its first half
    if len(entries) == 1 and not isinstance(wrappers, OptimWrapperDict):
        return entries[0]
    return {name or f"optimizer{i}": entry for i, ((name, _), entry) in enumerate(zip(named, entries, strict=True))}


def _wrapper_extras(wrapper: OptimWrapper) -> dict[str, Any]:
    """What ``wrapper.state_dict()`` holds beside its optimizer's own ``state_dict()``, in plain containers."""
    inner = wrapper.optimizer.state_dict()
    return {key: plain(value) for key, value in wrapper.state_dict().items() if key not in inner}


def restore_wrappers(entry: Mapping[str, Any], wrappers: OptimWrapper | OptimWrapperDict) -> None:
    """``wrappers.load_state_dict(entry)``, as ``Runner.resume`` restores the checkpoint's ``optimizer`` (the loss
    scale of an ``AmpOptimWrapper``, ``base_param_settings``, a subclass's own state): called once Lightning restored
    its optimizers, which it loads again from the same states."""
    wrappers.load_state_dict({key: dict(value) if isinstance(wrappers, OptimWrapperDict) else value
                              for key, value in entry.items()})  # fmt: skip  # the comprehension's for clause under its first half


def _to_model_keys(checkpoint: dict[str, Any], prefix: str) -> None:
    """``state_dict`` keyed as the Runner writes it, the model's own keys (so MMEngine, ``load_from`` and
    OpenMMLab's tools load the file); the LightningModule's other entries go to :data:`OUTSIDE_MODEL`."""
    if not prefix:
        return
    state = checkpoint["state_dict"]
    checkpoint["state_dict"] = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    outside = {k: v for k, v in state.items() if not k.startswith(prefix)}
    checkpoint[OUTSIDE_MODEL] = {"model_prefix": prefix, "state_dict": outside}


def to_lightning_keys(checkpoint: dict[str, Any]) -> None:
    """Undo :func:`_to_model_keys` in a checkpoint Lightning is about to load into the LightningModule."""
    layout = checkpoint.pop(OUTSIDE_MODEL, None)
    if layout is not None:
        prefix = layout["model_prefix"]
        checkpoint["state_dict"] = {**{prefix + k: v for k, v in checkpoint["state_dict"].items()}, **layout["state_dict"]}


def hub_state(hub: MessageHub) -> dict[str, Any]:
    """``hub.state_dict()`` in tensors and plain containers, so ``torch.load(weights_only=True)`` reads it.

    Each ``HistoryBuffer`` becomes ``{"log_history": tensor, "count_history": tensor, "max_length": int}``;
    :func:`load_hub_state` rebuilds it. (MMEngine's own ``MessageHub.load_state_dict`` skips such entries with a
    warning and restores only the runtime info.)
    """
    state = hub.state_dict()
    scalars = {
        key: {"log_history": plain(buf._log_history), "count_history": plain(buf._count_history),
              "max_length": buf.max_length}
        for key, buf in state["log_scalars"].items()
    }  # fmt: skip  # one HistoryBuffer field group per line
    return {"log_scalars": scalars, "runtime_info": plain(state["runtime_info"]), "resumed_keys": dict(state["resumed_keys"])}


def load_hub_state(hub: MessageHub, state: dict[str, Any]) -> None:
    """Restore :func:`hub_state` (or a ``MessageHub.state_dict()`` of MMEngine objects) into ``hub``."""
    scalars = {
        key: HistoryBuffer(buf["log_history"].numpy(), buf["count_history"].numpy(), buf["max_length"])
        if isinstance(buf, dict) else buf
        for key, buf in state["log_scalars"].items()
    }  # fmt: skip  # value, condition and for clause one per line
    hub.load_state_dict({**state, "log_scalars": scalars})
