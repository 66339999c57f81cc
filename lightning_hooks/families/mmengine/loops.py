"""``runner.train_loop``: MMEngine's train loop classes as hooks see them, driven by Lightning (``val_loop`` /
``test_loop``: :mod:`~lightning_hooks.families.mmengine.eval_loops`).

Each facade is an instance of the MMEngine loop it stands for (``EpochBasedTrainLoop`` or ``IterBasedTrainLoop``,
``ValLoop``, ``TestLoop``), so hooks that branch on ``isinstance(runner.train_loop, ...)`` take the branch they take
under MMEngine's ``Runner``. The loop classes' constructors are not called (they build dataloaders and evaluators):
every attribute a hook reads is served from the Lightning trainer, and ``run`` refuses, because Lightning runs the
loops.

As in MMEngine's ``runner/loops.py``, the runner facade reads the run's counters and limits (``iter``, ``epoch``,
``max_iters``, ``max_epochs``) and its data from its loops (``runner.iter`` is ``runner.train_loop.iter``). The train
loop facade serves the counters and the stop rule of the host loop
(:class:`~lightning_hooks.families.mmengine.host_loop.MMEngineLoop`), which moves them; it never moves them itself.
A loop is given what it needs, the Lightning trainer (:meth:`attach`), the host loop (train) or what it may call to
run hooks (evaluation: the adapter's ``hook_caller``), and reads nothing from the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine.host_loop import MMEngineLoop
from lightning_hooks.families.mmengine.iter_based import EndlessSource, EpochLoopConfig, IterLoopConfig


class LoopFacade:
    """What every loop facade holds: the Lightning trainer of the running stage and, for hooks that read
    ``loop.runner`` (MMEngine's ``BaseLoop.runner``), the runner facade, which the loop itself never reads."""

    def __init__(self, runner: Any) -> None:
        self._runner = runner  # served by BaseLoop.runner
        self.trainer: pl.Trainer | None = None

    def attach(self, trainer: pl.Trainer) -> None:
        """Serve ``trainer``'s run (``setup`` of fit, validate or test)."""
        self.trainer = trainer

    @property
    def attached(self) -> pl.Trainer:
        """The trainer :meth:`attach` gave; an ``AttributeError`` before it (a read before any run)."""
        if self.trainer is None:
            raise AttributeError(f"{type(self).__name__}: no Lightning trainer is running yet")
        return self.trainer


class _TrainLoop(LoopFacade):
    """What MMEngine's train loops give hooks: dataloader (assignable), limits, counters, validation schedule and
    ``stop_training``. The counters and the stop rule are the host loop's
    (:class:`~lightning_hooks.families.mmengine.host_loop.MMEngineLoop`), which the facade reads and never moves.

    ``iter`` is the 0-based index of the current train iteration inside iter hooks and the number of finished
    iterations elsewhere (MMEngine's loop counts an iteration after its ``after_train_iter`` hooks);
    ``epoch`` is the current epoch in train hooks and epoch + 1 once it ended.
    """

    def __init__(self, runner: Any, loop: MMEngineLoop) -> None:
        super().__init__(runner)
        self._loop = loop

    # ---------------------------------------------------------- counters (MMEngine's ``iter`` / ``epoch``)
    @property
    def iter(self) -> int:
        return self._loop.iter

    @property
    def epoch(self) -> int:
        return self._loop.epoch

    def per_epoch(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per train epoch for a value hooks read every iteration (IterTimerHook ``max_iters``,
        LoggerHook ``train_dataloader``, RuntimeInfoHook ``optim_wrapper``); computed on every read outside one.

        Lightning sets up an epoch's train data and optimizers before the epoch starts, so the value holds until the
        epoch ends or a hook assigns ``dataloader``."""
        values = self._loop.epoch_values
        if values is None:
            return compute()
        if name not in values:
            values[name] = compute()
        return values[name]

    # -------------------------------------------------------------------------------------------------- limits
    @property
    def max_iters(self) -> int:
        """Train iterations (batches) of the whole run, as MMEngine counts them: ``max_epochs`` or ``max_steps``,
        whichever ends the run first."""
        return self.per_epoch("max_iters", self._max_iters)

    def _max_iters(self) -> int:
        trainer = self.trainer
        if trainer is None:
            return 0
        batches = self._train_batches()
        max_epochs = _max_epochs(trainer)
        if trainer.max_steps < 0:
            return int(max_epochs * batches)
        by_steps = trainer.max_steps * trainer.accumulate_grad_batches
        if max_epochs < 0 or batches == float("inf"):
            return by_steps
        return int(min(by_steps, max_epochs * batches))  # batches is finite here: an int

    @property
    def max_epochs(self) -> int:
        """Train epochs of the run: ``Trainer(max_epochs)``, or the passes over the data that ``max_steps`` allows when
        it ends the run first (1, as MMEngine's ``IterBasedTrainLoop`` reports, when the loader has no length)."""
        trainer = self.trainer
        if trainer is None:
            return 0
        max_epochs = _max_epochs(trainer)
        if trainer.max_steps < 0:
            return max_epochs
        batches = self._train_batches()
        if batches in (0, float("inf")):
            return max_epochs if max_epochs > 0 else 1
        return math.ceil(self.max_iters / batches)

    def _train_batches(self) -> int | float:
        trainer = self.attached
        if trainer.num_training_batches == float("inf") and trainer.state.fn == "fit":
            # hooks read the limits in before_run, before Lightning sized the loader
            lightning_api.setup_train_data(trainer)
        return trainer.num_training_batches

    @property
    def val_interval(self) -> int:
        """``Trainer(check_val_every_n_epoch)``."""
        trainer = self.trainer
        return (trainer.check_val_every_n_epoch or 1) if trainer is not None else 1

    # ---------------------------------------------------------------------------------------------------- data
    @property
    def dataloader(self) -> Any:
        """The loader Lightning trains on (iteration-based: the loader, not the endless view Lightning iterates)."""
        return self.per_epoch("dataloader", self._dataloader)

    @dataloader.setter
    def dataloader(self, loader: Any) -> None:
        """``runner.train_loop.dataloader = loader``: train on ``loader`` from where MMEngine's epoch-based loop would.

        The loop iterates ``train_loop.dataloader`` after ``before_train_epoch``, so an assignment in that mount point
        trains the same epoch on the new loader; one anywhere else takes effect at the next epoch. Lightning gets
        the loader as its train data source and rebuilds its train data (distributed sampler, batch count, validation
        schedule) as ``Trainer(reload_dataloaders_every_n_epochs)`` does.
        """
        trainer = self.trainer
        if trainer is None or trainer.state.fn != "fit":
            raise RuntimeError(
                "runner.train_loop.dataloader = ...: assign the train dataloader while trainer.fit runs (a train hook); "
                "outside fit, pass the loader to trainer.fit(...)"
            )
        # inside before_train_epoch this epoch's batches are still to come; elsewhere the next epoch takes it
        if self._loop.epoch_values is not None:
            self._loop.epoch_values.clear()  # the new loader's length
        lightning_api.replace_train_loader(trainer, loader, now=lightning_api.train_epoch_pending(trainer))

    def _dataloader(self) -> Any:
        trainer = self.attached
        source = lightning_api.train_data_source(trainer)
        if isinstance(source, EndlessSource):  # iteration-based: the loader, not the endless view Lightning iterates
            return source.loader
        pending = lightning_api.pending_train_loader(trainer)
        if pending is not None:  # a hook assigned it for the next epoch: what the Runner's train_loop.dataloader is
            return pending
        if trainer.train_dataloader is None and trainer.state.fn == "fit":
            # asked for before Lightning sized the loader (before_run, on_fit_start)
            lightning_api.setup_train_data(trainer)
        return trainer.train_dataloader

    # ---------------------------------------------------------------------------------------------------- stop
    @property
    def stop_training(self) -> bool:
        trainer = self.trainer
        return self._loop.stop_requested or (trainer is not None and trainer.should_stop)

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._loop.request_stop(value)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "runner.train_loop.run(): Lightning's fit loop runs training under lightning-hooks; call trainer.fit(...) "
            "instead of running the MMEngine loop from a hook."
        )

    run_epoch = run_iter = run


class EpochTrainLoop(_TrainLoop, EpochBasedTrainLoop):
    """``runner.train_loop`` of an epoch-based run: an ``EpochBasedTrainLoop`` to hooks; its validation schedule is
    ``cfg``'s (``train_cfg``) when that has ``val_begin`` / ``dynamic_intervals``, else the Trainer's.

    Example: ``isinstance(runner.train_loop, EpochBasedTrainLoop)`` holds, as mmpretrain's ``PreciseBNHook`` checks.
    """

    def __init__(self, runner: Any, loop: MMEngineLoop) -> None:
        super().__init__(runner, loop)
        cfg = loop.cfg
        #: the ``train_cfg`` whose validation schedule the host loop plans (``val_begin``, ``dynamic_intervals``)
        self.cfg = cfg if isinstance(cfg, EpochLoopConfig) and cfg.scheduled else None

    @property
    def val_begin(self) -> int:
        return self.cfg.val_begin if self.cfg is not None else 1

    @property
    def val_interval(self) -> int:
        """The interval in force now (``dynamic_intervals``), as ``EpochBasedTrainLoop`` updates it; without a
        schedule, ``Trainer(check_val_every_n_epoch)``."""
        return self.cfg.interval_at(self.epoch) if self.cfg is not None else super().val_interval


class IterTrainLoop(_TrainLoop, IterBasedTrainLoop):
    """``runner.train_loop`` of an iteration-based run: an ``IterBasedTrainLoop`` to hooks, whose whole run is one
    epoch (``epoch`` 0, ``max_epochs`` 1) of ``cfg.max_iters`` iterations, ``batch_idx`` the global iteration.

    Example: ``runner.train_loop.val_interval`` follows ``cfg.dynamic_intervals`` as ``runner.iter`` advances.
    """

    def __init__(self, runner: Any, loop: MMEngineLoop) -> None:
        super().__init__(runner, loop)
        assert isinstance(loop.cfg, IterLoopConfig), "an IterBasedTrainLoop run has an IterLoopConfig"
        self.cfg: IterLoopConfig = loop.cfg

    @property
    def max_iters(self) -> int:
        return self.cfg.max_iters

    @property
    def max_epochs(self) -> int:
        return 1  # IterBasedTrainLoop's value: the whole run is one epoch

    @property
    def val_begin(self) -> int:
        return self.cfg.val_begin

    @property
    def val_interval(self) -> int:
        """The interval in force now (``dynamic_intervals``), as ``IterBasedTrainLoop`` updates it."""
        return self.cfg.interval_at(self.iter)

    @property
    def dataloader(self) -> Any:
        """The loader a hook assigned last, else the one Lightning trains on (see :class:`_TrainLoop`)."""
        return super().dataloader

    @dataloader.setter
    def dataloader(self, loader: Any) -> None:
        """``runner.train_loop.dataloader = loader``: what hooks read from now on (``runner.train_dataloader``). As
        under MMEngine, whose ``IterBasedTrainLoop`` draws batches from an iterator it built once, the batches change
        only when a hook also assigns :attr:`dataloader_iterator` (mmagic's ``PGGANFetchDataHook`` assigns both)."""
        self._source("dataloader").loader = loader
        if self._loop.epoch_values is not None:
            self._loop.epoch_values.clear()  # values computed from the former loader

    @property
    def dataloader_iterator(self) -> Any:
        """The iterator a hook assigned; before that, Lightning's own iteration of the loader, which hooks cannot
        take over (an error says so)."""
        iterator = self._source("dataloader_iterator").iterator
        if iterator is None:
            raise AttributeError(
                "runner.train_loop.dataloader_iterator: Lightning's fit loop iterates the train loader under "
                "lightning-hooks, and a hook cannot draw batches from that iteration. Read runner.train_loop.dataloader "
                "instead, or assign an iterator (e.g. mmengine's _InfiniteDataloaderIterator(loader)) to switch the "
                "data from the next iteration, as MMEngine's IterBasedTrainLoop does."
            )
        return iterator

    @dataloader_iterator.setter
    def dataloader_iterator(self, iterator: Any) -> None:
        """``runner.train_loop.dataloader_iterator = iterator``: the next iteration's batch, and every later one, is
        ``next(iterator)``, as ``IterBasedTrainLoop`` draws it (Lightning's batch fetched ahead is fetched again)."""
        self._source("dataloader_iterator").redirect(self.attached, iterator)

    def _source(self, attribute: str) -> EndlessSource:
        trainer = self.trainer
        source = lightning_api.train_data_source(trainer) if trainer is not None else None
        if trainer is None or trainer.state.fn != "fit" or not isinstance(source, EndlessSource):
            raise RuntimeError(
                f"runner.train_loop.{attribute} = ...: assign the train data while trainer.fit runs (a train hook); "
                "outside fit, pass the loader to trainer.fit(...)"
            )
        return source


def _max_epochs(trainer: pl.Trainer) -> int:
    """``trainer.max_epochs``, an int once the Trainer is built (it resolves None to 1000, or -1 with ``max_steps``)."""
    max_epochs = trainer.max_epochs
    assert max_epochs is not None, "the Trainer resolves max_epochs=None when it is built"
    return max_epochs


def train_loop(runner: Any, loop: MMEngineLoop) -> EpochTrainLoop | IterTrainLoop:
    """The train loop facade hooks see for the host loop ``loop``: an ``IterBasedTrainLoop`` for an iteration-based
    ``train_cfg``, else an ``EpochBasedTrainLoop``."""
    return EpochTrainLoop(runner, loop) if loop.by_epoch else IterTrainLoop(runner, loop)
