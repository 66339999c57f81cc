"""Shared fixtures for the iMIX adapter tests: a tiny regression module, its data and a quiet Lightning trainer."""

from __future__ import annotations

import copy
from typing import Any

import lightning as L
import pytest
import torch
from imix_testkit import OptimizerFirstModule
from torch.utils.data import DataLoader, TensorDataset

N_BATCHES = 6
BATCH = 4


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N_BATCHES * BATCH, 4, generator=g) * 3
    y = torch.randn(N_BATCHES * BATCH, 1, generator=g) * 3
    return [(x[i : i + BATCH], y[i : i + BATCH]) for i in range(0, len(x), BATCH)]


@pytest.fixture
def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The training batches, in the order the dataloader yields them."""
    return _batches()


@pytest.fixture
def loader() -> DataLoader:
    x = torch.cat([b[0] for b in _batches()])
    y = torch.cat([b[1] for b in _batches()])
    return DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=False)


@pytest.fixture
def make_trainer(tmp_path: Any) -> Any:
    """``make_trainer(callbacks, **trainer_kwargs)``: a quiet CPU trainer, two epochs by default."""
    return lambda callbacks, **kwargs: _trainer(tmp_path, callbacks, **kwargs)


def _trainer(tmp_path: Any, callbacks: list[Any], **kwargs: Any) -> L.Trainer:
    options = dict(
        max_epochs=2,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
    )
    options.update(kwargs)
    return L.Trainer(callbacks=callbacks, **options)


@pytest.fixture
def module() -> OptimizerFirstModule:
    return OptimizerFirstModule()


@pytest.fixture
def twin(module: OptimizerFirstModule) -> torch.nn.Linear:
    """An independent copy of the module's network for reference loops."""
    return copy.deepcopy(module.net)
