"""The ``runner`` facade OpenMMLab 1.x hooks (``mmcv.runner``) receive: mmcv's ``EpochBasedRunner`` /
``IterBasedRunner`` as its hooks read it, backed by a Lightning trainer."""

from __future__ import annotations

import logging
import os
from typing import Any, NoReturn

import torch

from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.facade import Facade, WorkDir
from lightning_hooks.core.lightning_api import LIGHTNING_MODULES, pl, rank_zero_warn
from lightning_hooks.core.loaders import Loader
from lightning_hooks.families.mmcv.loop import MMCVLoop

#: mmcv's two runners; the adapter replays the one named by ``MMCVAdapter(runner=...)``.
RUNNERS = ("EpochBasedRunner", "IterBasedRunner")


class Runner(Facade):
    """mmcv 1.x's runner as its hooks see it.

    The counters, lengths, ``mode``, ``data_loader`` and ``data_batch`` are the host loop's
    (:class:`~lightning_hooks.families.mmcv.loop.MMCVLoop`), read here: ``epoch`` is the number of finished train
    epochs (it advances after ``after_train_epoch``), ``iter`` the number of finished train iterations (it advances
    after ``after_train_iter``), ``inner_iter`` the batch index inside the epoch (``IterBasedRunner`` with
    ``workflow=[('train', 1)]``: 0 during an iteration).
    ``model`` is the mmcv model the LightningModule holds (a module with ``train_step``, or the one
    ``MMCVAdapter(model=...)`` names; else the LightningModule), ``optimizer`` Lightning's wrapper of the first
    optimizer (an instance of its class; its ``step()`` counts toward ``trainer.global_step``), ``outputs`` the
    training (or validation) step's dict, ``log_buffer`` mmcv's ``LogBuffer``, ``logger`` the one given, else mmcv's
    ``get_logger("mmcv")`` (printing on rank 0). ``save_checkpoint`` writes mmcv's file layout with mmcv's own
    ``save_checkpoint``, so ``mmcv.runner.load_checkpoint`` and ``runner.resume`` read it.

    Example::

        adapter = MMCVAdapter([CheckpointHook(interval=1)], work_dir="work", meta=dict(exp_name="demo"))
        adapter.runner.work_dir  # "work"
    """

    host = "runner"

    def __init__(
        self,
        hooks: list[Any],
        caller: HookCaller,
        loop: MMCVLoop,
        runner_type: str,
        work_dir: str | os.PathLike | None,
        meta: dict[str, Any] | None,
        logger: logging.Logger | None,
        model: str | None,
    ) -> None:
        from mmcv.runner import LogBuffer
        from mmcv.runner.utils import get_time_str

        self.lightning: pl.Trainer | None = None
        self._hooks = hooks
        self._caller = caller
        self._loop = loop
        self._runner_type = runner_type
        self._work_dir: WorkDir = WorkDir(work_dir, "MMCVAdapter", family="mmcv")
        self.meta = meta
        self._given_logger = logger
        self.logger = logger if logger is not None else logging.getLogger("mmcv")
        self._model_path = model
        self._model: torch.nn.Module | None = None
        self._optimizer: Any = None
        self.timestamp = get_time_str()
        self.log_buffer = LogBuffer()
        self.outputs: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------------- counters
    @property
    def epoch(self) -> int:
        """Finished train epochs (``IterBasedRunner``: the train loader's epoch)."""
        return self._loop.epoch

    @property
    def iter(self) -> int:
        """Finished train iterations."""
        return self._loop.iter

    @property
    def inner_iter(self) -> int:
        """The batch index in the current epoch (``IterBasedRunner``: 0 during an iteration and 1 after it, as with
        its ``workflow=[('train', 1)]``)."""
        return self._loop.inner_iter

    @property
    def mode(self) -> str | None:
        """``"train"`` or ``"val"``: the workflow phase running (None before the first)."""
        return self._loop.mode

    @property
    def max_epochs(self) -> int:
        """``Trainer(max_epochs)``; for ``IterBasedRunner`` the epochs ``max_iters`` spans, as mmcv leaves it unset."""
        value = self._loop.max_epochs
        return value if value is not None else self._unbounded("max_epochs")

    @property
    def max_iters(self) -> int:
        """Train iterations of the run: ``max_epochs`` times the batches per epoch, or ``Trainer(max_steps)``
        iterations (times the accumulation of a ``GradientCumulativeOptimizerHook``) when that ends the run sooner
        (:func:`~lightning_hooks.families.mmcv.loop.run_limits`, as the fit starts)."""
        value = self._loop.max_iters  # read every iteration (Hook.is_last_iter): the loop holds it
        return value if value is not None else self._unbounded("max_iters")

    def _unbounded(self, name: str) -> int:
        """The error for a length the loop does not know: no trainer yet, or a run without bounds."""
        self._lightning(name)
        raise AttributeError(
            f"lightning-hooks' mmcv runner facade: {name!r} is unbounded (Trainer without max_epochs and max_steps, "
            "or a train loader without a length), or read outside a fit. Give the Trainer max_steps or max_epochs."
        )

    # mmcv's Hook.is_last_epoch / is_last_iter read the private fields
    _max_epochs = max_epochs
    _max_iters = max_iters

    def _iters_per_step(self) -> int:
        from mmcv.runner import GradientCumulativeOptimizerHook

        return next((h.cumulative_iters for h in self._hooks if isinstance(h, GradientCumulativeOptimizerHook)), 1)

    # ------------------------------------------------------------------------------------------------ objects
    @property
    def hooks(self) -> list[Any]:
        """The hooks in priority order (mmcv's ``runner.hooks``)."""
        return self._hooks

    @property
    def model(self) -> torch.nn.Module:
        """The mmcv model inside the LightningModule (see :class:`Runner`)."""
        model = self._model
        if model is None:  # read every iteration (IterBasedRunner's model.train()): no call on the way to it
            self._lightning("model")
            _missing("model", "before the adapter's setup has found the mmcv model")
        return model

    @property
    def _model_name(self) -> str:
        return type(self.model).__name__

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def optimizer(self) -> Any:
        """The first optimizer, as Lightning's wrapper (an instance of the optimizer's class); the fit's wrapper is
        kept once it exists (hooks read it several times an iteration)."""
        optimizer = self._optimizer
        return self._keep_first_optimizer(self._lightning("optimizer")) if optimizer is None else optimizer

    @property
    def data_loader(self) -> Loader:
        """The loader of the current mode; ``len()`` is the batches Lightning runs per epoch."""
        loader = self._loop.data_loader
        if loader is None:
            _missing("data_loader", "before the first train or validation epoch")
        return loader

    @property
    def data_batch(self) -> Any:
        batch = self._loop.data_batch
        if batch is None:
            _missing("data_batch", "outside an iteration")
        return batch

    @property
    def work_dir(self) -> str:
        """``MMCVAdapter(work_dir=...)``, else the Trainer's ``default_root_dir``; created as mmcv's runner does."""
        path = self._work_dir.resolve(self.lightning)
        os.makedirs(path, exist_ok=True)
        return path

    @property
    def rank(self) -> int:
        return self.lightning.global_rank if self.lightning is not None else 0

    @property
    def world_size(self) -> int:
        return self.lightning.world_size if self.lightning is not None else 1

    # ------------------------------------------------------------------------------------------------ methods
    def call_hook(self, fn_name: str) -> None:
        """Call ``fn_name`` of every hook, in priority order, with this runner (mmcv's ``call_hook``), through the
        adapter: an error names the hook, and ``fast_dev_run``'s muted checkpoint hooks are skipped."""
        self._caller.call_hook(fn_name)

    def current_lr(self) -> list[float]:
        """The learning rate of each param group of the optimizer."""
        return [group["lr"] for group in self.optimizer.param_groups]

    def current_momentum(self) -> list[float]:
        """Each param group's ``momentum`` (``betas[0]`` for Adam-like optimizers, 0 without either), as mmcv."""
        return [g["momentum"] if "momentum" in g else g["betas"][0] if "betas" in g else 0 for g in self.optimizer.param_groups]

    def save_checkpoint(self, out_dir: str, filename_tmpl: str | None = None, *args: Any, **kwargs: Any) -> None:
        """mmcv's ``save_checkpoint`` of the runner type: ``epoch_{}.pth`` / ``iter_{}.pth`` holding ``meta``,
        ``state_dict`` and ``optimizer``, plus the ``latest.pth`` link; positional arguments in that runner's order."""
        import mmcv
        from mmcv.runner.checkpoint import save_checkpoint

        fast_dev_run = self.lightning is not None and self.lightning.fast_dev_run  # type: ignore[attr-defined]  # Lightning's connectors set it; Trainer does not declare it
        if fast_dev_run:
            rank_zero_warn(
                f"runner.save_checkpoint({out_dir!r}, ...) writes nothing under Trainer(fast_dev_run="
                f"{fast_dev_run}), which suppresses checkpointing (a hook called it). Run without "
                "fast_dev_run to save checkpoints."
            )
            return
        iter_based = self._runner_type == "IterBasedRunner"
        names = ("meta", "save_optimizer", "create_symlink") if iter_based else ("save_optimizer", "meta", "create_symlink")
        # strict=False: a caller passes the leading positional arguments only, the rest keep their defaults
        options = {"save_optimizer": True, "meta": None, "create_symlink": True, **dict(zip(names, args, strict=False)), **kwargs}
        meta = options["meta"]
        if meta is None:
            meta = {}
        elif not isinstance(meta, dict):
            raise TypeError(f"meta should be a dict or None, but got {type(meta)}")
        if self.meta is not None:
            meta.update(self.meta)
        meta.update(epoch=self.epoch + 1, iter=self.iter)
        template = filename_tmpl or ("iter_{}.pth" if iter_based else "epoch_{}.pth")
        filename = template.format(self.iter + 1 if iter_based else self.epoch + 1)
        path = os.path.join(out_dir, filename)
        optimizer = self.optimizer if options["save_optimizer"] else None
        save_checkpoint(self.model, path, optimizer=optimizer, meta=meta)
        if options["create_symlink"]:
            mmcv.symlink(filename, os.path.join(out_dir, "latest.pth"))

    def load_checkpoint(self, filename: str, map_location: Any = "cpu", strict: bool = False,
                        revise_keys: list | None = None) -> dict[str, Any]:  # fmt: skip  # parameters aligned under the signature
        """mmcv's ``load_checkpoint`` into :attr:`model`."""
        from mmcv.runner import load_checkpoint

        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys if revise_keys is not None else [(r"^module.", "")])  # fmt: skip  # arguments aligned under the call

    def resume(self, checkpoint: str, resume_optimizer: bool = True, map_location: Any = "cpu") -> None:
        """Not available: Lightning owns the training state. ``EMAHook(resume_from=...)`` and ``resume_from`` resume
        with ``trainer.fit(..., ckpt_path=...)`` from a Lightning checkpoint instead."""
        raise AttributeError(
            "lightning-hooks' mmcv runner facade: 'resume' is not available: Lightning restores the training state. "
            "Resume with trainer.fit(..., ckpt_path=...) from a Lightning checkpoint (it holds the hooks' state), "
            "or load mmcv weights with adapter.runner.load_checkpoint(path) before fit."
        )

    # ---------------------------------------------------------------------------------------------- internals
    def _attach(self, trainer: pl.Trainer) -> None:
        """Bind the trainer and find the mmcv model in its LightningModule."""
        from lightning_hooks.core.models import find_model, submodule

        self.lightning = trainer
        self._optimizer = None  # this trainer's, once it has set them up
        if self._given_logger is None:  # once the process group exists: mmcv's logger prints on rank 0 only
            from mmcv.utils import get_logger

            self.logger = get_logger("mmcv")
        root = trainer.lightning_module
        path = self._model_path
        if path is None:
            path = find_model(root, _is_mmcv_model, adapter="MMCVAdapter", what="mmcv models (modules with train_step)")
        self._model = submodule(root, path or "", adapter="MMCVAdapter")

    def _lightning(self, name: str) -> pl.Trainer:
        trainer = self.lightning
        if trainer is None:
            _missing(name, "before the Lightning trainer has set the adapter up")
        return trainer


def _missing(name: str, why: str) -> NoReturn:
    """Raise the facade's ``AttributeError`` for ``name``, not available ``why``."""
    raise AttributeError(f"lightning-hooks' mmcv runner facade: {name!r} is not available {why}")


def _is_mmcv_model(module: torch.nn.Module) -> bool:
    """An mmcv model: a module with mmcv's ``train_step`` (not a LightningModule, whose step is ``training_step``)."""
    return callable(getattr(module, "train_step", None)) and not isinstance(module, LIGHTNING_MODULES)

