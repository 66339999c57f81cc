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
        #: the evaluation metrics this process put in ``callback_metrics`` since :meth:`share_metrics` last ran
        self.unshared: list[dict[str, float]] = []

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
            rank, processes = get_dist_info()
            if processes > 1 and rank != 0:
                return  # rank 0's come in share_metrics
            self.unshared.append(metrics)
            self._put(metrics)

    def _put(self, metrics: dict[str, float]) -> None:
        """``metrics`` in ``callback_metrics`` (each rank puts rank 0's, :meth:`share_metrics`: Lightning's mean of
        them over the ranks at the epoch's end, ``sync_dist``, is that value)."""
        self.trainer.lightning_module.log_dict(metrics, on_step=False, on_epoch=True, batch_size=1, logger=False,
                                               sync_dist=True)  # fmt: skip  # the arguments aligned under the call

    def after_train_epoch(self, runner: Any) -> None:
        super().after_train_epoch(runner)
        self.share_metrics()

    def after_val_epoch(self, runner: Any) -> None:
        super().after_val_epoch(runner)
        self.share_metrics()

    def after_train_iter(self, runner: Any) -> None:
        """Also, for ``IterBasedRunner`` (whose train epochs are the loader's passes, without ``after_train_epoch``),
        :meth:`share_metrics` at the pass's last iteration, before Lightning's monitoring callbacks read them."""
        super().after_train_iter(runner)
        if not self.by_epoch and self.trainer is not None and self.trainer.is_last_batch:
            self.share_metrics()

    def share_metrics(self) -> None:
        """In several processes, every rank gets rank 0's evaluation metrics in ``callback_metrics``: mmcv's
        ``DistEvalHook`` evaluates on rank 0 only, so the other ranks' ``EarlyStopping`` /
        ``ModelCheckpoint(monitor=...)`` would find no metric (or their own), and the ranks would decide differently.
        Rank 0 broadcasts what it put since the last call (a collective: every rank calls it at the same mount point,
        the end of a train epoch or a ``val`` workflow epoch); the others put the same, in the same order."""
        import torch.distributed as dist

        rank, processes = get_dist_info()
        if self.trainer is None or processes < 2:
            self.unshared = []
            return
        shared: list[Any] = [self.unshared]
        dist.broadcast_object_list(shared, src=0)
        self.unshared = []
        if rank != 0:
            for metrics in shared[0]:
                self._put(metrics)
