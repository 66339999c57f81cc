"""The ``self.trainer`` facade iMIX hooks reach."""

from __future__ import annotations

import os
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_hooks.core.facade import Facade


class Trainer(Facade):
    """iMIX's engine as its hooks see it, backed by a Lightning trainer.

    ``iter`` is the 0-based index of the current iteration across epochs, ``inner_iter`` the index inside the epoch.
    """

    host = "trainer"

    def __init__(
        self,
        hooks: list[Any],
        by_epoch: bool = True,
        gradient_accumulation_steps: int = 1,
        is_lr_accumulation: bool = False,
        work_dir: str | os.PathLike | None = None,
        cfg: Any = None,
    ) -> None:
        self.lightning: pl.Trainer | None = None
        self._hooks = hooks
        self.by_epoch = by_epoch
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.is_lr_accumulation = is_lr_accumulation
        self._work_dir = None if work_dir is None else os.fspath(work_dir)
        self.cfg = cfg
        self.iter = 0
        self.inner_iter = 0
        self.start_iter = 0
        self.output: Any = None

    @property
    def work_dir(self) -> str:
        if self._work_dir is not None:
            return self._work_dir
        return self.lightning.default_root_dir if self.lightning is not None else os.getcwd()

    @property
    def model(self) -> torch.nn.Module:
        """The LightningModule, or its DDP wrapper (hooks probe ``.module``)."""
        return self.lightning.strategy.model

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.lightning.optimizers[0]

    @property
    def epoch(self) -> int:
        return self.lightning.current_epoch

    @property
    def max_epoch(self) -> int:
        return self.lightning.max_epochs

    @property
    def max_iter(self) -> int:
        trainer = self.lightning
        iters = trainer.max_steps if trainer.max_steps > 0 else int(trainer.max_epochs * trainer.num_training_batches)
        return iters // self.gradient_accumulation_steps if self.is_lr_accumulation else iters

    @property
    def data_loader(self) -> Any:
        return self.lightning.train_dataloader
