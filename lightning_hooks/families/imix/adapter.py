"""``IMIXAdapter``: iMIX hooks, ordered by level, driven by Lightning."""

from __future__ import annotations

import os
import sys
import weakref
from typing import Any

import lightning.pytorch as pl

from lightning_hooks.compat import imix as compat
from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.families.imix.events import EVENTS
from lightning_hooks.families.imix.trainer import Trainer


class IMIXAdapter(LegacyHookAdapter):
    """Run ``imix.engine.hooks.HookBase`` hooks inside ``lightning.Trainer``.

    Hooks are ordered by level as iMIX's engine does (stable for equal levels); each reaches the :class:`Trainer`
    facade as ``self.trainer``, a ``weakref.proxy`` as iMIX sets it.

    Example::

        from imix.engine.hooks import IterationTimerHook
        trainer = Trainer(callbacks=[IMIXAdapter([IterationTimerHook()], by_epoch=True)])
    """

    family = "imix"
    events = EVENTS

    def __init__(
        self,
        hooks: Any,
        by_epoch: bool = True,
        gradient_accumulation_steps: int = 1,
        is_lr_accumulation: bool = False,
        work_dir: str | os.PathLike | None = None,
        cfg: Any = None,
    ) -> None:
        super().__init__(hooks)
        self.trainer = self.host = Trainer(
            self.hooks,
            by_epoch=by_epoch,
            gradient_accumulation_steps=gradient_accumulation_steps,
            is_lr_accumulation=is_lr_accumulation,
            work_dir=work_dir,
            cfg=cfg,
        )
        for hook in self.hooks:
            hook.trainer = weakref.proxy(self.trainer)
        self._build_plan(())

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        hooks = sys.modules.get("imix.engine.hooks")
        return (compat.HookBase,) if hooks is None else (hooks.HookBase, compat.HookBase)

    def order(self, hooks: list[Any]) -> list[Any]:
        return sorted(hooks, key=lambda h: compat.get_level(h.level).value)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.trainer.lightning = trainer

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_start")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_epoch_start")

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        self.trainer.iter = trainer.fit_loop.epoch_loop.total_batch_idx
        self.trainer.inner_iter = batch_idx
        self.fire("on_train_batch_start")

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.trainer.output = outputs
        self.fire("on_train_batch_end")

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_epoch_end")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_end")

    def host_state(self) -> dict[str, Any]:
        return {"iter": self.trainer.iter}
