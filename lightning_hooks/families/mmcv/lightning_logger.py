"""``LightningLoggerHook``: an mmcv 1.x logger hook that sends the log buffer's scalars to the Trainer's loggers, and
the evaluation's metrics to ``trainer.callback_metrics``.

``lightning-hooks train --logger ...`` (or ``--trainer.callbacks``) adds one after the config's ``log_config`` hooks,
with their interval; a config may also list it (``log_config = dict(hooks=[dict(type="LightningLoggerHook")])``) once
this module is imported.
"""

from __future__ import annotations

from typing import Any

from mmcv.runner import HOOKS, LoggerHook, get_dist_info


@HOOKS.register_module()
class LightningLoggerHook(LoggerHook):
    """What mmcv's ``TensorboardLoggerHook`` / ``MlflowLoggerHook`` / ``WandbLoggerHook`` write (the log buffer's
    averages as ``get_loggable_tags`` names them: ``train/loss``, ``learning_rate``, ``momentum``, ``val/...``, at
    ``get_iter(runner)``), sent to each of ``trainer.loggers`` as ``logger.log_metrics(tags, step)``.

    Example::

        hook = LightningLoggerHook.after(hooks)  # the interval of the last logger hook among ``hooks``
        hook.trainer = trainer
    """

    def __init__(self, interval: int = 10, ignore_last: bool = True, reset_flag: bool = False,
                 by_epoch: bool = True) -> None:  # fmt: skip  # mmcv's LoggerHook signature, arguments aligned
        super().__init__(interval, ignore_last, reset_flag, by_epoch)
        #: the trainer whose loggers receive the scalars
        self.trainer: Any = None

    @classmethod
    def after(cls, hooks: list[Any]) -> LightningLoggerHook:
        """A hook averaging as the last :class:`LoggerHook` of ``hooks`` does (its ``interval``, ``ignore_last``,
        ``by_epoch``), so that the config's loggers and this one log the same values at the same iterations."""
        last = next((hook for hook in reversed(hooks) if isinstance(hook, LoggerHook)), None)
        if last is None:
            return cls()
        return cls(interval=last.interval, ignore_last=last.ignore_last, by_epoch=last.by_epoch)

    def log(self, runner: Any) -> None:
        tags = self.get_loggable_tags(runner)
        if not tags or self.trainer is None:
            return
        if get_dist_info()[0] == 0:  # the loggers write on the main process, as mmcv's logger hooks (master_only)
            for logger in self.trainer.loggers:
                logger.log_metrics(tags, step=self.get_iter(runner))
        self.monitor(tags)

    def monitor(self, tags: dict[str, Any]) -> None:
        """The evaluation's metrics among ``tags`` (``val/accuracy_top-1``, ...) in ``trainer.callback_metrics``,
        for callbacks that monitor them (``EarlyStopping``, ``ModelCheckpoint(monitor=...)``); not to the loggers a
        second time."""
        metrics = {name: float(value) for name, value in tags.items() if name.startswith("val/")}
        if metrics and (self.trainer.training or self.trainer.validating):
            self.trainer.lightning_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1, logger=False)
