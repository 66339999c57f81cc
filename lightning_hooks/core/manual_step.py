"""Hosts whose optimizer hook owns backward and the optimizer step (mmcv 1.x's and iMIX's ``OptimizerHook``).

Their runners call ``before_train_iter``, the model's step and ``after_train_iter`` back to back, and the optimizer
hook does backward, clipping and ``step()`` inside ``after_train_iter``. When such a hook is in the list, Lightning
must not optimise: :class:`ManualStepAdapter` switches the LightningModule to manual optimisation, fires
``before_train_iter`` inside the wrapped ``training_step`` and ``after_train_iter`` right after Lightning's strategy
returned from it; otherwise both fire from the batch callbacks around Lightning's own optimisation
(:func:`step_rows`, :func:`step_conditions`).

Example::

    EVENTS = EventTable("mmcv", [..., *step_rows("before_train_iter", "after_train_iter"), ...],
                        conditions={..., **step_conditions("`OptimizerHook` and its subclasses")})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.events import Mount
from lightning_hooks.core.host_loop import HostLoop
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.triggers import ON, ModuleStep, Patch, Remove, StrategyTrainingStep, Trigger

#: ``before_train_iter`` right before the model's step, inside the wrapped ``training_step``
BEFORE_STEP = ModuleStep("training_step", at="before")
#: ``after_train_iter`` (backward, step) once the step returned, outside a DDP wrapper's forward
AFTER_STEP = StrategyTrainingStep()


@dataclass(frozen=True)
class ManualOptimization(Patch):
    """``LightningModule.automatic_optimization = False`` for a fit whose optimizer hook owns the step. Removing it
    switches the module back and counts the hooks' optimizer steps as Lightning's own: ``trainer.global_step`` still
    reads them after the fit, and a later fit of the module by a plain Trainer optimises again. A module that was
    already in manual optimisation stays as it is. Fires no row."""

    def __str__(self) -> str:
        return "LightningModule.automatic_optimization"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        if not pl_module.automatic_optimization:
            return lambda: None

        def remove() -> None:
            steps = trainer.global_step  # the manual loop's count, read while the module is still manual
            pl_module.automatic_optimization = True
            lightning_api.set_optimizer_steps(trainer, steps)

        pl_module.automatic_optimization = False
        return remove


#: the one :class:`ManualOptimization` patch
MANUAL_OPTIMIZATION = ManualOptimization()


def step_rows(before: str, after: str) -> list[Mount]:
    """The four rows of the mount points around a step (``before`` / ``after``): from the batch callbacks when
    Lightning steps, around the wrapped ``training_step`` when a hook owns the step."""
    return [
        Mount(ON["on_train_batch_start"], before, when="lightning_steps"),
        Mount(BEFORE_STEP, before, when="hooks_step"),
        Mount(AFTER_STEP, after, when="hooks_step"),
        Mount(ON["on_train_batch_end"], after, when="lightning_steps"),
    ]


def step_conditions(owners: str) -> dict[str, str]:
    """The descriptions of :func:`step_rows`' conditions; ``owners`` names the hooks that own the step."""
    return {
        "lightning_steps": "no hook owns the optimizer step (Lightning's automatic optimisation)",
        "hooks_step": f"a hook owns the optimizer step ({owners}): manual optimisation",
    }


class ManualStepAdapter(LegacyHookAdapter):
    """A family adapter whose optimizer hooks may own backward and the optimizer step (:attr:`steppers`).

    The family sets ``self.steppers`` (the hooks that own the step; empty when Lightning optimises) and ``self.loop``
    (its :class:`~lightning_hooks.core.host_loop.HostLoop`, whose ``end_iter`` fires ``after_train_iter``: at
    :data:`AFTER_STEP` when a hook steps, else at ``on_train_batch_end``), implements :meth:`step_loss` (the loss the
    step returned, which the hook backwards), calls :meth:`check_step_owner` with its Trainer checks; its table uses
    :func:`step_rows`. The adapter starts each iteration in the loop at ``on_train_batch_start`` and ends it once the
    step returned (a hook steps) or at ``on_train_batch_end``. A fit with a step-owning hook runs the module in manual
    optimisation (:class:`ManualOptimization`, one of :meth:`run_patches`), switched back at teardown.

    Example::

        class MMCVAdapter(ManualStepAdapter):
            def step_loss(self) -> torch.Tensor:
                return self.runner.outputs["loss"]
    """

    steppers: list[Any]
    loop: HostLoop
    #: the step conditions hold for the adapter's life (the family sets ``steppers`` before it builds the dispatch's
    #: plan): the dispatch asks them once, not at every step
    #: (:meth:`~lightning_hooks.core.dispatch.HookDispatch.build_plan`)
    fixed_conditions = frozenset({"hooks_step", "lightning_steps"})

    # ------------------------------------------------------------------------------------------ conditions
    def hooks_step(self) -> bool:
        return bool(self.steppers)

    def lightning_steps(self) -> bool:
        return not self.steppers

    # ------------------------------------------------------------------------------------------ family contract
    def step_loss(self) -> torch.Tensor:
        """The loss the wrapped ``training_step`` returned (the hook's ``loss.backward()``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ the step
    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """In a fit with a hook that owns the step, also :data:`MANUAL_OPTIMIZATION`."""
        manual = (MANUAL_OPTIMIZATION,) if stage == "fit" and self.steppers else ()
        return (*super().run_patches(stage), *manual)

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        """``after_train_iter`` once the strategy returned from the step, when a hook owns backward and step."""
        if trigger is AFTER_STEP:  # the table's one instance (its patch calls back with it)
            if self.steppers:
                # the hook calls loss.backward() itself: tell Lightning's callbacks and module (on_before_backward:
                # the loss AnomalyDetector checks) and arm DDP's reducer first, as LightningModule.manual_backward does
                trainer, loss = self._trainer, self.step_loss()
                assert trainer is not None, "the strategy's training_step runs inside a fit, after setup()"
                lightning_api.call_before_backward(trainer, loss)
                trainer.strategy.pre_backward(loss)
                self.loop.end_iter(None, *self._open_batch)  # the step's outputs: the loop's facade holds them
        else:
            super().trigger(trigger, **context)

    def start_train_batch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        """Start the iteration in the loop (``before_train_iter`` fires there when Lightning steps)."""
        self._open_batch = (batch, batch_idx)
        self.loop.start_iter(batch, batch_idx)

    def end_train_batch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """End the iteration in the loop when Lightning steps (else it ended once the step returned)."""
        if not self.steppers:
            self.loop.end_iter(outputs, batch, batch_idx)

    def check_step_owner(self, trainer: pl.Trainer, accumulate_instead: str) -> None:
        """Refuse Lightning's accumulation and clipping when a hook owns the step (``accumulate_instead``: the
        family's way to accumulate, in the message)."""
        if not self.steppers:
            return
        who, owner = type(self).__name__, type(self.steppers[0]).__name__
        if trainer.accumulate_grad_batches != 1:
            raise ValueError(
                f"{who}: {owner} owns backward and the optimizer step, so Lightning must not accumulate "
                f"(Trainer(accumulate_grad_batches={trainer.accumulate_grad_batches})). {accumulate_instead}"
            )
        if trainer.gradient_clip_val:
            raise ValueError(
                f"{who}: {owner} owns backward and the optimizer step, so Lightning's "
                f"gradient_clip_val={trainer.gradient_clip_val} would be ignored. "
                f"Clip with {owner}(grad_clip=dict(max_norm=...)) instead."
            )
