"""``ClassyAdapter``: Classy Vision and VISSL hooks driven by Lightning."""

from __future__ import annotations

import sys
from typing import Any

import lightning.pytorch as pl

from lightning_hooks.compat import classy as compat
from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.families.classy.events import EVENTS
from lightning_hooks.families.classy.task import Task


class ClassyAdapter(LegacyHookAdapter):
    """Run ``classy_vision.hooks.ClassyHook`` (and VISSL) hooks inside ``lightning.Trainer``.

    Hooks run in list order with every ``CheckpointHook`` moved last, as ``ClassificationTask.set_hooks`` does.
    Hook state (``get_classy_state``) is saved in Lightning checkpoints under each hook's ``name()``.

    Example::

        from classy_vision.hooks import ExponentialMovingAverageModelHook
        trainer = Trainer(callbacks=[ClassyAdapter([ExponentialMovingAverageModelHook(decay=0.9)])])
    """

    family = "classy"
    events = EVENTS

    def __init__(self, hooks: Any) -> None:
        super().__init__(hooks)
        self.task = self.host = Task()
        self._build_plan((self.task,))

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        hooks = sys.modules.get("classy_vision.hooks")
        return (compat.ClassyHook,) if hooks is None else (hooks.ClassyHook, compat.ClassyHook)

    @property
    def noops(self) -> tuple[Any, ...]:  # type: ignore[override]
        return tuple(base._noop for base in self.base_classes())

    def order(self, hooks: list[Any]) -> list[Any]:
        return sorted(hooks, key=lambda h: type(h).__name__ == "CheckpointHook")

    def hook_keys(self) -> list[str]:
        return [hook.name() for hook in self.hooks]

    def hook_state(self, hook: Any) -> Any:
        return hook.get_classy_state()

    def load_hook_state(self, hook: Any, state: Any) -> None:
        hook.set_classy_state(state)

    def host_state(self) -> dict[str, Any]:
        return {"phase_idx": self.task.phase_idx, "train_phase_idx": self.task.train_phase_idx}

    def load_host_state(self, state: dict[str, Any]) -> None:
        self.task.phase_idx = state.get("phase_idx", -1)
        self.task.train_phase_idx = state.get("train_phase_idx", -1)

    # ------------------------------------------------------------------------------------------ conditions
    def phase_ends(self) -> bool:
        return bool(self._trainer.is_last_batch)

    def real_validation(self) -> bool:
        return not self._trainer.sanity_checking

    # ---------------------------------------------------------------------------------------- lightning events
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.task.trainer = trainer

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_start")

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.task.start_phase(train=True)
        self.fire("on_train_epoch_start")

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._record_batch(outputs, batch)
        self.fire("on_train_batch_end")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_train_end")

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.task.start_phase(train=False)
        self.fire("on_validation_epoch_start")

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not trainer.sanity_checking:
            self._record_batch(outputs, batch)
        self.fire("on_validation_batch_end")

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_validation_epoch_end")

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_start")

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.task.start_phase(train=False)
        self.fire("on_test_epoch_start")

    def on_test_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._record_batch(outputs, batch)
        self.fire("on_test_batch_end")

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_epoch_end")

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire("on_test_end")

    def _record_batch(self, outputs: Any, batch: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if loss is not None:
            self.task.losses.append(float(loss))
