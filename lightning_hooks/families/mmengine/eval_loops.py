"""``runner.val_loop`` / ``test_loop``: MMEngine's ``ValLoop`` and ``TestLoop`` as hooks see them, driven by
Lightning's evaluation loops, and the metrics of an evaluation epoch that hooks receive (``after_val_epoch``)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from mmengine.evaluator import Evaluator
from mmengine.runner import TestLoop, ValLoop

from lightning_hooks.core import lightning_api
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.triggers import ON
from lightning_hooks.families.mmengine.loops import LoopFacade


class _EvalLoop(LoopFacade):
    """What ``ValLoop`` / ``TestLoop`` give hooks: ``dataloader``, ``evaluator`` and ``run_iter``, which runs one batch
    as MMEngine's loop does (``before_*_iter`` hooks, the LightningModule's ``validation_step``/``test_step`` without
    gradients, ``after_*_iter`` hooks). The LightningModule's step must feed ``evaluator`` (``evaluator.process``), as
    MMEngine's loop does after ``model.val_step``."""

    stage = ""
    step = ""
    #: the MMEngine loop class this facade stands for
    upstream: ClassVar[type]
    fp16 = False

    def __init__(self, runner: Any, hooks: HookCaller) -> None:
        super().__init__(runner)
        self._hooks = hooks

    @property
    def dataloader(self) -> Any:
        return _first(getattr(self.trainer, f"{self.stage}_dataloaders"))

    @property
    def total_length(self) -> int:
        """The batches of the running evaluation over all its dataloaders, as mmagic's ``MultiValLoop`` /
        ``MultiTestLoop`` count them (its ``IterTimerHook`` reads it for the eta) when the config's
        ``{stage}_cfg`` names one of them; MMEngine's own loops have no such attribute (``AttributeError``)."""
        cfg = self._runner.cfg.get(f"{self.stage}_cfg") or {}
        kind = cfg.get("type", "") if isinstance(cfg, dict) else ""
        name = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
        if name.rpartition(".")[2] not in _MULTI_LOOPS or self.trainer is None:
            raise AttributeError(
                f"runner.{self.stage}_loop.total_length: MMEngine's {self.upstream.__name__} has no total_length; "
                f"mmagic's {' / '.join(_MULTI_LOOPS)} have it, served when the adapter's config names one "
                f"({self.stage}_cfg=dict(type=...), as MMEngineAdapter.from_file and `lightning-hooks train` pass it)."
            )
        counts = self.trainer.num_val_batches if self.stage == "val" else self.trainer.num_test_batches
        return int(sum(counts))

    def found_evaluator(self) -> Evaluator | None:
        """The LightningModule's ``{stage}_evaluator`` or ``evaluator`` attribute (an ``mmengine.evaluator.Evaluator``),
        if it has one."""
        module = self._module()
        for name in (f"{self.stage}_evaluator", "evaluator"):
            found = getattr(module, name, None)
            if isinstance(found, Evaluator):
                return found
        return None

    @property
    def evaluator(self) -> Evaluator:
        """:meth:`found_evaluator`; without one, an error naming what to keep on the LightningModule."""
        found = self.found_evaluator()
        if found is not None:
            return found
        module = self._module()
        raise AttributeError(
            f"runner.{self.stage}_loop.evaluator: {type(module).__name__} has no mmengine Evaluator. MMEngine's "
            f"{self.upstream.__name__} holds the evaluator its hooks read; under Lightning, keep it on the "
            f"LightningModule as self.{self.stage}_evaluator or self.evaluator (an mmengine.evaluator.Evaluator) and "
            f"call its process(data_samples=..., data_batch=...) in {self.step}, as MMEngine's loop does."
        )

    @torch.no_grad()
    def run_iter(self, idx: int, data_batch: Any) -> None:
        """One batch as MMEngine's loop runs it: hooks, the LightningModule's step, hooks."""
        event = "validation" if self.stage == "val" else "test"
        self._hooks.fire(ON[f"on_{event}_batch_start"], batch_idx=idx, data_batch=data_batch)
        outputs = getattr(self._module(), self.step)(data_batch, idx)
        self._hooks.fire(ON[f"on_{event}_batch_end"], batch_idx=idx, data_batch=data_batch, outputs=outputs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        call = "trainer.validate(...)" if self.stage == "val" else "trainer.test(...)"
        raise RuntimeError(
            f"runner.{self.stage}_loop.run(): Lightning runs evaluation under lightning-hooks; call {call} "
            "instead of running the MMEngine loop from a hook."
        )

    def _module(self) -> Any:
        trainer = self.trainer
        if trainer is None:
            raise AttributeError(f"runner.{self.stage}_loop: no Lightning trainer is running yet")
        return trainer.lightning_module


class EvalValLoop(_EvalLoop, ValLoop):
    """``runner.val_loop``: a ``ValLoop`` to hooks. Example: ``runner.val_loop.evaluator.dataset_meta``."""

    stage, step, upstream = "val", "validation_step", ValLoop

    @property
    def dataloader(self) -> Any:
        """Lightning's (first) val loader, loaded as the fit loop's start would if a hook asks first (before_run)."""
        trainer = self.attached
        if trainer.val_dataloaders is None and trainer.state.fn == "fit" and trainer.enable_validation:
            stage = trainer.state.stage
            trainer.validating = True
            lightning_api.setup_fit_val_data(trainer)
            trainer.state.stage = stage
        return _first(trainer.val_dataloaders)


class EvalTestLoop(_EvalLoop, TestLoop):
    """``runner.test_loop``: a ``TestLoop`` to hooks. Example: ``runner.test_loop.run_iter(idx, data_batch)``."""

    stage, step, upstream = "test", "test_step", TestLoop


#: mmagic's evaluation loops (several dataloaders and evaluators), whose ``total_length`` hooks read
_MULTI_LOOPS = ("MultiValLoop", "MultiTestLoop")


def _first(loaders: Any) -> Any:
    return loaders[0] if isinstance(loaders, (list, tuple)) else loaders

