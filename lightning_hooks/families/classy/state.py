"""Classy's and VISSL's checkpoint layouts: the task state ``task.get_classy_state()`` returns in each, the model state
inside it, and what tells their ``checkpoint.torch`` files apart from Lightning's.

Classy's task state (``ClassificationTask.get_classy_state``) holds ``base_model`` = ``{"model": {"trunk", "heads"}}``,
``optimizer`` = ``{"optim": <torch optimizer state>}``, ``meters``, ``hooks`` (each hook's state under its ``name()``),
the phase counters and ``losses``. ``CheckpointHook`` writes ``{"input_args", "classy_state_dict": <that>}``. VISSL's
``SelfSupervisionTask`` adds ``meta`` to ``base_model``, the loss module's ``state_dict`` and the train dataset's state;
VISSL's ``LogLossMetricsCheckpointHook`` writes ``classy_state_dict`` next to its own counters and the loss module's
state.
"""

from __future__ import annotations

import copy
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.classy.vissl import is_vissl_model

if TYPE_CHECKING:  # the Task facade's loop, for the declarations below (loop.py imports nothing of this module's)
    from lightning_hooks.families.classy.loop import ClassyLoop

#: The file Classy's ``CheckpointHook`` writes in its folder (``classy_vision.generic.util.CHECKPOINT_FILE``).
CHECKPOINT_FILE = "checkpoint.torch"
#: ``type`` of the VISSL checkpoints that hold a part of the model (``vissl.utils.checkpoint.CheckpointItemType``).
PARTIAL_TYPES = ("shard", "shard_list", "slice", "slice_list")


# ------------------------------------------------------------------------------------------------------- models
def has_classy_state(module: Any) -> bool:
    """A ``ClassyModel`` (or anything with Classy's model-state methods)."""
    return callable(getattr(module, "get_classy_state", None)) and callable(getattr(module, "set_classy_state", None))


def model_state(model: Any) -> dict[str, Any]:
    """Classy's model state: ``model.get_classy_state()`` for a ``ClassyModel``, else its ``state_dict`` as the trunk."""
    if has_classy_state(model):
        return model.get_classy_state()
    return {"model": {"trunk": model.state_dict(), "heads": {}}}


def load_model_state(model: Any, state: Any, source: str) -> None:
    """Load :func:`model_state`'s layout into ``model`` (strictly); ``source`` names the file in errors."""
    if not (isinstance(state, Mapping) and isinstance(state.get("model"), Mapping) and "trunk" in state["model"]):
        found = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise KeyError(
            f"{source}: base_model is not in Classy's layout {{'model': {{'trunk', 'heads'}}}} (found {found}). "
            "Load a checkpoint.torch written by Classy's CheckpointHook, or by it under ClassyAdapter."
        )
    if has_classy_state(model):
        model.set_classy_state(state)
        return
    if state["model"].get("heads"):
        raise ValueError(
            f"{source}: the checkpoint's model has Classy heads {sorted(state['model']['heads'])}, but "
            f"{type(model).__name__} is not a ClassyModel and cannot attach them. Keep the ClassyModel as a child "
            "module of the LightningModule (e.g. self.model = build_model(config))."
        )
    model.load_state_dict(state["model"]["trunk"])


def vissl_model_state(model: Any) -> dict[str, Any]:
    """VISSL's ``base_model`` entry: ``{model: {trunk, heads}, meta: {trunk}}``. A model without ``trunk``/``heads``
    is saved whole as the trunk (VISSL's models load ``trunk`` and ``heads`` separately)."""
    if has_classy_state(model):
        return model.get_classy_state()
    if is_vissl_model(model):
        parts = {"trunk": model.trunk.state_dict(), "heads": model.heads.state_dict()}
    else:
        parts = {"trunk": model.state_dict(), "heads": {}}
    return {"model": parts, "meta": {"trunk": {}}}


def load_vissl_model_state(model: Any, state: Mapping[str, Any], source: str) -> None:
    """Load :func:`vissl_model_state`'s layout into ``model`` (strictly); ``source`` names the file in errors."""
    if "model" not in state or not {"trunk", "heads"} <= set(state["model"]):
        raise KeyError(
            f"{source}: base_model state has keys {sorted(state)}, not VISSL's {{model: {{trunk, heads}}}}: it "
            "was not written by VISSL or by a ClassyAdapter driving VISSL hooks"
        )
    if has_classy_state(model):
        model.set_classy_state(state)
    elif is_vissl_model(model):
        model.trunk.load_state_dict(state["model"]["trunk"])
        model.heads.load_state_dict(state["model"]["heads"])
    else:
        model.load_state_dict(state["model"]["trunk"])


# ---------------------------------------------------------------------------------------------------- task state
class ClassyTaskState:
    """``get_classy_state`` / ``set_classy_state`` of ``ClassificationTask`` and the phase state of a mid-phase
    Lightning checkpoint, for the ``task`` facade (:class:`~lightning_hooks.families.classy.task.Task`)."""

    if TYPE_CHECKING:  # what the Task facade, which this mixin belongs to, provides
        train: Any
        phase_idx: Any
        train_phase_idx: Any
        num_updates: Any
        iteration: Any
        meters: Any
        hooks: list[Any]
        losses: list[float]
        used_options: dict[torch.optim.Optimizer, list[dict[str, Any]]]
        _loop: ClassyLoop

        @property
        def base_model(self) -> torch.nn.Module: ...
        @property
        def test_only(self) -> bool: ...
        @property
        def loss(self) -> Any: ...
        def _lightning_trainer(self) -> pl.Trainer: ...
        def _loss_object(self) -> Any: ...

    def get_classy_state(self, deep_copy: bool = False) -> dict[str, Any]:
        """Classy's task state in ``ClassificationTask``'s layout, so that a ``checkpoint.torch`` written from it loads
        in Classy: ``base_model`` as a ``ClassyModel`` gives it (``{"model": {"trunk", "heads"}}``), ``optimizer`` as
        ``{"optim": ...}``, meters, counters, ``losses``, every hook's state under its ``name()``, ``loss`` and ``amp``.
        """
        trainer = self._lightning_trainer()
        state = {
            "train": self.train,
            "base_model": model_state(self.base_model),
            "meters": [meter.get_classy_state() for meter in self.meters],
            "optimizer": {"optim": self._optimizer_state(trainer.optimizers[0])} if trainer.optimizers else {},
            "phase_idx": self.phase_idx,
            "train_phase_idx": self.train_phase_idx,
            "num_updates": self.num_updates,
            "iteration": self.iteration,
            "losses": list(self.losses),
            "hooks": {hook.name(): hook.get_classy_state() for hook in self.hooks},
            "loss": self._loss_state(),
        }
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if scaler is not None:
            state["amp"] = scaler.state_dict()
        return copy.deepcopy(state) if deep_copy else state

    def set_classy_state(self, state: dict[str, Any]) -> None:
        """Restore Classy's task state (:meth:`get_classy_state`'s layout, as ``ClassificationTask`` writes it): model,
        optimizer, meters, counters, losses and hook states. Outside ``fit`` (a test-only task) only the model, as
        Classy does."""
        trainer = self._lightning_trainer()
        load_model_state(self.base_model, state["base_model"], "set_classy_state")
        if self.test_only:
            self._loop.test_mode()
            return
        if state.get("optimizer") and trainer.optimizers:
            trainer.optimizers[0].load_state_dict(state["optimizer"]["optim"])
        for meter, meter_state in zip(self.meters, state["meters"], strict=False):
            meter.set_classy_state(meter_state)
        self._loop.load_counters(state)
        self.losses = list(state["losses"])
        if state.get("loss") and callable(getattr(self._loss_object(), "set_classy_state", None)):
            self.loss.set_classy_state(state["loss"])
        for hook in self.hooks:
            if hook.name() in state["hooks"]:
                hook.set_classy_state(state["hooks"][hook.name()])
            else:
                warnings.warn(f"task.set_classy_state: no state found for hook {hook.name()!r}; it starts fresh", stacklevel=1)

    def _optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The optimizer's ``state_dict`` with the options Classy's optimizer holds (``used_options``: the last step's,
        not those Lightning's schedulers have already stepped to)."""
        state = optimizer.state_dict()
        used = self.used_options.get(optimizer)
        if used is not None:
            state["param_groups"] = [{**group, **options} for group, options in zip(state["param_groups"], used, strict=False)]
        return state

    def _loss_state(self) -> dict[str, Any]:
        """A ``ClassyLoss``'s state, as Classy saves it; ``{}`` for other losses (Classy's value)."""
        loss = self._loss_object()
        return loss.get_classy_state() if callable(getattr(loss, "get_classy_state", None)) else {}

    def phase_state(self) -> dict[str, Any]:
        """What a mid-phase checkpoint needs to reopen the phase: the loop's counters, losses and meter states."""
        return {
            **self._loop.state_dict(),
            "losses": list(self.losses),
            "meters": [meter.get_classy_state() for meter in self.meters],
        }

    def load_phase_state(self, state: Mapping[str, Any]) -> None:
        self._loop.load_phase_state(state)
        self.losses = list(state.get("losses", []))
        for meter, meter_state in zip(self.meters, state.get("meters", []), strict=False):
            meter.set_classy_state(meter_state)


class VisslTaskState(ClassyTaskState):
    """``get_classy_state`` / ``set_classy_state`` of VISSL's ``SelfSupervisionTask`` (VISSL's trainer loads them)."""

    def get_classy_state(self, deep_copy: bool = False) -> dict[str, Any]:
        """``task.get_classy_state()`` as VISSL's ``SelfSupervisionTask`` returns it."""
        trainer = self._lightning_trainer()
        loss = self._loss_object()
        dataset: Any = getattr(trainer.train_dataloader, "dataset", None)
        state = {
            "train": self.train,
            "base_model": vissl_model_state(self.base_model),
            "meters": [meter.get_classy_state() for meter in self.meters],
            "optimizer": {"optim": trainer.optimizers[0].state_dict()} if trainer.optimizers else {},
            "phase_idx": self.phase_idx,
            "train_phase_idx": self.train_phase_idx,
            "num_updates": self.num_updates,
            "losses": list(self.losses),
            "hooks": {hook.name(): hook.get_classy_state() for hook in self.hooks},
            "loss": loss.state_dict() if isinstance(loss, torch.nn.Module) else {},
            "train_dataset_iterator": dataset.get_classy_state() if hasattr(dataset, "get_classy_state") else {},
        }
        return copy.deepcopy(state) if deep_copy else state

    def set_classy_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_classy_state` (as VISSL's ``_set_classy_state`` does, and the hooks' states)."""
        trainer = self._lightning_trainer()
        load_vissl_model_state(self.base_model, state["base_model"], "task.set_classy_state")
        for meter, meter_state in zip(self.meters, state.get("meters", []), strict=False):
            meter.set_classy_state(meter_state)
        if state.get("optimizer") and trainer.optimizers:
            trainer.optimizers[0].load_state_dict(state["optimizer"]["optim"])
        self._loop.load_counters(state)
        self.losses = list(state.get("losses", []))
        for hook in self.hooks:
            if hook.name() in state.get("hooks", {}):
                hook.set_classy_state(state["hooks"][hook.name()])


# ---------------------------------------------------------------------------------------------- checkpoint files
def classy_file(path: str | os.PathLike[str]) -> str:
    """``path``, or ``path/checkpoint.torch`` when ``path`` is a folder (Classy's and VISSL's loaders take both)."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        return path
    file = os.path.join(path, CHECKPOINT_FILE)
    if os.path.islink(file) and not os.path.exists(file):
        raise FileNotFoundError(
            f"{file} links to {os.readlink(file)!r}, which does not exist: VISSL links checkpoint.torch to "
            "<CHECKPOINT.DIR>/<file> as written, which breaks with a relative CHECKPOINT.DIR. Pass the checkpoint "
            "file itself as ckpt_path (e.g. model_phase<N>.torch)."
        )
    return file


def is_classy_checkpoint(checkpoint: Any) -> bool:
    """Whether a loaded file is Classy's or VISSL's checkpoint (a task state; not a Lightning checkpoint)."""
    return (
        isinstance(checkpoint, Mapping)
        and "classy_state_dict" in checkpoint
        and "pytorch-lightning_version" not in checkpoint
    )


def is_vissl_checkpoint(checkpoint: Any) -> bool:
    """Whether a loaded file is a checkpoint VISSL's ``LogLossMetricsCheckpointHook`` wrote (not Classy's), or one of
    VISSL's sharded checkpoint files."""
    if not isinstance(checkpoint, Mapping) or "pytorch-lightning_version" in checkpoint:
        return False
    return checkpoint.get("type") in PARTIAL_TYPES or {"classy_state_dict", "iteration_num", "train_phase_idx"} <= set(
        checkpoint
    )


def check_vissl_checkpoint(checkpoint: Mapping[str, Any], source: str) -> None:
    """A VISSL checkpoint a Lightning run can start from: consolidated, with VISSL's counters."""
    if checkpoint.get("type") in PARTIAL_TYPES:
        raise ValueError(
            f"ClassyAdapter: {source} is a sharded VISSL checkpoint (type {checkpoint['type']!r}, written under "
            "FSDP): a Lightning run starts only from a consolidated one (LogLossMetricsCheckpointHook without "
            "FSDP). Resume it with VISSL's trainer, or start a new run from its trunk weights "
            "(CheckpointFormatConverter.sharded_to_consolidated_checkpoint)"
        )
    missing = [key for key in ("iteration", "phase_idx", "loss") if key not in checkpoint]
    if missing:
        raise KeyError(f"ClassyAdapter: {source} is a VISSL checkpoint without {missing}; it cannot be resumed")


def check_task_state(task: Any, source: str) -> None:
    """A ``classy_state_dict`` that a training run can resume from (``source`` names the file in the error)."""
    for key in ("base_model", "train", "train_phase_idx", "phase_idx", "num_updates", "losses", "meters", "hooks"):
        if not isinstance(task, Mapping) or key not in task:
            raise KeyError(
                f"{source}: classy_state_dict has no {key!r}; it is not a checkpoint of a Classy or VISSL training task"
            )


def lightning_checkpoint(
    task: Mapping[str, Any],
    trainer: pl.Trainer,
    pl_module: pl.LightningModule,
    epochs: int,
    callback: tuple[str, dict[str, Any]],
    source: str,
) -> dict[str, Any]:
    """A Lightning checkpoint that resumes where a Classy / VISSL task state (``task``) left off.

    The model is already loaded (in the file's layout) and its ``state_dict`` becomes the checkpoint's; the optimizer
    state is the task's ``optim``; the loops have ``epochs`` train epochs done; ``callback`` is the adapter's
    ``(state_key, state)`` (hook states, counters, meters, the loss module's state).
    """
    loops = lightning_api.fit_loop_state(trainer)
    for progress in (loops["epoch_progress"]["total"], loops["epoch_progress"]["current"]):
        progress.update(ready=epochs, started=epochs, processed=epochs, completed=epochs)
    optimizer = task.get("optimizer") or {}
    if task.get("amp"):
        warnings.warn(f"{source}: the checkpoint's AMP grad-scaler state is not restored; the scaler starts afresh", stacklevel=1)
    key, state = callback
    return {
        "pytorch-lightning_version": lightning_api.namespace_of(trainer).__version__,
        "epoch": epochs - 1,
        "global_step": 0,  # set once the train loader is known (ClassyAdapter.on_train_start)
        "state_dict": {k: v.detach().clone() for k, v in pl_module.state_dict().items()},
        "loops": {"fit_loop": loops},
        "optimizer_states": [optimizer["optim"]] if "optim" in optimizer else [],
        "lr_schedulers": [],
        "callbacks": {key: state},
    }
