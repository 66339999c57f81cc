"""``runner.train_loop``: MMEngine's train loop classes as hooks see them, driven by Lightning (``val_loop`` /
``test_loop``: :mod:`~lightning_hooks.families.mmengine.eval_loops`).

Each facade is an instance of the MMEngine loop it stands for (``EpochBasedTrainLoop`` or ``IterBasedTrainLoop``,
``ValLoop``, ``TestLoop``), so hooks that branch on ``isinstance(runner.train_loop, ...)`` take the branch they take
under MMEngine's ``Runner``. The loop classes' constructors are not called (they build dataloaders and evaluators):
every attribute a hook reads is served from the Lightning trainer, and ``run`` refuses, because Lightning runs the
loops.

As in MMEngine's ``runner/loops.py``, the loops own the run's counters and limits (``iter``, ``epoch``,
``max_iters``, ``max_epochs``) and their data; the runner facade reads them from its loops (``runner.iter`` is
``runner.train_loop.iter``). A loop is given what it needs, the Lightning trainer (:meth:`attach`), the ``train_cfg``
loop settings and, for the evaluation loops, what they may call to run hooks (the adapter's ``hook_caller``), and
reads nothing from the runner.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import pl
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


class _TrainLoop(LoopFacade):
    """What MMEngine's train loops give hooks: dataloader (assignable), limits, counters, validation schedule and
    ``stop_training``, which stops the Lightning trainer between epochs as MMEngine's loops do: set inside a train
    epoch, Lightning stops after it.

    ``iter`` is the 0-based index of the current train iteration inside iter hooks and the number of finished
    iterations elsewhere (MMEngine's loop counts an iteration after its ``after_train_iter`` hooks);
    ``epoch`` is the current epoch in train hooks and epoch + 1 once it ended.
    """

    def __init__(self, runner: Any) -> None:
        super().__init__(runner)
        self._iter = 0  # served by the MMEngine loop's own iter / epoch properties
        self._epoch = 0
        self._stepped = False  # the current iteration's train step ran; its after_train_iter hooks are running
        #: values that hold for the running train epoch (:meth:`per_epoch`); None outside one
        self.epoch_values: dict[str, Any] | None = None
        self._stop = False

    def attach(self, trainer: pl.Trainer) -> None:
        """Serve ``trainer``'s run: no stop requested, no train epoch open, ``epoch`` from the trainer."""
        super().attach(trainer)
        self.epoch_values = None
        self._stop = False
        self.sync_epoch()

    # ---------------------------------------------------------- counters (MMEngine's ``iter`` / ``epoch`` read them)
    @property
    def finished_iters(self) -> int:
        """Train iterations whose train step ran: ``iter``, plus the current one while its ``after_train_iter`` hooks
        run (a checkpoint written there resumes after it)."""
        return self._iter + self._stepped

    def restart(self, finished_iters: int = 0) -> None:
        """A training run starts (from scratch, or resumed after ``finished_iters`` iterations)."""
        self._iter, self._stepped = finished_iters, False

    def resumed(self, checkpoint: dict[str, Any], logger: Any) -> None:
        """A fit resumes from ``checkpoint`` (after its ``after_load_checkpoint`` hooks, before Lightning restores its
        loops from it): ``logger`` (the runner's) says so as ``Runner.resume`` does, ``resumed epoch: E, iter: I``
        from the checkpoint's MMEngine ``meta``."""
        meta: Mapping[str, Any] = checkpoint.get("meta") or {}
        logger.info(f"resumed epoch: {meta.get('epoch', 0)}, iter: {meta.get('iter', 0)}")

    def epoch_began(self) -> None:
        """The train epoch's ``before_train_epoch`` hooks ran (what ``IterTrainLoop`` does then)."""

    def batch_idx(self, batch_idx: int) -> int:
        """The ``batch_idx`` train iter hooks get for Lightning's ``batch_idx``: the index in the epoch."""
        return batch_idx

    def step_done(self) -> None:
        """The current iteration's train step ran (before its ``after_train_iter`` hooks)."""
        self._stepped = True

    def advance(self) -> None:
        """The current iteration ended (after its ``after_train_iter`` hooks): ``iter`` counts it."""
        self._iter, self._stepped = self._iter + 1, False

    def sync_epoch(self, ended: bool = False) -> None:
        """``epoch`` from Lightning's epoch, + 1 once the epoch ended, as ``EpochBasedTrainLoop`` counts."""
        self._epoch = self.trainer.current_epoch + ended if self.trainer is not None else 0

    def start_epoch(self) -> None:
        """A train epoch starts (Lightning has set up its data): the per-epoch values are computed anew."""
        self.sync_epoch()
        self.epoch_values = {}

    def end_epoch(self) -> None:
        """The train epoch ended: a stop requested during it stops Lightning now (after the epoch's validation)."""
        self.sync_epoch(ended=True)
        self.epoch_values = None
        self._apply_stop()

    def per_epoch(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per train epoch for a value hooks read every iteration (IterTimerHook ``max_iters``,
        LoggerHook ``train_dataloader``, RuntimeInfoHook ``optim_wrapper``); computed on every read outside one.

        Lightning sets up an epoch's train data and optimizers before the epoch starts, so the value holds until the
        epoch ends or a hook assigns ``dataloader``."""
        values = self.epoch_values
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
        if trainer.max_steps < 0:
            return int(trainer.max_epochs * batches)
        by_steps = trainer.max_steps * trainer.accumulate_grad_batches
        if trainer.max_epochs < 0 or batches == float("inf"):
            return by_steps
        return min(by_steps, trainer.max_epochs * batches)

    @property
    def max_epochs(self) -> int:
        """Train epochs of the run: ``Trainer(max_epochs)``, or the passes over the data that ``max_steps`` allows when
        it ends the run first (1, as MMEngine's ``IterBasedTrainLoop`` reports, when the loader has no length)."""
        trainer = self.trainer
        if trainer is None:
            return 0
        if trainer.max_steps < 0:
            return trainer.max_epochs
        batches = self._train_batches()
        if batches in (0, float("inf")):
            return trainer.max_epochs if trainer.max_epochs > 0 else 1
        return math.ceil(self.max_iters / batches)

    def _train_batches(self) -> int | float:
        trainer = self.trainer
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

    def _dataloader(self) -> Any:
        trainer = self.trainer
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
        if self.epoch_values is not None:
            self.epoch_values.clear()  # the new loader's length
        lightning_api.replace_train_loader(trainer, loader, now=lightning_api.train_epoch_pending(trainer))

    # ---------------------------------------------------------------------------------------------------- stop
    @property
    def stop_training(self) -> bool:
        trainer = self.trainer
        return self._stop or (trainer is not None and trainer.should_stop)

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._stop = bool(value)
        if self.epoch_values is None:  # between train epochs
            self._apply_stop()

    @property
    def stop_requested(self) -> bool:
        """Whether a hook of this process set ``stop_training`` in this run."""
        return self._stop

    def agree_on_stop(self) -> None:
        """Under DDP, stop every rank when any rank's hooks set ``stop_training`` (as Lightning's EarlyStopping)."""
        trainer = self.trainer
        if trainer.world_size > 1 and trainer.strategy.reduce_boolean_decision(self._stop, all=False):
            self.stop_training = True

    def _apply_stop(self) -> None:
        if self._stop and self.trainer is not None:
            self.trainer.should_stop = True

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

    def __init__(self, runner: Any, cfg: EpochLoopConfig | None = None) -> None:
        super().__init__(runner)
        self.cfg = cfg if cfg is not None and cfg.scheduled else None
        #: the run is an ``EpochBasedTrainLoop`` of a ``train_cfg`` (a config's run), resumed as the Runner resumes it
        self.configured = cfg is not None

    def resumed(self, checkpoint: dict[str, Any], logger: Any) -> None:
        """Also, for a ``train_cfg``'s loop: a checkpoint written inside an epoch (``CheckpointHook`` by iteration,
        its ``meta`` epoch the epoch that ran) resumes at that epoch's first batch, as ``EpochBasedTrainLoop.run_epoch``
        iterates its whole loader again after ``Runner.resume``: the epoch's batches all run once more, ``iter``
        going on from the checkpoint's. Without ``train_cfg`` (MMEngine hooks in a Trainer of your own, maybe beside
        other families' adapters) Lightning's own resume stands: it goes on from the batch after the saved one."""
        super().resumed(checkpoint, logger)
        if not self.configured:
            return
        meta = checkpoint.get("meta") or {}
        loop = checkpoint.get("loops", {}).get("fit_loop", {})
        ran = loop.get("epoch_progress", {}).get("current", {}).get("processed")
        if ran is not None and meta.get("epoch") == ran:
            lightning_api.restart_epoch_at_start(checkpoint)

    @property
    def val_begin(self) -> int:
        return self.cfg.val_begin if self.cfg is not None else 1

    @property
    def val_interval(self) -> int:
        """The interval in force now (``dynamic_intervals``), as ``EpochBasedTrainLoop`` updates it; without a
        schedule, ``Trainer(check_val_every_n_epoch)``."""
        return self.cfg.interval_at(self._epoch) if self.cfg is not None else super().val_interval


class IterTrainLoop(_TrainLoop, IterBasedTrainLoop):
    """``runner.train_loop`` of an iteration-based run: an ``IterBasedTrainLoop`` to hooks, whose whole run is one
    epoch (``epoch`` 0, ``max_epochs`` 1) of ``cfg.max_iters`` iterations, ``batch_idx`` the global iteration.

    Example: ``runner.train_loop.val_interval`` follows ``cfg.dynamic_intervals`` as ``runner.iter`` advances.
    """

    def __init__(self, runner: Any, cfg: IterLoopConfig) -> None:
        super().__init__(runner)
        self.cfg = cfg

    def batch_idx(self, batch_idx: int) -> int:
        """``IterBasedTrainLoop`` passes the global iteration as ``batch_idx``."""
        return self._iter

    def epoch_began(self) -> None:
        """After ``before_train_epoch``, a resumed run says that it skips the batches it trained on (the endless
        loader skips them, :class:`~lightning_hooks.families.mmengine.iter_based.Endless`), as ``IterBasedTrainLoop``
        logs it to the current logger before it advances its loader."""
        if self._iter > 0:
            print_log(f"Advance dataloader {self._iter} steps to skip data that has already been trained",
                      logger="current", level=logging.WARNING)  # fmt: skip

    def sync_epoch(self, ended: bool = False) -> None:
        self._epoch = 0  # IterBasedTrainLoop's epoch stays 0

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
        return self.cfg.interval_at(self._iter)

    @_TrainLoop.dataloader.setter
    def dataloader(self, loader: Any) -> None:
        """``runner.train_loop.dataloader = loader``: what hooks read from now on (``runner.train_dataloader``). As
        under MMEngine, whose ``IterBasedTrainLoop`` draws batches from an iterator it built once, the batches change
        only when a hook also assigns :attr:`dataloader_iterator` (mmagic's ``PGGANFetchDataHook`` assigns both)."""
        self._source("dataloader").loader = loader
        if self.epoch_values is not None:
            self.epoch_values.clear()  # values computed from the former loader

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
        self._source("dataloader_iterator").redirect(self.trainer, iterator)

    def _source(self, attribute: str) -> EndlessSource:
        trainer = self.trainer
        source = lightning_api.train_data_source(trainer) if trainer is not None else None
        if trainer is None or trainer.state.fn != "fit" or not isinstance(source, EndlessSource):
            raise RuntimeError(
                f"runner.train_loop.{attribute} = ...: assign the train data while trainer.fit runs (a train hook); "
                "outside fit, pass the loader to trainer.fit(...)"
            )
        return source


def train_loop(runner: Any, cfg: EpochLoopConfig | IterLoopConfig | None) -> EpochTrainLoop | IterTrainLoop:
    """The train loop facade of ``train_cfg`` (``cfg``, parsed): ``IterBasedTrainLoop`` semantics for an
    :class:`IterLoopConfig`, else ``EpochBasedTrainLoop``'s."""
    return IterTrainLoop(runner, cfg) if isinstance(cfg, IterLoopConfig) else EpochTrainLoop(runner, cfg)
