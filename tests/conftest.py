"""Fixtures shared by every test directory."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_process_group_left():
    """Lightning's DDP strategy leaves its default process group after a single-process fit (the process may fit
    again); tests that build their own then fail with "initialize the default process group twice", depending on
    the order tests run in. Each test starts without one."""
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


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
