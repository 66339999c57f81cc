"""The ``task`` facade Classy Vision and VISSL hooks receive."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch

from lightning_hooks.core.facade import Facade


class Task(Facade):
    """Classy's ``ClassificationTask`` (and VISSL's ``SelfSupervisionTask``) as their hooks see it.

    Phase counters follow Classy: ``phase_idx`` counts train and test phases together, ``train_phase_idx`` the train
    phases, ``eval_phase_idx = phase_idx - train_phase_idx - 1``.
    """

    host = "task"

    def __init__(self) -> None:
        self.trainer: pl.Trainer | None = None
        self.train = True
        self.phase_idx = -1
        self.train_phase_idx = -1
        self.losses: list[float] = []
        self.last_batch: Any = None

    @property
    def base_model(self) -> pl.LightningModule:
        return self.trainer.lightning_module

    @property
    def model(self) -> torch.nn.Module:
        """The LightningModule, or its DDP wrapper when distributed."""
        return self.trainer.strategy.model

    @property
    def phase_type(self) -> str:
        return "train" if self.train else "test"

    @property
    def eval_phase_idx(self) -> int:
        return self.phase_idx - self.train_phase_idx - 1

    @property
    def num_train_phases(self) -> int:
        return self.trainer.max_epochs

    @property
    def device(self) -> torch.device:
        return self.base_model.device

    @property
    def use_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def test_only(self) -> bool:
        return not self.trainer.training and self.trainer.testing

    @property
    def where(self) -> float:
        """Fraction of training done, as Classy's ``task.where``."""
        trainer = self.trainer
        total = trainer.estimated_stepping_batches
        return min(trainer.global_step / total, 1.0) if total else 0.0

    def start_phase(self, train: bool) -> None:
        self.train = train
        self.phase_idx += 1
        self.train_phase_idx += int(train)
        self.losses = []
