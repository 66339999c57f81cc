"""Fixtures shared by every test directory."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def trainer_kwargs(tmp_path):
    """Quiet, CPU-only Trainer settings writing under tmp_path."""
    return dict(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
