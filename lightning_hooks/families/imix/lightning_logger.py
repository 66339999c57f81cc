"""``LightningLoggerHook``: an iMIX hook that sends the log buffer's scalars to the Trainer's loggers, as iMIX's
``TensorboardLoggerHook`` writes them to TensorBoard.

iMIX's writers (``JSONLoggerHook``, ``TensorboardLoggerHook``) write through ``PeriodicLogger``, every
``log_config.period`` iterations and, for TensorBoard, at each epoch's end; this hook writes on the same schedule, the
same values (the latest of each scalar, median-smoothed over ``window_size`` where iMIX's ``put_scalar`` asked for it)
under the same names, at the same step (the log buffer's ``iter``), to each of ``trainer.loggers``.

Example::

    from lightning_hooks.families.imix.lightning_logger import LightningLoggerHook

    hooks = [OptimizerHook(), LRSchedulerHook(opt, scheduler), LightningLoggerHook(period=20)]
    Trainer(logger=CSVLogger("logs"), callbacks=[IMIXAdapter(hooks)]).fit(model, loader)

Importing the module registers it in iMIX's ``HOOKS``, so that a config's ``custom_hooks`` may list
``dict(type='LightningLoggerHook')`` (its period then is ``cfg.log_config.period``, as ``PeriodicLogger``'s).
"""

from __future__ import annotations

from typing import Any

from imix.engine.hooks import HookBase
from imix.engine.hooks.builder import HOOKS
from imix.engine.hooks.periods.log_buffer_imix import get_log_buffer


@HOOKS.register_module()
class LightningLoggerHook(HookBase):
    """The log buffer's scalars in the Trainer's loggers, where and as iMIX's ``TensorboardLoggerHook`` writes them.

    Args:
        period: write every ``period`` iterations (by epoch: of the epoch's); ``None``: ``cfg.log_config.period``,
            read in ``before_train`` as ``PeriodicLogger`` reads it.
        window_size: the median window of the scalars put with ``smoothing_hint`` (``TensorboardLoggerHook``'s).
    """

    def __init__(self, period: int | None = None, window_size: int = 20) -> None:
        super().__init__()
        self.period = period
        self.window_size = window_size

    def before_train(self) -> None:
        if self.period is None:
            self.period = self.trainer.cfg.log_config.period

    def after_train_iter(self) -> None:
        engine = self.trainer
        if engine.by_epoch:
            due = (engine.inner_iter + 1) % self.period == 0
        else:
            due = (engine.iter + 1) % self.period == 0 or engine.iter == engine.max_iter - 1
        if due:
            self.write()

    def after_train_epoch(self) -> None:
        self.write()  # PeriodicLogger writes TensorboardLoggerHook at each epoch's end too

    def write(self) -> None:
        """Each scalar's latest value, at the log buffer's ``iter``, to each of the Trainer's loggers."""
        buffer = get_log_buffer()
        scalars: dict[str, Any] = dict(buffer.latest_with_smoothing_hint(self.window_size))
        if scalars:
            for logger in self.trainer.lightning.loggers:
                logger.log_metrics(scalars, step=buffer.iter)
