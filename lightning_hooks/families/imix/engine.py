"""The engine facade iMIX hooks reach as ``self.trainer`` (iMIX's ``imixEngine``, backed by a Lightning trainer)."""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Mapping
from typing import Any

import torch

from lightning_hooks.core.facade import Facade, WorkDir
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.loaders import Loader
from lightning_hooks.families.imix.loop import IMIXLoop


class Config(dict):
    """A config dict whose keys also read as attributes, recursively (``cfg.log_config.period``)."""

    def __getattr__(self, name: str) -> Any:
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(f"iMIX cfg has no key {name!r} (keys: {sorted(self)})") from None
        return Config(value) if isinstance(value, Mapping) and not isinstance(value, Config) else value


class Engine(Facade):
    """iMIX's engine (``imixEngine``) as its hooks see it as ``self.trainer``, backed by a Lightning trainer.

    The counters and the log buffer are the host loop's (:class:`~lightning_hooks.families.imix.loop.IMIXLoop`),
    read here: ``iter`` is the 0-based index of the current iteration across epochs and ``inner_iter`` the index
    inside the epoch; in by-epoch mode ``iter`` advances after ``after_train_iter`` as in iMIX's engine (a hook may set
    ``iter`` and ``inner_iter``, as iMIX's plain attributes). ``optimizer`` is Lightning's optimizer wrapper (its
    ``step()`` counts toward ``global_step``), ``log_buffer`` iMIX's ``LogBufferStorage`` for the current fit,
    ``output`` the step's loss dict with a graph-attached ``loss``.

    Example::

        adapter = IMIXAdapter(hooks, cfg=dict(log_config=dict(period=10)))
        adapter.engine.cfg.log_config.period  # 10
    """

    host = "trainer"  # the name hooks reach it by (self.trainer)
    adapter_attribute = "engine"  # IMIXAdapter.engine

    def __init__(
        self,
        hooks: list[Any],
        loop: IMIXLoop,
        by_epoch: bool = True,
        gradient_accumulation_steps: int = 1,
        is_lr_accumulation: bool = True,
        work_dir: str | os.PathLike | None = None,
        cfg: Mapping[str, Any] | Any = None,
    ) -> None:
        self.lightning: pl.Trainer | None = None
        self._hooks = hooks
        self._loop = loop
        self._optimizer: Any = None
        self.by_epoch = by_epoch
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.is_lr_accumulation = is_lr_accumulation
        self._work_dir: WorkDir = WorkDir(work_dir, "IMIXAdapter", family="imix")
        self._cfg = Config(cfg) if isinstance(cfg, Mapping) else cfg
        self.output: dict[str, Any] = {}
        #: ``max_iter`` of the current fit, with the batches per epoch it was computed from (hooks read it every
        #: iteration, as iMIX's plain attribute)
        self._max_iter: tuple[float, int] | None = None

    def _need(self, name: str, value: Any, why: str) -> Any:
        if value is None:
            raise AttributeError(f"lightning-hooks' iMIX engine facade: {name!r} is not available {why}")
        return value

    @property
    def cfg(self) -> Any:
        """The iMIX config given as ``IMIXAdapter(cfg=...)`` (PeriodicLogger reads ``cfg.log_config.period``)."""
        return self._need("cfg", self._cfg, "because IMIXAdapter got no cfg: pass cfg=dict(log_config=dict(period=N))")

    @property
    def log_buffer(self) -> Any:
        """iMIX's ``LogBufferStorage``, entered as the current (global) log buffer from ``before_train`` on."""
        buffer = self._loop.log_buffer
        if buffer is None:  # hooks read it every iteration: the check only where it is missing
            self._need("log_buffer", buffer, "before training starts, nor without imix installed")
        return buffer

    @property
    def work_dir(self) -> str:
        return self._work_dir.resolve(self.lightning)

    @property
    def model(self) -> torch.nn.Module | None:
        """The LightningModule, or its DDP wrapper (hooks probe ``.module``); None before the strategy has it."""
        return self._lightning("model").strategy.model

    @property
    def optimizer(self) -> Any:
        """The first optimizer, as Lightning's ``LightningOptimizer`` wrapper; the fit's wrapper is kept once it
        exists (hooks read it several times an iteration)."""
        optimizer = self._optimizer
        return self._keep_first_optimizer(self._lightning("optimizer")) if optimizer is None else optimizer

    def _attach(self, trainer: pl.Trainer) -> None:
        """Bind the trainer of a new run (its optimizers are read again)."""
        self.lightning = trainer
        self._optimizer = None
        self._max_iter = None

    def _set_iter(self, value: int) -> None:
        self._loop.iter = value

    # read through operator.attrgetter, in C: hooks read it as iMIX's plain attribute, several times an iteration
    iter = property(
        operator.attrgetter("_loop.iter"), _set_iter,
        doc="The current iteration's index over the run (by epoch: advanced after ``after_train_iter``).",
    )  # fmt: skip  # getter, setter, doc

    @property
    def start_iter(self) -> int:
        """The iteration training started at (a resumed fit's restored count)."""
        return self._loop.first_iter

    @property
    def epoch(self) -> int:
        """The epoch of the current iteration; in ``after_train`` the last epoch run, as iMIX's loop variable (which
        its engine sets from the first ``before_train_epoch`` on, and never by iteration)."""
        loop = self._loop
        if loop.epoch_set and self.by_epoch:  # hooks read it every iteration: the checks only where it is unset
            return loop.epoch
        return self._counter("epoch", loop.epoch if loop.epoch_set else None, "before the first epoch starts")

    @property
    def inner_iter(self) -> int:
        """The iteration's index inside its epoch, set by iMIX's epoch loop from the first iteration on."""
        loop = self._loop
        if loop.inner_iter_set and self.by_epoch:  # as epoch: the checks only where it is unset
            return loop.inner_iter
        return self._counter("inner_iter", loop.inner_iter if loop.inner_iter_set else None, "before the first iteration")

    @inner_iter.setter
    def inner_iter(self, value: int) -> None:
        self._loop.inner_iter, self._loop.inner_iter_set = value, True

    def _counter(self, name: str, value: int | None, when: str) -> int:
        """An epoch-loop counter where iMIX's engine has set it; elsewhere the AttributeError iMIX raises, so that a
        hook's ``getattr(trainer, name, default)`` takes the branch it takes under iMIX."""
        if not self.by_epoch:
            raise self._unset(name, AttributeError(
                f"lightning-hooks' iMIX engine facade: {name!r} is not available by iteration: iMIX's train_by_iter "
                "never sets it (use trainer.iter)"
            ))  # fmt: skip  # the message inside the call
        if value is None:
            raise self._unset(name, AttributeError(
                f"lightning-hooks' iMIX engine facade: {name!r} is not available {when}: iMIX's engine sets it in "
                "its epoch loop"
            ))  # fmt: skip  # the message inside the call
        return value

    def _unset(self, name: str, error: AttributeError) -> AttributeError:
        """``error``, kept for :meth:`Facade.__getattr__`, which Python calls next: it raises the kept error instead of
        running the property again (by iteration, hooks probe ``epoch`` and ``inner_iter`` every iteration)."""
        self._raised = (name, error)
        return error

    @property
    def max_epoch(self) -> int:
        """Epochs the fit runs, as iMIX's ``total_epochs``: ``max_epochs``, fewer when ``max_steps`` ends the fit
        sooner (-1 when neither bounds it); 0 by iteration, as iMIX."""
        if not self.by_epoch:
            return 0
        trainer = self._lightning("max_epoch")
        iters = self._iterations(trainer)
        return -1 if math.isinf(iters) else math.ceil(iters / trainer.num_training_batches)

    @property
    def max_iter(self) -> int:
        """Iterations the fit runs (``max_steps`` times the batches per step), divided by the accumulation steps
        when ``is_lr_accumulation`` is set, as iMIX counts them."""
        trainer = self._lightning("max_iter")
        batches, cached = trainer.fit_loop.max_batches, self._max_iter
        if cached is not None and cached[0] == batches:
            return cached[1]
        iters = int(self._iterations(trainer))
        value = iters // self.gradient_accumulation_steps if self.is_lr_accumulation else iters
        self._max_iter = (batches, value)
        return value

    def _iterations(self, trainer: pl.Trainer) -> float:
        """Batches the fit runs: ``max_epochs`` epochs, or ``max_steps`` optimizer steps if they end it sooner."""
        iters = float("inf") if trainer.max_epochs in (None, -1) else trainer.max_epochs * trainer.num_training_batches
        if trainer.max_steps > 0:
            iters = min(iters, trainer.max_steps * self.gradient_accumulation_steps)
        return iters

    @property
    def data_loader(self) -> Loader:
        """The train dataloader; ``len()`` is the number of batches an epoch runs (``limit_train_batches`` applied)."""
        trainer = self._lightning("data_loader")
        return Loader(trainer.train_dataloader, int(trainer.num_training_batches))

    def _lightning(self, name: str) -> pl.Trainer:
        return self._need(name, self.lightning, "before the Lightning trainer has set the adapter up")

