"""``runner.train_loop`` / ``val_loop`` / ``test_loop``: MMEngine's loop classes as hooks see them, driven by Lightning.

Each facade is an instance of the MMEngine loop it stands for (``EpochBasedTrainLoop`` or ``IterBasedTrainLoop``,
``ValLoop``, ``TestLoop``), so hooks that branch on ``isinstance(runner.train_loop, ...)`` take the branch they take
under MMEngine's ``Runner``. The loop classes' constructors are not called (they build dataloaders and evaluators):
every attribute a hook reads is served from the Lightning trainer, and ``run`` refuses, because Lightning runs the
loops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from mmengine.evaluator import Evaluator
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop, TestLoop, ValLoop

from lightning_hooks.core.triggers import ON

if TYPE_CHECKING:
    from lightning_hooks.families.mmengine.runner import Runner


class _TrainLoop:
    """What MMEngine's train loops give hooks: dataloader (assignable), limits, counters, validation schedule and
    ``stop_training``, which stops the Lightning trainer between epochs as MMEngine's loops do: set inside a train
    epoch, Lightning stops after it."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        #: the runner's values that hold for the running train epoch (``runner._PerTrainEpoch``); None outside one
        self.epoch_values: dict[str, Any] | None = None
        self._stop = False

    @property
    def runner(self) -> Runner:
        return self._runner

    @property
    def dataloader(self) -> Any:
        return self._runner.train_dataloader

    @dataloader.setter
    def dataloader(self, loader: Any) -> None:
        self._runner.set_train_dataloader(loader)

    @property
    def max_iters(self) -> int:
        return self._runner.max_iters

    @property
    def max_epochs(self) -> int:
        return self._runner.max_epochs

    @property
    def iter(self) -> int:
        return self._runner.iter

    @property
    def epoch(self) -> int:
        return self._runner.epoch

    @property
    def val_begin(self) -> int:
        """The first epoch (iteration) after which Lightning validates: 1, as MMEngine's default."""
        return 1

    @property
    def val_interval(self) -> int:
        """``Trainer(check_val_every_n_epoch)`` for the epoch-based loop."""
        trainer = self._runner.trainer
        return (trainer.check_val_every_n_epoch or 1) if trainer is not None else 1

    @property
    def stop_training(self) -> bool:
        trainer = self._runner.trainer
        return self._stop or (trainer is not None and trainer.should_stop)

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._stop = bool(value)
        if self.epoch_values is None:  # between train epochs
            self._apply_stop()

    def start_epoch(self) -> None:
        """A train epoch starts (Lightning has set up its data): the runner's per-epoch values are computed anew."""
        self.epoch_values = {}

    def end_epoch(self) -> None:
        """The train epoch ended: a stop requested during it stops Lightning now (after the epoch's validation)."""
        self.epoch_values = None
        self._apply_stop()

    def _apply_stop(self) -> None:
        if self._stop and self._runner.trainer is not None:
            self._runner.trainer.should_stop = True

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            "runner.train_loop.run(): Lightning's fit loop runs training under lightning-hooks; call trainer.fit(...) "
            "instead of running the MMEngine loop from a hook."
        )

    run_epoch = run_iter = run


class EpochTrainLoop(_TrainLoop, EpochBasedTrainLoop):
    """``runner.train_loop`` of an epoch-based run: an ``EpochBasedTrainLoop`` to hooks."""


class IterTrainLoop(_TrainLoop, IterBasedTrainLoop):
    """``runner.train_loop`` of an iteration-based run: an ``IterBasedTrainLoop`` to hooks."""

    @property
    def max_epochs(self) -> int:
        return 1  # IterBasedTrainLoop's value

    @property
    def val_begin(self) -> int:
        return self._runner._loop_cfg.val_begin

    @property
    def val_interval(self) -> int:
        """The interval in force now (``dynamic_intervals``), as ``IterBasedTrainLoop`` updates it."""
        return self._runner._loop_cfg.interval_at(self._runner.iter)

    @property
    def dataloader(self) -> Any:
        return self._runner.train_dataloader

    @dataloader.setter
    def dataloader(self, loader: Any) -> None:
        raise RuntimeError(
            "runner.train_loop.dataloader = ...: MMEngine's IterBasedTrainLoop draws batches from an iterator it "
            "builds once, so assigning its dataloader changes nothing under MMEngine either. To switch the data of an "
            "iteration-based run, return the new loader from your LightningModule/LightningDataModule "
            "train_dataloader() and set Trainer(reload_dataloaders_every_n_epochs=1)."
        )


def train_loop(runner: Runner, by_epoch: bool = True) -> EpochTrainLoop | IterTrainLoop:
    """The train loop facade: ``EpochBasedTrainLoop`` semantics when ``by_epoch``, else ``IterBasedTrainLoop``."""
    return EpochTrainLoop(runner) if by_epoch else IterTrainLoop(runner)


class _EvalLoop:
    """What ``ValLoop`` / ``TestLoop`` give hooks: ``dataloader``, ``evaluator`` and ``run_iter``, which runs one batch
    as MMEngine's loop does (``before_*_iter`` hooks, the LightningModule's ``validation_step``/``test_step`` without
    gradients, ``after_*_iter`` hooks). The LightningModule's step must feed ``evaluator`` (``evaluator.process``), as
    MMEngine's loop does after ``model.val_step``."""

    stage = ""
    step = ""
    fp16 = False

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    @property
    def runner(self) -> Runner:
        return self._runner

    @property
    def dataloader(self) -> Any:
        return getattr(self._runner, f"{self.stage}_dataloader")

    def found_evaluator(self) -> Evaluator | None:
        """The LightningModule's ``{stage}_evaluator`` or ``evaluator`` attribute (an ``mmengine.evaluator.Evaluator``),
        if it has one."""
        module = self._module()
        for name in (f"{self.stage}_evaluator", "evaluator"):
            found = getattr(module, name, None)
            if isinstance(found, Evaluator):
                return found
        return None

    @property
    def evaluator(self) -> Evaluator:
        """:meth:`found_evaluator`; without one, an error naming what to keep on the LightningModule."""
        found = self.found_evaluator()
        if found is not None:
            return found
        module = self._module()
        raise AttributeError(
            f"runner.{self.stage}_loop.evaluator: {type(module).__name__} has no mmengine Evaluator. MMEngine's "
            f"{type(self).__mro__[2].__name__} holds the evaluator its hooks read; under Lightning, keep it on the "
            f"LightningModule as self.{self.stage}_evaluator or self.evaluator (an mmengine.evaluator.Evaluator) and "
            f"call its process(data_samples=..., data_batch=...) in {self.step}, as MMEngine's loop does."
        )

    @torch.no_grad()
    def run_iter(self, idx: int, data_batch: Any) -> None:
        """One batch as MMEngine's loop runs it: hooks, the LightningModule's step, hooks."""
        event = "validation" if self.stage == "val" else "test"
        adapter = self._runner._adapter
        adapter.fire(ON[f"on_{event}_batch_start"], batch_idx=idx, data_batch=data_batch)
        outputs = getattr(self._module(), self.step)(data_batch, idx)
        adapter.fire(ON[f"on_{event}_batch_end"], batch_idx=idx, data_batch=data_batch, outputs=outputs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        call = "trainer.validate(...)" if self.stage == "val" else "trainer.test(...)"
        raise RuntimeError(
            f"runner.{self.stage}_loop.run(): Lightning runs evaluation under lightning-hooks; call {call} "
            "instead of running the MMEngine loop from a hook."
        )

    def _module(self) -> Any:
        trainer = self._runner.trainer
        if trainer is None:
            raise AttributeError(f"runner.{self.stage}_loop: no Lightning trainer is running yet")
        return trainer.lightning_module


class EvalValLoop(_EvalLoop, ValLoop):
    """``runner.val_loop``: a ``ValLoop`` to hooks."""

    stage, step = "val", "validation_step"


class EvalTestLoop(_EvalLoop, TestLoop):
    """``runner.test_loop``: a ``TestLoop`` to hooks."""

    stage, step = "test", "test_step"
