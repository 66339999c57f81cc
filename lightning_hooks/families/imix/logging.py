"""Python logging and optimizer-step accounting for iMIX hooks, as iMIX's entry point set them up
(``Family.configure_logging``, ``Family.batches_per_step``)."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.console import route_console


def configure_logging(trainer: Any, adapter: Any) -> None:
    """iMIX's ``default_setup``: ``imix.utils.logger.setup_logger(work_dir, rank)``: the ``imix`` logger at DEBUG,
    printing on rank 0 (above the progress bar) and writing ``imix.log`` in the adapter's work dir (default:
    ``{trainer.default_root_dir}/work_dirs/imix``)."""
    from imix.utils.logger import setup_logger

    work_dir = adapter.host._work_dir.resolve(trainer)
    route_console(setup_logger(work_dir, distributed_rank=trainer.global_rank, name="imix"))


def batches_per_step(adapter: Any) -> int | None:
    """The gradient accumulation of the iMIX ``OptimizerHook`` that owns the optimizer step; None when Lightning
    steps (automatic optimisation)."""
    return adapter.host.gradient_accumulation_steps if adapter.steppers else None
