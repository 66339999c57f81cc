"""The ``runner`` facade MMEngine hooks receive."""

from __future__ import annotations

import os
import time
from typing import Any

import lightning.pytorch as pl

from lightning_hooks.core.facade import Facade


class TrainLoop:
    """``runner.train_loop``: the train dataloader, limits, and ``stop_training`` that stops the Lightning trainer."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner

    @property
    def dataloader(self) -> Any:
        return self._runner.train_dataloader

    @property
    def max_iters(self) -> int:
        return self._runner.max_iters

    @property
    def max_epochs(self) -> int:
        return self._runner.max_epochs

    @property
    def stop_training(self) -> bool:
        trainer = self._runner.trainer
        return trainer is not None and trainer.should_stop

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        if value:
            self._runner.trainer.should_stop = True


class Runner(Facade):
    """MMEngine's ``Runner`` as its hooks see it, backed by a Lightning trainer.

    ``iter`` is the 0-based index of the current train iteration inside iter hooks and the number of finished
    iterations elsewhere; ``epoch`` is the current epoch, and epoch + 1 during the validation that follows it.
    """

    host = "runner"

    def __init__(self, work_dir: str | os.PathLike | None = None, experiment_name: str | None = None) -> None:
        self.trainer: pl.Trainer | None = None
        self._work_dir = None if work_dir is None else os.fspath(work_dir)
        self.timestamp = time.strftime("%Y%m%d_%H%M%S", time.localtime())
        self.experiment_name = experiment_name or self.timestamp
        self.iter = 0
        self.epoch = 0
        self.train_loop = TrainLoop(self)

    @property
    def work_dir(self) -> str:
        if self._work_dir is not None:
            return self._work_dir
        return self.trainer.default_root_dir if self.trainer is not None else os.getcwd()

    @property
    def log_dir(self) -> str:
        return os.path.join(self.work_dir, self.timestamp)

    @property
    def model(self) -> Any:
        """The LightningModule, or the DDP wrapper around it when the strategy wrapped it."""
        return self.trainer.strategy.model if self.trainer is not None else None

    @property
    def max_epochs(self) -> int:
        return self.trainer.max_epochs if self.trainer is not None else 0

    @property
    def max_iters(self) -> int:
        trainer = self.trainer
        if trainer is None:
            return 0
        if trainer.max_steps > 0:
            return trainer.max_steps * trainer.accumulate_grad_batches
        return int(trainer.max_epochs * trainer.num_training_batches)

    @property
    def train_dataloader(self) -> Any:
        return self.trainer.train_dataloader

    @property
    def val_dataloader(self) -> Any:
        loaders = self.trainer.val_dataloaders
        return loaders[0] if isinstance(loaders, (list, tuple)) else loaders

    @property
    def test_dataloader(self) -> Any:
        loaders = self.trainer.test_dataloaders
        return loaders[0] if isinstance(loaders, (list, tuple)) else loaders

    @property
    def rank(self) -> int:
        return self.trainer.global_rank if self.trainer is not None else 0

    @property
    def world_size(self) -> int:
        return self.trainer.world_size if self.trainer is not None else 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1
