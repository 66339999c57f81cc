"""mmcv 1.x runners' fixed waits, skipped in every process of both hosts of a test's run: mmcv_train_kit's derived
configs import this module (``custom_imports``: ``mmcv_train_kit.NO_WAITS``, after their dataset's module), as a
user's config imports their project's modules.

``EpochBasedRunner`` sleeps 2 s before each train and val epoch and 1 s at the end of ``run``, ``IterBasedRunner``
2 s at each new pass of its ``IterLoader`` and 1 s at the end ("prevent possible deadlock during epoch transition"):
~37 s of the in-process ``tools/train.py`` references of tests/families/mmcv and ~25 s of its 2-process runs. No
value either host computes, logs or saves depends on them (the log records' wall-clock fields are not compared:
``mmcv_train_kit.WALL_CLOCK``); the in-process toy references skip them too (``mmcv_testkit.run_mmcv`` patches
``time.sleep``). ``multi_gpu_test``'s 2 s wait before it tests (DistEvalHook's, under both hosts) stays, and so do
the runner's in mmcv_dist_eval.py: without both, rank 1 of its model (which no DDP wrapper holds in step with rank
0) wrote its next results into ``.eval_hook/`` while rank 0 still removed the folder of the last ones
(``FileNotFoundError: .../part_1.pkl``). In a DDP run the ranks meet in each training step between two tests.
"""

from __future__ import annotations

import time
from typing import Any

from mmcv.runner import epoch_based_runner, iter_based_runner


class _TimeWithoutSleep:
    """The ``time`` module as the runners see it, whose ``sleep`` returns at once."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        """Returns at once."""


def skip_waits() -> None:
    """Give mmcv's runner modules a ``time`` without ``sleep``."""
    for module in (epoch_based_runner, iter_based_runner):
        module.time = _TimeWithoutSleep()  # type: ignore[attr-defined]


skip_waits()
