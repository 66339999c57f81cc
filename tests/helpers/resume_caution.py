"""Lightning's caution on a resume inside an epoch (``lightning_api.MID_EPOCH_RESUME_WARNING``), counted around a fit,
and a callback that writes a checkpoint inside an epoch: the kit of the tests that check which families' resumes
give it (``tests/integration/test_mid_epoch_resume_caution.py``, ``tests/families/mmcv/test_resume_caution.py``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from lightning_hooks.core import lightning_api

CAUTION = re.escape(lightning_api.MID_EPOCH_RESUME_WARNING)


def cautions(fit: Callable[[], Any]) -> int:
    """How many times ``fit()`` gave the caution; asserts that it left no filter of it behind."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fit()
        left = [f for f in warnings.filters if f[1] is not None and f[1].pattern == CAUTION]
    assert left == [], "the run left its filter of Lightning's caution in place"
    return sum(bool(re.match(CAUTION, str(w.message))) for w in seen)


class SaveAt(pl.Callback):
    """Saves the fit's checkpoint to ``path`` after its ``step``-th step (``on_train_batch_end``, as ``ModelCheckpoint``
    saves every n train steps): inside an epoch, for a step that does not end one."""

    def __init__(self, path: Path, step: int) -> None:
        self.path, self.step = path, step

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)
