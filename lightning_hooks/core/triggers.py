"""Triggers: the places in a Lightning run that fire event-table rows.

A trigger is a typed value in an event table (:class:`~lightning_hooks.core.events.Mount`). Most are
:class:`LightningEvent`: a ``Callback`` method, which the adapter receives because it is a callback. The others fire
from places that are not callback methods; each is one class that installs its patch for the run and removes it.
An adapter installs the patches its table names at ``setup`` and removes them at ``teardown`` or on a failure, so a
LightningModule leaves a fit as it came in.

A patch calls back into the adapter: point triggers call ``adapter.trigger(trigger, **context)``, which fires the
trigger's rows (a family overrides it to update its facade first); :class:`ModuleStep` calls
``adapter.run_step(method, step, args, kwargs)``, which runs the step and fires the step's rows around it.

Example::

    LOAD_CHECKPOINT = ModuleLoadCheckpoint()
    EVENTS = EventTable("mmengine", [Mount(LOAD_CHECKPOINT, "after_load_checkpoint", ("checkpoint",)), ...])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import Callback

Remove = Callable[[], None]


class Trigger:
    """A place in the run that fires table rows. Subclasses are frozen dataclasses: equal triggers are the same place.
    docs/lifecycle.md describes each kind by its class docstring."""

    def __str__(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class LightningEvent(Trigger):
    """A Lightning ``Callback`` method; the adapter fires its rows from its override of that method."""

    name: str

    def __post_init__(self) -> None:
        if not callable(getattr(Callback, self.name, None)) or self.name.startswith("_"):
            raise ValueError(f"{self.name!r} is not a lightning Callback method")

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class LastTrainBatch(Trigger):
    """``on_train_batch_end`` of a train epoch's last batch, after the batch's own rows: the adapter ends the train
    epoch there, before Lightning validates, for hosts that end the epoch before validation (MMEngine, Classy)."""

    def __str__(self) -> str:
        return "on_train_batch_end (last batch)"


class Patch(Trigger):
    """A trigger that fires from a patch installed on the run. ``install`` returns the function that removes it.

    A patch of the world the hooks run in (``environment``: a process group, environment variables, the values the
    host gives its hooks) stays until the hooks' ``on_exception`` ran after a failure; the others go first."""

    environment: ClassVar[bool] = False

    @property
    def key(self) -> Any:
        """Triggers with equal keys share one patch (a step method fires its rows before and after the step)."""
        return self

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        raise NotImplementedError


@dataclass(frozen=True)
class ModuleLoadCheckpoint(Patch):
    """``LightningModule.on_load_checkpoint``: after the module's own, before Lightning loads the weights."""

    def __str__(self) -> str:
        return "LightningModule.on_load_checkpoint"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        original = pl_module.on_load_checkpoint

        def on_load_checkpoint(checkpoint: dict[str, Any]) -> None:
            original(checkpoint)
            adapter.trigger(self, checkpoint=checkpoint)

        return lightning_api.patch_method(pl_module, "on_load_checkpoint", on_load_checkpoint)


@dataclass(frozen=True)
class ModuleForward(Patch):
    """Every forward of the LightningModule (a forward hook); the adapter decides which ones fire."""

    def __str__(self) -> str:
        return "LightningModule.forward"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        # a plain function, not a bound method: a hook that deep-copies the module (MMEngine's EMAHook) then shares
        # this adapter instead of copying it (copy.deepcopy copies a bound method's __self__, not a function)
        handle = pl_module.register_forward_hook(lambda module, args, output: adapter.trigger(self, output=output))
        return handle.remove


@dataclass(frozen=True)
class ModuleStep(Patch):
    """A LightningModule step method (``training_step``, ``validation_step``, ``test_step``), wrapped on the instance
    when the module overrides it. ``at`` says whether the rows fire before the step runs or after it returned."""

    method: str
    at: str = "after"

    def __post_init__(self) -> None:
        if self.method not in ("training_step", "validation_step", "test_step") or self.at not in ("before", "after"):
            raise ValueError(f"ModuleStep({self.method!r}, at={self.at!r}): not a step method, or at not before/after")

    def __str__(self) -> str:
        return f"LightningModule.{self.method} ({self.at} the step)"

    @property
    def key(self) -> Any:
        return (ModuleStep, self.method)

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        if not lightning_api.is_overridden(self.method, pl_module):
            return _nothing
        step = _Step(adapter, self.method, getattr(pl_module, self.method))
        return lightning_api.patch_method(pl_module, self.method, step)


@dataclass(frozen=True)
class StrategyTrainingStep(Patch):
    """Lightning's ``trainer.strategy.training_step``, after it returned: after the module's step, outside a DDP
    wrapper's forward, before Lightning's backward."""

    def __str__(self) -> str:
        return "Strategy.training_step (after the step)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
            def training_step(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                adapter.trigger(self)
                return result

            return training_step

        return lightning_api.wrap_strategy_training_step(trainer, wrap)


@dataclass(frozen=True)
class OptimizerStep(Patch):
    """After ``step()`` of an optimizer this run trains (a global optimizer post-hook, filtered by identity, so it is in
    place before Lightning creates the optimizers)."""

    def __str__(self) -> str:
        return "Optimizer.step"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        def after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            for trained in trainer.optimizers:  # a loop, not any(generator): every optimizer step of the run
                if optimizer is trained:
                    adapter.trigger(self)
                    return

        return register_optimizer_step_post_hook(after_step).remove


class _Step(lightning_api.PatchedMethod):
    """A wrapped step method: calls ``adapter.run_step``; still counts as overridden for Lightning."""

    def __init__(self, adapter: Any, method: str, step: Callable[..., Any]) -> None:
        super().__init__(step)
        self.adapter, self.method = adapter, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.adapter.run_step(self.method, self.original, args, kwargs)


def _nothing() -> None:
    pass


#: ``ON["on_train_start"]``: the :class:`LightningEvent` of each public ``Callback`` method.
ON: dict[str, LightningEvent] = {
    name: LightningEvent(name) for name in dir(Callback) if name.startswith(("on_", "setup", "teardown"))
}
#: the one :class:`LastTrainBatch` trigger
LAST_TRAIN_BATCH = LastTrainBatch()
