"""The iMIX tests' model, in an importable module so that EvaluateHook can pickle it."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch


class OptimizerFirstModule(L.LightningModule):
    """Linear(4 -> 1) with MSE; the optimizer (and so iMIX hooks that need it) is built before the Trainer."""

    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=lr)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer
