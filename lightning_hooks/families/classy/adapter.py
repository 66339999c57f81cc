"""``ClassyAdapter``: Classy Vision and VISSL hooks driven by Lightning."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_warn

from lightning_hooks.compat import classy as compat
from lightning_hooks.core.adapter import LegacyHookAdapter, warn_if_last_epoch_unvalidated
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.classy.events import EVENTS, FORWARD, STEPS
from lightning_hooks.families.classy.task import LastBatch, Task


class ClassyAdapter(LegacyHookAdapter):
    """Run ``classy_vision.hooks.ClassyHook`` (and VISSL) hooks inside ``lightning.Trainer``.

    Hooks run in list order with every ``CheckpointHook`` moved last, as ``ClassificationTask.set_hooks`` does.
    Hook state (``get_classy_state``) is saved in Lightning checkpoints under each hook's ``name()``.

    Step convention: ``training_step``/``validation_step``/``test_step`` return a loss tensor or a dict with ``loss``
    and optional ``output`` and ``target``; ``task.last_batch.sample`` is the batch as the step received it.

    Args:
        hooks: Classy / VISSL hooks, at most one per ``name()``.
        meters: ``{name: torchmetrics.Metric}``; updated with ``(output, target)`` after every step.
        config: VISSL's ``task.config`` (an ``AttrDict``), for hooks that read it.
        checkpoint_folder: VISSL's ``task.checkpoint_folder``.
        loss: VISSL's ``task.loss`` (the criterion module), for hooks that read or write it.

    Example::

        from classy_vision.hooks import ExponentialMovingAverageModelHook
        trainer = Trainer(callbacks=[ClassyAdapter([ExponentialMovingAverageModelHook(decay=0.9)])])
    """

    family = "classy"
    events = EVENTS
    family_title, host_args, upstream = "Classy", ("task",), ("classy_vision.", "vissl.", "lightning_hooks.compat.")

    def __init__(
        self,
        hooks: Any,
        *,
        meters: Mapping[str, Any] | None = None,
        config: Any = None,
        checkpoint_folder: str | None = None,
        loss: Any = None,
    ) -> None:
        super().__init__(hooks)
        names = Counter(hook.name() for hook in self.hooks)
        repeated = sorted(name for name, n in names.items() if n > 1)
        if repeated:
            raise ValueError(
                f"ClassyAdapter: several hooks share the name() {repeated}; Classy keys hook state by name(), so "
                "pass at most one hook of each class (or give a subclass its own name())."
            )
        self.task = self.host = Task(
            meters=meters, config=config, checkpoint_folder=checkpoint_folder, loss=loss
        )
        self.task.hooks = self.hooks
        self._build_plan((self.task,))
        self._in_step = False
        self._forwarded = False
        self._step_started = time.perf_counter()
        self._step_ended = self._step_started

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        hooks = sys.modules.get("classy_vision.hooks")
        real = getattr(hooks, "ClassyHook", compat.ClassyHook)
        return (compat.ClassyHook,) if real is compat.ClassyHook else (real, compat.ClassyHook)

    @property
    def noops(self) -> tuple[Any, ...]:  # type: ignore[override]
        return tuple(base._noop for base in self.base_classes())

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """``{"name": ..., **kwargs}`` through Classy's registry (when installed), then the compat one."""
        registries: list[Any] = [compat]
        if importlib.util.find_spec("classy_vision") is not None:
            import classy_vision.hooks as installed  # importing it registers Classy's own hooks

            if installed.build_hook is not compat.build_hook:  # not the import alias
                registries.insert(0, installed)
        name = config.get("name")
        for registry in registries:
            if name in registry.HOOK_REGISTRY:
                return registry.build_hook(config)
        raise KeyError(unknown_name("Classy hook name", str(name), [n for r in registries for n in r.HOOK_REGISTRY]))

    def order(self, hooks: list[Any]) -> list[Any]:
        return sorted(hooks, key=lambda h: type(h).__name__ == "CheckpointHook")

    # ------------------------------------------------------------------------------------------------ state
    def hook_keys(self) -> list[str]:
        return [hook.name() for hook in self.hooks]

    def hook_state(self, hook: Any) -> Any:
        return hook.get_classy_state()

    def load_hook_state(self, hook: Any, state: Any) -> None:
        hook.set_classy_state(state)

    def host_state(self) -> dict[str, Any]:
        return self.task.phase_state()

    def load_host_state(self, state: dict[str, Any]) -> None:
        self.task.load_phase_state(state)

    # ------------------------------------------------------------------------------------------- conditions
    def in_train_loop(self) -> bool:
        return bool(self._trainer is not None and self._trainer.training)

    def standalone_validation(self) -> bool:
        return self._trainer.state.fn == "validate"

    # ----------------------------------------------------------------------------------------- step triggers
    def run_step(self, method: str, step: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A step method: ``last_batch`` filled from the batch and the step's result, then ``on_loss_and_meter``."""
        if self._trainer.sanity_checking:
            return step(*args, **kwargs)
        self._step_started = time.perf_counter()
        self.task.last_batch = LastBatch(
            sample=args[0] if args else kwargs["batch"], step_data={"sample_fetch_time": self._step_started - self._step_ended}
        )
        self._in_step, self._forwarded = True, False
        try:
            result = step(*args, **kwargs)
        finally:
            self._in_step = False
        self._record(result)
        self.fire(STEPS[method])
        return result

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        if trigger == FORWARD:  # the step's first forward: its output is the model output
            if not self._in_step or self._forwarded:
                return
            self._forwarded = True
            self.task.last_batch.model_output = context["output"]
        self.fire(trigger)

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        """Keep the options the step uses: ``options_view`` at ``on_step`` reports them, as Classy's does."""
        self.task.used_options[optimizer] = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]

    def _record(self, result: Any) -> None:
        """Fill ``last_batch``, ``losses`` and the meters from a step's return value (the step convention)."""
        task, last = self.task, self.task.last_batch
        sample = last.sample
        if isinstance(result, Mapping):
            loss, output, target = result.get("loss"), result.get("output"), result.get("target")
        elif isinstance(result, torch.Tensor) or result is None:
            loss, output, target = result, None, None
        else:
            raise TypeError(
                f"ClassyAdapter: {type(self._trainer.lightning_module).__name__}'s step returned {type(result).__name__}; Classy hooks "
                "need a loss tensor or a dict with 'loss' and optional 'output' and 'target'."
            )
        if target is None and isinstance(sample, Mapping):
            target = sample.get("target")
        last.output = output if output is not None else last.model_output
        last.target = target
        if loss is not None:
            last.loss = loss.detach()
            task.losses.append(last.loss.item())
        if last.output is not None and target is not None:
            for meter in task.meters:
                meter.update(last.output.detach(), target)

    def _batch_done(self) -> None:
        now = time.perf_counter()
        task = self.task
        task.local_iteration_num += 1
        task.batches += 1
        task.batch_time.append(now - self._step_started)
        self._step_ended = now

    def _start_phase(self, event: Trigger, train: bool, resumed: bool = False) -> None:
        self.task.start_phase(train, resumed)
        self.fire(event)
        self.task.phase_start_time_train = self._step_ended = time.perf_counter()

    def _end_phase(self, event: Trigger) -> None:
        """Classy's ``on_phase_end``: the phase's speed into ``perf_log``, ``synchronize_losses`` (mean over ranks),
        meters' sync, the hooks, then a fresh ``perf_log`` holding the phase's total speed. ``last_batch`` is None from
        here to the next step, as in Classy, whose loop ends on a step that finds no batch."""
        task = self.task
        task.log_phase_end(task.phase_type)
        task.last_batch = None
        if _distributed():
            losses = torch.tensor(task.losses)
            torch.distributed.all_reduce(losses)
            task.losses = (losses / torch.distributed.get_world_size()).tolist()
        for meter in task.meters:
            meter.sync_state()
        self.fire(event)
        task.perf_log = []
        task.log_phase_end(f"{task.phase_type}_total")

    # ---------------------------------------------------------------------------------------- lightning events
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.task.trainer = trainer
        if stage == "fit":
            self.task.new_run()  # Lightning restores a checkpoint's counters after setup
        # VISSL's get_machine_local_and_dist_rank() reads these; Lightning's launcher exports only LOCAL_RANK.
        os.environ["RANK"] = str(trainer.global_rank)
        os.environ["LOCAL_RANK"] = str(trainer.local_rank)
        os.environ["WORLD_SIZE"] = str(trainer.world_size)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        _warn_if_no_final_test_phase(trainer)
        self.fire(ON["on_train_start"])

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        """Start a train phase, or reopen the one a mid-epoch checkpoint was in (``mid_epoch``).

        Hooks rebuild their per-phase state in ``on_phase_start``; on reopening, the weights Lightning restored win
        over what they put in the model there (Classy's EMA hook swaps in the weights saved at the previous phase end).
        """
        weights = {k: v.clone() for k, v in pl_module.state_dict().items()} if mid_epoch else None
        self._start_phase(ON["on_train_epoch_start"], train=True, resumed=mid_epoch)
        if weights is not None:
            with torch.no_grad():
                for key, value in pl_module.state_dict().items():
                    value.copy_(weights[key])

    def end_train_batch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self.task.iteration += 1
        self.task.num_updates += self.task.get_global_batchsize()  # VISSL and Classy: after the update, before on_step
        self._batch_done()
        self.fire(ON["on_train_batch_end"])
        self.task.used_options.clear()

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        self._end_phase(trigger)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.standalone_validation():
            self.task.train = False  # Classy's test-only task is in test mode from on_start
        self.fire(ON["on_validation_start"])

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if self.train_epoch_open():
            raise ValueError(
                "ClassyAdapter: validation started in the middle of a train epoch (val_check_interval < 1.0 or "
                "check_val_every_n_epoch with a step count). Classy runs a test phase only after a whole train phase: "
                "use Trainer(val_check_interval=1.0)."
            )
        self._start_phase(ON["on_validation_epoch_start"], train=False)

    def on_validation_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        if not trainer.sanity_checking:
            self._batch_done()
            self.fire(ON["on_validation_batch_end"])

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._end_phase(ON["on_validation_epoch_end"])

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.task.train = False
        self.fire(ON["on_test_start"])

    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_phase(ON["on_test_epoch_start"], train=False)

    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        self._batch_done()
        self.fire(ON["on_test_batch_end"])

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end_phase(ON["on_test_epoch_end"])


def _warn_if_no_final_test_phase(trainer: pl.Trainer) -> None:
    """Classy ends every run with a test phase; Lightning skips the last validation in these two settings."""
    if not trainer.enable_validation:
        return
    warn_if_last_epoch_unvalidated(
        trainer, "ClassyAdapter", "so the run ends without the test phase Classy always ends with"
    )
    if trainer.max_steps != -1:
        rank_zero_warn(
            f"ClassyAdapter: Trainer(max_steps={trainer.max_steps}) can stop inside a train epoch, and Lightning then "
            "runs no validation, so the run ends without the test phase Classy always ends with. Use max_epochs, or "
            "call trainer.validate() after fit."
        )


def _distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()

