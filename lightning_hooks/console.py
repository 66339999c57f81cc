"""Console output a person can read at the entry points: legacy loggers set up as their hosts' entry points did,
progress bars that count right in every adapter mode. The streams that print above the bar and the notices an entry
point silences (``quiet_upstream_notices``, served here too) live in
:mod:`lightning_hooks.core.console`."""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

from typing_extensions import override

from lightning_hooks import families
from lightning_hooks.core.console import quiet_upstream_notices, route_console  # noqa: F401  # the entry points' call
from lightning_hooks.core.lightning_api import RichProgressBar, TQDMProgressBar, pl, rich_bar_works


def configure_logging(trainer: Any) -> None:
    """Set up Python logging as the training entry points of the legacy hosts among ``trainer.callbacks`` did.

    The console script, the demo and the Hydra example call it before training; call it in your own script to see
    the lines of legacy hooks that log at INFO. Each registered family with an adapter among the callbacks sets up
    logging as its host's entry point did (``Family.configure_logging``, in the family's ``logging`` module); a family
    whose library sets up its own loggers has none. Console handlers, already present or added here, print above the
    progress bar (:func:`route_console`).

    Args:
        trainer: the ``Trainer`` about to run; adapters among its callbacks are recognised by their ``family``.
    """
    last = {family: adapter for family, adapter in families.adapters_in(trainer)}  # the last adapter of each family
    for family in families.registered():
        if family in last and family.configure_logging is not None:
            family.configure_logging(trainer, last[family])
    route_console(logging.getLogger())
    route_console(logging.getLogger(pl.__name__))


def batches_per_step(trainer: Any) -> int:
    """Batches per optimizer step: Lightning's ``accumulate_grad_batches``, or the accumulation of a legacy hook that
    owns the step (``Family.batches_per_step``)."""
    for family, adapter in families.adapters_in(trainer):
        batches = family.batches_per_step(adapter) if family.batches_per_step is not None else None
        if batches is not None:
            return batches
    return trainer.accumulate_grad_batches


class _Counts:
    """Progress bar counts for every adapter mode (mixed into Lightning's bars).

    - With ``max_steps`` and no ``max_epochs``, Lightning ends the bar of the last epoch after the optimizer steps
      left, counted as batches; a step takes :func:`batches_per_step` batches.
    - The logger version (``v_num``) shows as written (``0``), not as a float.
    """

    trainer: Any

    @property
    def total_train_batches(self) -> int | float:
        trainer = self.trainer
        if trainer.max_epochs == -1 and trainer.max_steps is not None and trainer.max_steps > 0:
            remaining = (trainer.max_steps - trainer.global_step) * batches_per_step(trainer)
            return min(trainer.num_training_batches, remaining)
        return trainer.num_training_batches

    @override
    def get_metrics(self, trainer: Any, pl_module: Any) -> dict[str, Any]:  # type: ignore[misc]  # a mixin: the method is the bar's it is mixed into
        metrics = super().get_metrics(trainer, pl_module)  # type: ignore[misc]  # a mixin: super() is the Lightning bar it is mixed into
        if "v_num" in metrics:
            metrics["v_num"] = str(metrics["v_num"])
        return metrics


class TQDMBar(_Counts, TQDMProgressBar):
    """Lightning's tqdm bar, counting right in every adapter mode."""


class RichBar(_Counts, RichProgressBar):
    """Lightning's rich bar, counting right in every adapter mode; ``Epoch N`` without ``/-2`` when no
    ``max_epochs`` bounds the fit."""

    @override
    def train_description(self, current_epoch: int) -> str:
        if self.trainer.max_epochs == -1:
            return f"{f'Epoch {current_epoch}':{len(self.validation_description)}}"
        return super().train_description(current_epoch)


ProgressBar = RichBar if importlib.util.find_spec("rich") and rich_bar_works() else TQDMBar
"""The bar the entry points use: rich when it is installed and Lightning's rich bar works with it (Lightning's
default choice), else tqdm."""
