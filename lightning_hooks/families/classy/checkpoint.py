"""Classy's checkpoint layout under Lightning: the model state as a ``ClassyModel`` gives it, and Classy's (or
VISSL's) own ``checkpoint.torch`` as a Lightning checkpoint, so ``trainer.fit(ckpt_path="ckpt/checkpoint.torch")``
resumes it.

Classy's task state (``ClassificationTask.get_classy_state``) holds ``base_model`` = ``{"model": {"trunk", "heads"}}``,
``optimizer`` = ``{"optim": <torch optimizer state>}``, ``meters``, ``hooks`` (each hook's state under its ``name()``),
the phase counters and ``losses``. ``CheckpointHook`` writes ``{"input_args", "classy_state_dict": <that>}``; VISSL's
``LogLossMetricsCheckpointHook`` writes ``classy_state_dict`` next to its own counters and the loss module's state.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.classy.vissl import is_vissl_checkpoint

#: The file Classy's ``CheckpointHook`` writes in its folder (``classy_vision.generic.util.CHECKPOINT_FILE``).
CHECKPOINT_FILE = "checkpoint.torch"


def classy_model(module: torch.nn.Module) -> torch.nn.Module:
    """The model whose state is Classy's ``base_model``: ``module`` itself when it has Classy's model state
    (``get_classy_state``, a ``ClassyModel``), else its one direct child that has it, else ``module``."""
    if _has_classy_state(module):
        return module
    children = [child for child in module.children() if _has_classy_state(child)]
    return children[0] if len(children) == 1 else module


def model_state(model: torch.nn.Module) -> dict[str, Any]:
    """Classy's model state: ``model.get_classy_state()`` for a ``ClassyModel``, else its ``state_dict`` as the trunk."""
    if _has_classy_state(model):
        return model.get_classy_state()
    return {"model": {"trunk": model.state_dict(), "heads": {}}}


def load_model_state(model: torch.nn.Module, state: Any, source: str) -> None:
    """Load :func:`model_state`'s layout into ``model`` (strictly); ``source`` names the file in errors."""
    if not (isinstance(state, Mapping) and isinstance(state.get("model"), Mapping) and "trunk" in state["model"]):
        found = sorted(state) if isinstance(state, Mapping) else type(state).__name__
        raise KeyError(
            f"{source}: base_model is not in Classy's layout {{'model': {{'trunk', 'heads'}}}} (found {found}). "
            "Load a checkpoint.torch written by Classy's CheckpointHook, or by it under ClassyAdapter."
        )
    if _has_classy_state(model):
        model.set_classy_state(state)
        return
    if state["model"].get("heads"):
        raise ValueError(
            f"{source}: the checkpoint's model has Classy heads {sorted(state['model']['heads'])}, but "
            f"{type(model).__name__} is not a ClassyModel and cannot attach them. Keep the ClassyModel as a child "
            "module of the LightningModule (e.g. self.model = build_model(config))."
        )
    model.load_state_dict(state["model"]["trunk"])


def _has_classy_state(module: Any) -> bool:
    return callable(getattr(module, "get_classy_state", None)) and callable(getattr(module, "set_classy_state", None))


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


def install_loader(
    trainer: pl.Trainer,
    convert: Callable[[dict[str, Any], str], dict[str, Any]],
    prepare: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    """Let ``trainer``'s checkpoint IO load Classy's or VISSL's checkpoint (or its folder) as a Lightning checkpoint.

    The IO's ``load_checkpoint`` is wrapped on the instance (its class, e.g. ``AtomicCheckpointIO``, stays): the file
    is first read with ``weights_only=True``, and read again as the caller asked if that fails (a checkpoint with
    pickled objects); a Classy or VISSL checkpoint goes through ``convert(checkpoint, path)``, a Lightning one
    through ``prepare(checkpoint)``.
    """
    io = trainer.strategy.checkpoint_io
    if getattr(io.load_checkpoint, "_classy_loader", False):
        return
    load = io.load_checkpoint

    def load_checkpoint(path: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        file = classy_file(path) if isinstance(path, (str, os.PathLike)) else path
        map_location = kwargs.get("map_location", args[0] if args else None)
        try:
            checkpoint = load(file, map_location, weights_only=True)
        except Exception:  # not loadable with weights_only: a checkpoint with pickled objects
            checkpoint = load(file, *args, **kwargs)
        legacy = is_classy_checkpoint(checkpoint) or is_vissl_checkpoint(checkpoint)
        return convert(checkpoint, str(file)) if legacy else prepare(checkpoint)

    load_checkpoint._classy_loader = True  # type: ignore[attr-defined]
    io.load_checkpoint = load_checkpoint


def uninstall_loader(trainer: pl.Trainer) -> None:
    """Undo :func:`install_loader`."""
    io = trainer.strategy.checkpoint_io
    if getattr(vars(io).get("load_checkpoint"), "_classy_loader", False):
        del io.load_checkpoint


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
        warnings.warn(f"{source}: the checkpoint's AMP grad-scaler state is not restored; the scaler starts afresh")
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
