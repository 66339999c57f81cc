"""``MMEngineAdapter``: MMEngine hooks, ordered by priority, driven by Lightning."""

from __future__ import annotations

import os
import sys
from typing import Any

import lightning.pytorch as pl

from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.families.mmengine.events import EVENTS
from lightning_hooks.families.mmengine.runner import Runner


class MMEngineAdapter(LegacyHookAdapter):
    """Run ``mmengine.hooks.Hook`` instances inside ``lightning.Trainer``.

    Hooks are sorted by priority as MMEngine's Runner does (stable for equal priorities) and receive a
    :class:`Runner` facade.

    Example::

        from mmengine.hooks import CheckpointHook, EMAHook
        trainer = Trainer(callbacks=[MMEngineAdapter([EMAHook(), CheckpointHook(interval=1)], work_dir="work")])
    """

    family = "mmengine"
    events = EVENTS
    delegates = {
        **{f"{w}_{m}_epoch": (f"_{w}_epoch",) for w in ("before", "after") for m in ("train", "val", "test")},
        **{f"{w}_{m}_iter": (f"_{w}_iter",) for w in ("before", "after") for m in ("train", "val", "test")},
    }

    def __init__(self, hooks: Any, work_dir: str | os.PathLike | None = None, experiment_name: str | None = None) -> None:
        super().__init__(hooks)
        self.runner = self.host = Runner(work_dir=work_dir, experiment_name=experiment_name)
        self._build_plan((self.runner,))

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        hooks = sys.modules.get("mmengine.hooks")
        if hooks is None:  # an mmengine hook instance implies mmengine.hooks was imported
            return ()
        return (hooks.Hook,)

    def order(self, hooks: list[Any]) -> list[Any]:
        from mmengine.runner import get_priority

        return sorted(hooks, key=lambda h: get_priority(h.priority))

    # ------------------------------------------------------------------------------------------ conditions
    def epoch_ends(self) -> bool:
        return bool(self._trainer.is_last_batch)

    def real_validation(self) -> bool:
        return not self._trainer.sanity_checking

    # ---------------------------------------------------------------------------------------- lightning events
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.runner.trainer = trainer
        self.fire("setup")

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.fire("teardown")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.runner.iter = trainer.fit_loop.epoch_loop.total_batch_idx + 1 if trainer.global_step else 0
        self.fire("on_train_start")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.runner.epoch = trainer.current_epoch
        self.fire("on_train_epoch_start")

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        self.fire("on_train_batch_start", batch_idx=batch_idx, data_batch=batch)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.fire("on_train_batch_end", batch_idx=batch_idx, data_batch=batch, outputs=outputs)
        self.runner.iter += 1
        if trainer.is_last_batch:
            self.runner.epoch = trainer.current_epoch + 1

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_end")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_validation_start")

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_validation_epoch_start")

    def on_validation_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.fire("on_validation_batch_start", batch_idx=batch_idx, data_batch=batch)

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self.fire("on_validation_batch_end", batch_idx=batch_idx, data_batch=batch, outputs=outputs)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_validation_epoch_end", metrics=_metrics(trainer))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_validation_end")

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_start")

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_epoch_start")

    def on_test_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        self.fire("on_test_batch_start", batch_idx=batch_idx, data_batch=batch)

    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self.fire("on_test_batch_end", batch_idx=batch_idx, data_batch=batch, outputs=outputs)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_epoch_end", metrics=_metrics(trainer))

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_end")

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.fire("on_save_checkpoint", checkpoint=checkpoint)

    def host_state(self) -> dict[str, Any]:
        return {"iter": self.runner.iter, "epoch": self.runner.epoch}

    def load_host_state(self, state: dict[str, Any]) -> None:
        self.runner.iter = state.get("iter", 0)
        self.runner.epoch = state.get("epoch", 0)


def _metrics(trainer: pl.Trainer) -> dict[str, float]:
    return {k: v.item() if hasattr(v, "item") else v for k, v in trainer.callback_metrics.items()}
