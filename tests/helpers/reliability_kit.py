"""Shared helpers of the reliability tests (importable: pytest puts tests/helpers on sys.path)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from reliability_resume_run import Net, loader


def fit(
    tmp_path: Any, callbacks: list[Any], model: pl.LightningModule | None = None, ckpt_path: Any = None, **kwargs: Any
) -> pl.Trainer:
    """Fit ``Net`` (dict batches, 6 train batches, 2 val batches) for one epoch unless told otherwise."""
    options = dict(max_epochs=1, default_root_dir=tmp_path, accelerator="cpu", devices=1, logger=False,
                   enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0)  # fmt: skip
    trainer = pl.Trainer(callbacks=callbacks, **{**options, **kwargs})
    trainer.fit(model or Net(), loader(24, 0, False), loader(8, 1, False), ckpt_path=ckpt_path)
    return trainer
