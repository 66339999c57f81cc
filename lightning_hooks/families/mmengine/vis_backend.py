"""``LightningLoggerVisBackend``: MMEngine's scalars (``loss``, ``lr``, ``time``, metrics) in the Trainer's loggers.

Importing this module registers the backend in MMEngine's ``VISBACKENDS`` registry (``MMEngineAdapter`` imports it),
so a config names it as any other backend::

    visualizer = dict(type="Visualizer", vis_backends=[dict(type="LocalVisBackend"),
                                                       dict(type="LightningLoggerVisBackend")])
"""

from __future__ import annotations

import numbers
import weakref
from collections.abc import Mapping
from typing import Any

import torch
from mmengine.registry import VISBACKENDS
from mmengine.visualization import BaseVisBackend, Visualizer

from lightning_hooks.core.lightning_api import pl, rank_zero_warn

#: the backends :func:`attach_trainer` gave a trainer, for :func:`sends_scalars`
_ATTACHED: weakref.WeakSet[LightningLoggerVisBackend] = weakref.WeakSet()


@VISBACKENDS.register_module()
class LightningLoggerVisBackend(BaseVisBackend):
    """An MMEngine visualizer backend that sends ``add_scalar`` / ``add_scalars`` to ``trainer.loggers``.

    ``LoggerHook`` and ``RuntimeInfoHook`` write the run's scalars through the visualizer (``loss``, ``lr``,
    ``time``, ``data_time`` every ``interval`` iterations at step ``iter + 1``; the evaluator's metrics after each
    validation, at step ``epoch`` or ``iter``): with this backend they reach every Lightning logger the Trainer has
    (``TensorBoardLogger``, ``CSVLogger``, ``WandbLogger``, ``MLFlowLogger``, ...), under the same names and steps,
    as ``logger.log_metrics(scalars, step)``. ``prefix`` is put before each name (e.g. ``"mmengine/"``). Images,
    configs and the other ``add_*`` calls are left to the other backends.

    ``MMEngineAdapter`` hands the backend its trainer when a run starts; before that scalars go nowhere, and a
    Trainer without loggers gets a warning. ``lightning-hooks train --logger csv`` (tensorboard, wandb, mlflow) gives
    the Trainer loggers and adds this backend to the config's visualizer when it lists none
    (:func:`send_scalars_to_loggers`). While the backend writes the run's scalars, ``MMEngineModule`` does not log
    the evaluator's metrics a second time (:func:`sends_scalars`).

    Example::

        adapter = MMEngineAdapter.from_config(default_hooks=dict(logger=dict(type="LoggerHook", interval=10)),
            visualizer=dict(type="Visualizer", vis_backends=[dict(type="LightningLoggerVisBackend")]))
        Trainer(callbacks=[adapter], logger=CSVLogger("logs")).fit(module, data)
    """

    def __init__(self, save_dir: str | None = None, prefix: str = "") -> None:
        super().__init__(save_dir)
        self.prefix = prefix
        #: the trainer whose loggers receive the scalars (``attach_trainer``)
        self.trainer: pl.Trainer | None = None

    @property
    def experiment(self) -> list[Any]:
        """The Lightning loggers the scalars go to."""
        return list(self.trainer.loggers) if self.trainer is not None else []

    def _init_env(self) -> None:
        """Nothing to set up: the Trainer's loggers are."""

    def add_scalar(self, name: str, value: Any, step: int = 0, **kwargs: Any) -> None:
        self.add_scalars({name: value}, step=step)

    def add_scalars(self, scalar_dict: Mapping[str, Any], step: int = 0, file_path: str | None = None, **kwargs: Any) -> None:
        """``logger.log_metrics`` of the numbers in ``scalar_dict`` (tensors of one element included) at ``step``."""
        loggers = self.experiment
        if not loggers:
            return
        metrics = {f"{self.prefix}{k}": _number(v) for k, v in scalar_dict.items() if _number(v) is not None}
        for logger in loggers:
            logger.log_metrics(metrics, step=step)


def _number(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return None


def attach_trainer(visualizer: Visualizer, trainer: pl.Trainer) -> None:
    """Give each :class:`LightningLoggerVisBackend` of ``visualizer`` the trainer whose loggers it writes to."""
    for name, backend in getattr(visualizer, "_vis_backends", {}).items():
        if isinstance(backend, LightningLoggerVisBackend):
            backend.trainer = trainer
            _ATTACHED.add(backend)
            if not trainer.loggers:
                rank_zero_warn(
                    f"{type(backend).__name__} (visualizer.vis_backends, {name!r}): the Trainer has no logger, so the "
                    "scalars it receives go nowhere. Under lightning-hooks train add --logger tensorboard (or csv, "
                    "wandb, mlflow); in a script give the Trainer a logger (Trainer(logger=CSVLogger(...)))."
                )


def send_scalars_to_loggers(visualizer: Visualizer) -> None:
    """Add a :class:`LightningLoggerVisBackend` (no prefix) to ``visualizer`` unless it has one: the run's scalars
    then reach the Trainer's loggers under ``LoggerHook``'s names and steps. The other backends, and the files they
    write, are as the config has them."""
    backends = visualizer._vis_backends
    if not any(isinstance(b, LightningLoggerVisBackend) for b in backends.values()):
        backends[LightningLoggerVisBackend.__name__] = LightningLoggerVisBackend()


def sends_scalars(trainer: pl.Trainer) -> bool:
    """Whether a :class:`LightningLoggerVisBackend` sends the run's scalars to ``trainer``'s loggers."""
    return bool(trainer.loggers) and any(backend.trainer is trainer for backend in _ATTACHED)
