"""Python logging and optimizer-step accounting for mmcv 1.x hooks, as OpenMMLab 1.x's train scripts set them up
(``Family.configure_logging``, ``Family.batches_per_step``)."""

from __future__ import annotations

import logging
import os
from typing import Any

from lightning_hooks.core.console import route_console


def configure_logging(trainer: Any, adapter: Any) -> None:
    """OpenMMLab 1.x's ``tools/train.py``: ``get_root_logger(log_file=f"{work_dir}/{timestamp}.log")``, mmcv's
    ``get_logger`` printing on rank 0 (above the progress bar) and writing the log file there; it becomes
    ``runner.logger`` unless the adapter was given one."""
    from mmcv.utils import get_logger

    runner = adapter.host
    if runner._given_logger is not None:
        route_console(runner._given_logger)
        return
    work_dir = runner._work_dir.resolve(trainer)
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(work_dir, f"{runner.timestamp}.log")
    logger = get_logger("mmcv", log_file=path)
    # get_logger sets a logger up once per process: a later run's file gets a handler like the first one's
    files = [h for h in logger.handlers if isinstance(h, logging.FileHandler)]
    if trainer.global_rank == 0 and not any(h.baseFilename == os.path.abspath(path) for h in files):
        handler = logging.FileHandler(path, "w")
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
        for old in files:
            logger.removeHandler(old)
            old.close()
        logger.addHandler(handler)
    runner.logger = runner._given_logger = logger
    route_console(logger)


def close_log_files(folder: str) -> None:
    """Close and remove the ``mmcv`` logger's file handlers that write into ``folder`` (a ``fast_dev_run``'s temporary
    work dir, about to be removed): no handler is left writing to a deleted file."""
    logger = logging.getLogger("mmcv")
    inside = os.path.join(os.path.abspath(folder), "")
    for handler in [h for h in logger.handlers if isinstance(h, logging.FileHandler)]:
        if handler.baseFilename.startswith(inside):
            logger.removeHandler(handler)
            handler.close()


def batches_per_step(adapter: Any) -> int | None:
    """The ``cumulative_iters`` of the ``GradientCumulative*OptimizerHook`` that owns the optimizer step (1 for the
    other optimizer hooks); None when Lightning steps (automatic optimisation)."""
    return adapter.runner._iters_per_step() if adapter.steppers else None
