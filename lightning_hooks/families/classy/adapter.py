"""``ClassyAdapter``: Classy Vision and VISSL hooks driven by Lightning."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.compat import classy as compat
from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter import LegacyHookAdapter, warn_if_last_epoch_unvalidated
from lightning_hooks.core.checks import Periods, check_periods
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.classy import checkpoint
from lightning_hooks.families.classy import vissl as vissl_host
from lightning_hooks.families.classy.config import check_config
from lightning_hooks.families.classy.events import EVENTS, FORWARD, OPTIMIZER_STEP, STEPS
from lightning_hooks.families.classy.meters import MetricMeter
from lightning_hooks.families.classy.schedule import VisslSchedule
from lightning_hooks.families.classy.task import LastBatch, Task, param_options


#: Classy's hooks with a period option: (attribute, the mount point that divides by it, None accepted)
_PERIODS: Periods = {
    "LossLrMeterLoggingHook": (("log_freq", "on_step", True),),
    "TensorboardPlotHook": (("log_period", "on_phase_end", False),),
    "CheckpointHook": (("checkpoint_period", "on_phase_end", False),),
}


class ClassyAdapter(LegacyHookAdapter):
    """Run ``classy_vision.hooks.ClassyHook`` (and VISSL) hooks inside ``lightning.Trainer``.

    Hooks run in list order with every ``CheckpointHook`` moved last, as ``ClassificationTask.set_hooks`` does.
    Hook state (``get_classy_state``) is saved in Lightning checkpoints under each hook's ``name()``.

    Step convention: ``training_step``/``validation_step``/``test_step`` return a loss tensor or a dict with ``loss``
    and optional ``output`` and ``target``; ``task.last_batch.sample`` is the batch as the step received it.

    Args:
        hooks: Classy / VISSL hooks, at most one per ``name()``.
        meters: Classy's meters, in any of Classy's forms: a list of ``ClassyMeter`` instances, Classy's config dict
            (``{"accuracy": {"topk": [1, 5]}}``), or ``{name: torchmetrics.Metric}``; updated with the step's
            ``(output, target)`` after every step (Classy meters on CPU with ``is_train``, as Classy does).
        config: VISSL's ``task.config`` (an ``AttrDict``), for hooks that read it.
        checkpoint_folder: VISSL's ``task.checkpoint_folder``.
        loss: VISSL's ``task.loss`` (the criterion module), for hooks that read or write it, or the name of the
            LightningModule attribute that holds it (a VISSL loss built in ``LightningModule.setup`` sees the device
            VISSL's trainer would have set).
        model: the LightningModule attribute (dotted path) holding the model hooks see as ``task.model`` /
            ``task.base_model``. Default: the LightningModule itself if it has ``trunk`` and ``heads``, else its one
            child that has them (a VISSL model), else the LightningModule.
        vissl: a VISSL config: VISSL's command-line overrides (``["config=test/cpu_test/test_cpu_regnet_moco"]``,
            composed with VISSL's hydra plugin) or a composed ``AttrDict``. Its hooks come from VISSL's own
            ``default_hook_generator(cfg)`` (before ``hooks``); it becomes ``task.config`` and its checkpoint folder
            ``task.checkpoint_folder`` unless those are given. Its ``OPTIMIZER.param_schedulers`` are applied as
            VISSL's trainer does through the ``ClassyOptimizer`` the LightningModule keeps as an attribute (its
            ``.optimizer`` returned by ``configure_optimizers``); without one, a non-constant schedule is refused.

    With VISSL hooks or ``vissl``, the adapter does what VISSL's ``SelfSupervisionTrainer`` does around them: a
    single-process gloo group when there is no process group, Classy's device index set to the run's device (both
    undone at teardown), ``task.perf_stats`` filled with the step's timings, and VISSL's checkpoint layout.

    ``trainer.fit(ckpt_path=...)`` also takes Classy's or VISSL's own ``checkpoint.torch`` (or ``model_phase{N}.torch``,
    or their folder): it resumes where that run left off, ``max_epochs`` counting every train phase as the legacy run's
    ``num_epochs`` did (see :meth:`_from_legacy_checkpoint`).

    Example::

        from classy_vision.hooks import ExponentialMovingAverageModelHook
        trainer = Trainer(callbacks=[ClassyAdapter([ExponentialMovingAverageModelHook(decay=0.9)])])
    """

    family = "classy"
    events = EVENTS
    family_title, host_args, upstream = "Classy", ("task",), ("classy_vision.", "vissl.", "lightning_hooks.compat.")
    checkpoint_hooks = frozenset({"CheckpointHook", "LogLossMetricsCheckpointHook"})  # Classy's, VISSL's

    def __init__(
        self,
        hooks: Any,
        *,
        meters: Mapping[str, Any] | Sequence[Any] | None = None,
        config: Any = None,
        checkpoint_folder: str | None = None,
        loss: Any = None,
        model: str | None = None,
        vissl: Any = None,
    ) -> None:
        if vissl is not None:
            hooks, config, checkpoint_folder = _vissl_hooks(hooks, vissl, config, checkpoint_folder)
        super().__init__(hooks)
        names = Counter(hook.name() for hook in self.hooks)
        repeated = sorted(name for name, n in names.items() if n > 1)
        if repeated:
            raise ValueError(
                f"ClassyAdapter: several hooks share the name() {repeated}; Classy keys hook state by name(), so "
                "pass at most one hook of each class (or give a subclass its own name())."
            )
        self.vissl = vissl is not None or any(vissl_host.is_vissl_hook(hook) for hook in self.hooks)
        self.task = self.host = Task(
            meters=meters, config=config, checkpoint_folder=checkpoint_folder, loss=loss, model=model, vissl=self.vissl
        )
        self.task.hooks = self.hooks
        self._clock = vissl_host.StepClock(self.task)
        self._runtime = vissl_host.Runtime()
        self._schedule = VisslSchedule(config if vissl is not None else None)
        self._batch_clock = time.perf_counter()
        self._build_plan((self.task,))
        self._in_step = False
        self._forwarded = False
        self._step_started = time.perf_counter()
        self._step_ended = self._step_started
        #: where the Classy / VISSL checkpoint ``fit`` started from left off, until ``on_train_start`` applies it
        self._resume: _Resume | None = None

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
                check_config(config, registry.HOOK_REGISTRY[name], "Classy hook")
                return registry.build_hook(config)
        raise KeyError(unknown_name("Classy hook name", str(name), [n for r in registries for n in r.HOOK_REGISTRY]))

    def order(self, hooks: list[Any]) -> list[Any]:
        return sorted(hooks, key=lambda h: type(h).__name__ == "CheckpointHook")

    def check_arguments(self, hook: Any) -> None:
        """Period options Classy divides a counter by must be ints > 0 (``log_freq`` may be None): 0 fails at the
        first division, a negative one runs at a period Classy does not define."""
        check_periods(type(self).__name__, hook, _PERIODS)

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
        """The task's phase state; and the loss module's, in a state converted from a Classy / VISSL checkpoint
        (loaded with the loss's own ``load_state_dict``, as VISSL's trainer does: MoCo's keeps it for its hook)."""
        self.task.load_phase_state(state)
        if state.get("loss"):
            self.task.loss.load_state_dict(state["loss"])

    # ------------------------------------------------------------------------ Classy's and VISSL's checkpoint files
    def _from_legacy_checkpoint(self, legacy: dict[str, Any], source: str) -> dict[str, Any]:
        """Classy's or VISSL's checkpoint as the Lightning checkpoint ``trainer.fit(ckpt_path=...)`` resumes from.

        It carries what the legacy trainer restores: the weights (loaded now, in the file's layout, so heads attach
        as there), the optimizer state, and as this adapter's state the hook states, meters, counters (VISSL's
        ``iteration`` and ``iteration_num`` too), losses and the loss module's state (MoCo's queue and key encoder).
        Lightning's loops have ``train_phase_idx + 1`` epochs done, so ``max_epochs`` counts every train phase, as
        the legacy ``num_epochs``; ``on_train_start`` sets ``global_step`` and the LR schedulers (:class:`_Resume`).
        Outside ``fit``, only the weights, as Classy's test-only task loads them.
        """
        trainer, pl_module = self._trainer, self._trainer.lightning_module
        vissl = vissl_host.is_vissl_checkpoint(legacy)
        if vissl:
            vissl_host.check_checkpoint(legacy, source)
        task = legacy["classy_state_dict"]
        if trainer.state.fn == "fit":
            checkpoint.check_task_state(task, source)
        if vissl:
            vissl_host.load_model_state(self.task.base_model, task["base_model"], source)
        else:
            checkpoint.load_model_state(checkpoint.classy_model(self.task.base_model), task["base_model"], source)
        if trainer.state.fn != "fit":
            return {"pytorch-lightning_version": pl.__version__,
                    "state_dict": {k: v.detach().clone() for k, v in pl_module.state_dict().items()}}
        epochs = task["train_phase_idx"] + 1
        self._resume = _Resume(source, epochs, task["num_updates"], legacy["iteration"] if vissl else None)
        state = self._adapter_state(legacy, vissl, source)
        return checkpoint.lightning_checkpoint(task, trainer, pl_module, epochs, (self.state_key, state), source)

    def _set_loss_state_aside(self, lightning: dict[str, Any]) -> dict[str, Any]:
        """A Lightning checkpoint whose loss module holds state the live one lacks yet (MoCo's key encoder, which
        MoCoHook builds at ``on_start``, after Lightning loads the weights): those entries leave ``state_dict``, and
        the loss's whole state is restored with the adapter's, by the loss's own ``load_state_dict``, as VISSL's
        trainer restores it (MoCo keeps it for its hook)."""
        loss, pl_module = self.task._loss_object(), self._trainer.lightning_module
        prefix = next((f"{name}." for name, module in pl_module.named_modules() if module is loss), None)
        if prefix is None or "state_dict" not in lightning:
            return lightning
        weights = lightning["state_dict"]
        state = {key[len(prefix):]: value for key, value in weights.items() if key.startswith(prefix)}
        later = set(state) - set(loss.state_dict())
        if not later:
            return lightning
        mine = self.checkpoint_state(self._trainer, lightning)
        if mine is None:
            raise ValueError(
                f"ClassyAdapter: the checkpoint holds the loss module's state ({prefix}{sorted(later)[0]}, ...) that "
                "only its hooks build, and no ClassyAdapter state of its own to restore it with; resume with the "
                "ClassyAdapter the checkpoint was written with."
            )
        for key in later:
            del weights[prefix + key]
        mine["host"]["loss"] = state
        return lightning

    def _adapter_state(self, legacy: dict[str, Any], vissl: bool, source: str) -> dict[str, Any]:
        """This adapter's checkpoint state from a Classy / VISSL checkpoint: hook states by ``name()``, counters,
        losses, meters and the loss module's state.

        Lightning resumes at a train epoch: a test phase the legacy run would run next is counted as done."""
        task = legacy["classy_state_dict"]
        skipped = self._test_phase_skipped(task, vissl)
        if skipped:
            warnings.warn(
                f"ClassyAdapter: {source} was written at the end of train phase {task['train_phase_idx']}; Lightning "
                f"resumes at the next train epoch, without the test phase {'VISSL' if vissl else 'Classy'} would run "
                "first. Run trainer.validate() first if you need it."
            )
        missing = [hook.name() for hook in self.hooks if hook.name() not in task["hooks"]]
        if missing:
            warnings.warn(f"ClassyAdapter: {source} holds no state for hooks {missing}; they start fresh")
        host = {
            "phase_idx": task["phase_idx"] + int(skipped),
            "train_phase_idx": task["train_phase_idx"],
            "num_updates": task["num_updates"],
            "iteration": legacy["iteration"] if vissl else task.get("iteration", 0),
            "local_iteration_num": legacy["iteration_num"] if vissl else -1,
            "batches": -1,
            "losses": list(task["losses"]),
            "meters": list(task["meters"]),
        }
        loss = legacy.get("loss") if vissl else task.get("loss")
        if loss and self.task.has_loss():
            host["loss"] = loss
        elif loss:
            keys = ", ".join(sorted(loss)[:4]) + ", ..." * (len(loss) > 4)
            warnings.warn(
                f"ClassyAdapter: {source} holds the loss module's state ({keys}), but the adapter has no loss, so it "
                "is not restored. Pass ClassyAdapter(..., loss='<LightningModule attribute>')."
            )
        hooks = {name: state for name, state in task["hooks"].items() if name in self.hook_keys()}
        return {"family": self.family, "hooks": hooks, "host": host}

    def _test_phase_skipped(self, task: Mapping[str, Any], vissl: bool) -> bool:
        """Whether the legacy run would run a test phase next (Lightning skips it). Classy follows every train phase
        with one. VISSL only when it tests (here: when the Lightning run validates), and not after a checkpoint
        written inside a train phase, whose counters are those of the phase before (fewer train than test phases)."""
        if not task["train"]:
            return False
        if not vissl:
            return True
        tests_done = task["phase_idx"] - task["train_phase_idx"]
        return bool(self._trainer.enable_validation) and tests_done <= task["train_phase_idx"]

    def _apply_resume(self, trainer: pl.Trainer, resume: _Resume) -> None:
        """``global_step`` from VISSL's ``iteration`` (Classy: ``num_updates`` / global batch size), the schedulers
        advanced to it, and the warning for a VISSL checkpoint written inside a train phase."""
        batches = trainer.num_training_batches
        if resume.iteration is None:
            steps = resume.num_updates // max(self.task.get_global_batchsize(), 1)
        else:
            steps = resume.iteration
            if math.isfinite(batches) and steps != resume.epochs * int(batches):
                rank_zero_warn(
                    f"ClassyAdapter: {resume.source} was written at iteration {steps}, inside train phase "
                    f"{resume.epochs}; Lightning starts that phase from its first batch (VISSL would skip the batches "
                    "already trained). Start from a phase checkpoint (model_phase<N>.torch) to avoid it."
                )
        self._resume_schedule(trainer, steps, resume.epochs)

    def _resume_schedule(self, trainer: pl.Trainer, steps: int, epochs: int) -> None:
        """``global_step`` set to ``steps`` and every scheduler stepped from its start as far as an uninterrupted
        Lightning run would have (a Classy or VISSL checkpoint holds none)."""
        lightning_api.set_optimizer_steps(trainer, steps)
        for config in trainer.lr_scheduler_configs:
            scheduler = config.scheduler
            if not hasattr(scheduler, "base_lrs") or config.reduce_on_plateau:
                warnings.warn(
                    f"ClassyAdapter: {type(scheduler).__name__} cannot be advanced to where the checkpoint left off (it "
                    "depends on monitored values); it starts from its initial state."
                )
                continue
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*")
                for group, lr in zip(scheduler.optimizer.param_groups, scheduler.base_lrs):
                    group["lr"] = group["initial_lr"] = lr
                scheduler.last_epoch = 0
                for _ in range((steps if config.interval == "step" else epochs) // config.frequency):
                    scheduler.step()

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
        self._clock.mark("step")
        self._clock.section("read_sample", "fetch", "step")
        self.task.last_batch = LastBatch(
            sample=args[0] if args else kwargs["batch"], step_data={"sample_fetch_time": self._step_started - self._step_ended}
        )
        self._in_step, self._forwarded = True, False
        try:
            result = step(*args, **kwargs)
        finally:
            self._in_step = False
        self._clock.section("loss_compute", "forward.fired" if self._forwarded else "step")
        self._record(result)
        self.fire(STEPS[method])
        return result

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        if trigger == FORWARD:  # the step's first forward of task.base_model: its output is the model output
            if not self._in_step or self._forwarded:
                return
            if context.get("before"):
                self._clock.mark("forward")
                return
            self._forwarded = True
            self._clock.section("forward", "forward")
            output = context["output"]
            if self.vissl and isinstance(output, (list, tuple)) and len(output) == 1:
                output = output[0]  # VISSL's train step unwraps a single output
            self.task.last_batch.model_output = output
            self.fire(trigger)
            self._clock.mark("forward.fired")
            return
        if trigger == OPTIMIZER_STEP:
            self._clock.section("optimizer_step", "optimizer")
        self.fire(trigger)

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        """With VISSL, ``ClassyOptimizer.step(where=task.where)``'s schedule update first (VISSL's param schedulers).
        Keep the options the step uses: ``options_view`` reports them until the next step, as Classy's does."""
        if optimizer in self._schedule.classy:
            self._schedule.before_step(optimizer, self.task.where)
        self.task.used_options[optimizer] = param_options(optimizer)

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
            if self.vissl:  # VISSL: the loss averaged over ranks, times the batch size
                last.loss = _all_reduce_mean(last.loss.clone())
                size = target.size(0) if isinstance(target, torch.Tensor) else vissl_batch_size(sample)
                task.losses.append(last.loss.item() * size)
            else:
                task.losses.append(last.loss.item())
            self._clock.section("loss_all_reduce", "loss_compute.end")
        if last.output is not None and target is not None and task.meters and self._meters_on():
            output, target = last.output.detach(), target.detach()
            extra = {} if self.vissl else {"is_train": task.train}  # VISSL's step passes no is_train
            for meter in task.meters:  # Classy's update_meters: on CPU, with is_train; torchmetrics on the device
                if isinstance(meter, MetricMeter):
                    meter.update(output, target)
                else:
                    meter.update(output.cpu(), target.cpu(), **extra)
            self._clock.section("meters_update", "loss_compute.end" if loss is None else "loss_all_reduce.end")

    def _meters_on(self) -> bool:
        """VISSL updates meters in train phases only with ``METERS.enable_training_meter``."""
        if not self.vissl or not self.task.train:
            return True
        meters = getattr(self.task, "config", {}).get("METERS", {}) if hasattr(self.task, "config") else {}
        return bool(meters.get("enable_training_meter", True))

    def _batch_done(self) -> None:
        """VISSL's bookkeeping after a step: counters, and the batch's time since the previous one ended."""
        self._clock.section("train_step_total", "fetch")
        now = time.perf_counter()
        task = self.task
        task.local_iteration_num += 1
        task.batches += 1
        task.phase_batches += 1
        task.batch_time.append(now - self._batch_clock)
        self._step_ended = self._batch_clock = now

    def _start_phase(self, event: Trigger, train: bool, resumed: bool = False) -> None:
        """Classy's phase start; with VISSL, a train phase first gets VISSL's ``optimizer.on_epoch(where)`` (its epoch
        param schedulers, also when a resumed phase reopens), which the ``on_phase_start`` hooks see."""
        self.task.start_phase(train, resumed)
        if train and self._schedule.classy and not self.task.test_only:
            self._schedule.at_phase_start(self.task.where)
            for optimizer in self._schedule.classy:
                self.task.used_options[optimizer] = param_options(optimizer)
        self.fire(event)
        self.task.phase_start_time_train = self._step_ended = time.perf_counter()
        self._clock.mark("fetch")

    def _end_phase(self, event: Trigger) -> None:
        """Classy's ``on_phase_end``: the phase's speed into ``perf_log``, ``synchronize_losses`` (mean over ranks),
        meters' sync, the hooks, then a fresh ``perf_log`` holding the phase's total speed. ``last_batch`` is None from
        here to the next step, as in Classy, whose loop ends on a step that finds no batch."""
        task = self.task
        task.phase_ended = True
        task.log_phase_end(task.phase_type)
        task.last_batch = None
        if task.train:
            task.options_at_phase_end()
        if _distributed() and not self.vissl:  # VISSL averages each step's loss over ranks instead
            losses = torch.tensor(task.losses)
            torch.distributed.all_reduce(losses)
            task.losses = (losses / torch.distributed.get_world_size()).tolist()
        for meter in task.meters:
            meter.sync_state()
        self.fire(event)
        task.perf_log = []
        task.log_phase_end(f"{task.phase_type}_total")

    # ---------------------------------------------------------------------------------------- lightning events
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.task.trainer = trainer
        self.task.find_model(pl_module)  # before the patches: the forward trigger hooks task.base_model
        super().setup(trainer, pl_module, stage)
        if stage == "fit":
            self.task.new_run()  # Lightning restores a checkpoint's counters after setup
        # VISSL's get_machine_local_and_dist_rank() reads these; Lightning's launcher exports only LOCAL_RANK.
        os.environ["RANK"] = str(trainer.global_rank)
        os.environ["LOCAL_RANK"] = str(trainer.local_rank)
        os.environ["WORLD_SIZE"] = str(trainer.world_size)
        if self.vissl:
            self._runtime.start(trainer.strategy.root_device, trainer.world_size)
            if self.task.has_loss() and not isinstance(self.task._loss, str):
                vissl_host.check_loss_device(self.task.loss, trainer.strategy.root_device)
        self._resume = None
        checkpoint.install_loader(trainer, self._from_legacy_checkpoint, self._set_loss_state_aside)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().teardown(trainer, pl_module, stage)
        checkpoint.uninstall_loader(trainer)
        self._runtime.stop()

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        self._runtime.stop()

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        self._clock.mark("backward")

    @override
    def on_after_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.section("backward", "backward")
        self.fire(ON["on_after_backward"])
        self._clock.mark("optimizer")

    @classmethod
    def weight_swap_classes(cls) -> tuple[type, ...]:
        ema = getattr(sys.modules.get("classy_vision.hooks"), "ExponentialMovingAverageModelHook", None)
        return (ema,) if ema is not None else ()  # none without classy_vision (the compat alias serves VISSL)

    def restore_live_weights(self) -> None:
        """Classy's EMA hook copies its average into the model when a test phase starts and the live weights back
        when the next train phase starts: a run that ends in between gets the live weights back here."""
        if self.task.train:
            return
        for hook in self.hooks:
            if isinstance(hook, self.weight_swap_classes()) and hook.state.model_state:
                hook.set_model_state(self.task, use_ema=False)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._resume is not None:
            self._apply_resume(trainer, self._resume)
            self._resume = None
        _warn_if_no_final_test_phase(trainer)
        self._schedule.attach(trainer, vissl=self.vissl)
        self._batch_clock = time.perf_counter()  # VISSL's task.start_time, set before on_start
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

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        self._end_phase(trigger)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.standalone_validation():
            self.task.train = False  # Classy's test-only task is in test mode from on_start
        self.fire(ON["on_validation_start"])

    @override
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

    @override
    def on_validation_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        if not trainer.sanity_checking:
            self._batch_done()
            self.fire(ON["on_validation_batch_end"])

    @override
    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._end_phase(ON["on_validation_epoch_end"])

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.task.train = False
        self.fire(ON["on_test_start"])

    @override
    def on_test_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start_phase(ON["on_test_epoch_start"], train=False)

    @override
    def on_test_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        self._batch_done()
        self.fire(ON["on_test_batch_end"])

    @override
    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end_phase(ON["on_test_epoch_end"])


@dataclass(frozen=True)
class _Resume:
    """Where the Classy / VISSL checkpoint that ``fit`` started from left off (``source``: the file)."""

    source: str
    epochs: int  # train phases done: train_phase_idx + 1
    num_updates: int  # samples trained on
    iteration: int | None  # VISSL's train steps; None for Classy (its global_step is num_updates / batch size)


def _vissl_hooks(hooks: Any, config: Any, given_config: Any, folder: str | None) -> tuple[list[Any], Any, str]:
    """VISSL's ``default_hook_generator(cfg)`` before ``hooks``; the composed config and its checkpoint folder."""
    if given_config is not None:
        raise ValueError("ClassyAdapter: pass the VISSL config as vissl=... only (it becomes task.config), not config=")
    composed = vissl_host.compose(config)
    built, default_folder = vissl_host.hooks_from_config(composed)
    extra = [] if hooks is None else list(hooks) if isinstance(hooks, (list, tuple)) else [hooks]
    return built + extra, composed, folder if folder is not None else default_folder


def vissl_batch_size(sample: Any) -> int:
    """The batch size of a VISSL sample whose target is not a tensor: its first tensor's first dimension."""
    while isinstance(sample, (list, tuple, Mapping)):
        sample = next(iter(sample.values())) if isinstance(sample, Mapping) else sample[0]
    return int(sample.shape[0]) if isinstance(sample, torch.Tensor) else 1


def _all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    if _distributed() and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(tensor)
        tensor /= torch.distributed.get_world_size()
    return tensor


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

