"""Python logging for Classy Vision and VISSL hooks, as ``classy_train.py`` set it up (``Family.configure_logging``).

Classy's hooks (``LossLrMeterLoggingHook``, ``PreciseBatchNormHook``, ``CheckpointHook``) log with ``logging.info``,
which ``classy_train.py`` made visible by setting the root logger to INFO; ``logging.info`` then adds logging's default
stderr handler (``INFO:root:...``) when the root logger has none.
"""

from __future__ import annotations

import logging
from typing import Any

from lightning_hooks.core.console import ConsoleStream, DropMessages

# Classy's ExponentialMovingAverageModelHook warns on every run that it leaves out integer buffers (BatchNorm's
# num_batches_tracked): it averages float tensors by design, and the user can change nothing about it.
CLASSY_EMA_NOTICE = DropMessages("In ExponentialMovingAverageModelHook, ")


def configure_logging(trainer: Any, adapter: Any) -> None:
    """The root logger at INFO with a stderr handler (one that prints above the progress bar when none is set up),
    without Classy's EMA notice; the app-level :func:`lightning_hooks.console.configure_logging` then routes it."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    if not root.handlers:
        logging.basicConfig(stream=ConsoleStream("stderr"))
    for handler in root.handlers:
        handler.addFilter(CLASSY_EMA_NOTICE)
