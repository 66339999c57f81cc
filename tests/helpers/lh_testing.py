"""Small models and data shared by the test suite (importable: pytest puts tests/helpers on sys.path)."""

from __future__ import annotations

import inspect
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset


class TinyModule(pl.LightningModule):
    """Linear regression: the smallest LightningModule a hook can observe."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("val_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def tiny_loader(n: int = 8, batch_size: int = 2, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


def load_options(weights_only: bool | None) -> dict[str, Any]:
    """``weights_only=`` for ``Trainer.fit``/``validate``/``test``: Lightning 2.6 takes it; 2.4 and 2.5 have no such
    argument and load checkpoints with ``weights_only=False``."""
    if "weights_only" in inspect.signature(pl.Trainer.fit).parameters:
        return {"weights_only": weights_only}
    assert not weights_only, "this Lightning cannot load checkpoints with weights_only=True"
    return {}
