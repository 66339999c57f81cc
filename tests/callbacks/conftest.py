"""Shared fixtures for the native-callback tests: small, fast, deterministic trainers."""

import warnings
from typing import Any, Callable

import lightning.pytorch as pl
import pytest
import torch


@pytest.fixture(autouse=True)
def _quiet_and_deterministic() -> None:
    torch.manual_seed(0)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")


@pytest.fixture
def make_trainer(tmp_path) -> Callable[..., pl.Trainer]:
    """``make_trainer(**overrides)``: a CPU trainer with no logger, progress bar, summary or sanity check."""

    def factory(**kwargs: Any) -> pl.Trainer:
        defaults = dict(
            accelerator="cpu",
            devices=1,
            default_root_dir=str(tmp_path),
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            deterministic=True,
        )
        defaults.update(kwargs)
        return pl.Trainer(**defaults)

    return factory
