"""``LightningLoggerHook`` (``lightning_hooks/families/imix/lightning_logger.py``): iMIX's log buffer in Lightning's
loggers, against iMIX's own ``TensorboardLoggerHook`` in the same run (the Organizer's ``PeriodicLogger``): the same
names, steps and values, read back from a ``CSVLogger`` and a ``TensorBoardLogger`` (issue #34)."""

from __future__ import annotations

import numpy as np
import pytest
from imix.engine.hooks import PriorityStatus
from imix_reference import Recorder, config, fit
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from tracker_stores import csv_points, tensorboard_points

import lightning_hooks.families.imix.lightning_logger  # noqa: F401  (registers LightningLoggerHook in iMIX's HOOKS)


@pytest.mark.parametrize("by_iter", [False, True])
def test_the_loggers_get_tensorboard_logger_hooks_scalars_at_its_steps(tmp_path, by_iter):
    """By epoch (the 4th iteration of each 6-iteration epoch, and each epoch's end) and by iteration (every 4th, and the last),
    with the period of ``cfg.log_config``: every scalar TensorboardLoggerHook writes (losses, lr, timings) reaches
    both loggers at its step; TensorBoard holds float32 as iMIX's writer does."""
    loop = dict(by_iter=True, max_iter=10, train_data=dict(batches=10), checkpoint_config=dict(iter_period=1)) if by_iter else {}
    cfg = config(tmp_path / "run", log_config=dict(period=4), **loop,
                 custom_hooks=[dict(type=Recorder, level=PriorityStatus.LOWEST), dict(type="LightningLoggerHook")])
    csv, tensorboard = CSVLogger(tmp_path, name="csv"), TensorBoardLogger(tmp_path, name="tb", default_hp_metric=False)
    fit(cfg, logger=[csv, tensorboard])
    reference = tensorboard_points(tmp_path / "run" / "runs")  # iMIX's TensorboardLoggerHook, same run
    assert {"total_loss", "lr"} <= {name for _, name, _ in reference}
    assert len({step for step, _, _ in reference}) == (3 if by_iter else 4)  # iterations 4, 8, 10 / 4, 6 (end), 10, 12
    assert tensorboard_points(tensorboard.log_dir) == reference
    points = csv_points(f"{csv.log_dir}/metrics.csv")
    assert [(step, name, float(np.float32(value))) for step, name, value in points] == reference
