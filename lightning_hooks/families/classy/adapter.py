"""``ClassyAdapter``: Classy Vision and VISSL hooks driven by Lightning: the Lightning events and patches that move
the ``task`` facade through Classy's phases and fire the hooks' mount points."""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.compat import classy as compat
from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter import LegacyHookAdapter, warn_if_last_epoch_unvalidated
from lightning_hooks.core.checks import Periods, check_periods
from lightning_hooks.core.host_loop import Evaluation
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.core.loaders import set_sampler_epoch
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON, Patch, Trigger
from lightning_hooks.families.classy import vissl as vissl_host
from lightning_hooks.families.classy.config import build_hook
from lightning_hooks.families.classy.events import EVENTS, FORWARD, OPTIMIZER_STEP, STEPS
from lightning_hooks.families.classy.loop import ClassyLoop
from lightning_hooks.families.classy.optimizer import param_options
from lightning_hooks.families.classy.resume import LOAD_CHECKPOINT, LegacyStart
from lightning_hooks.families.classy.schedule import VisslSchedule
from lightning_hooks.families.classy.task import LastBatch, Task
from lightning_hooks.families.classy.timing import StepClock, record_step
from lightning_hooks.families.classy.vissl_task import VisslTask

#: Classy's hooks with a period option: (attribute, the mount point that divides by it, None accepted)
_PERIODS: Periods = {
    "LossLrMeterLoggingHook": (("log_freq", "on_step", True),),
    "TensorboardPlotHook": (("log_period", "on_phase_end", False),),
    "CheckpointHook": (("checkpoint_period", "on_phase_end", False),),
}


#: Classy's own hooks (``classy_vision.hooks``) that never read ``task.last_batch.output`` nor ``model_output`` (the
#: step's output, or the model's when the step returns none): a run with only these, no meters, no VISSL and no
#: ``on_forward`` row watches no forward of the model (OutputCSVHook reads the output)
OUTPUT_BLIND = frozenset({
    "CheckpointHook", "ExponentialMovingAverageModelHook", "LossLrMeterLoggingHook", "ModelComplexityHook",
    "ModelTensorboardHook", "PreciseBatchNormHook", "ProfilerHook", "ProgressBarHook", "TensorboardPlotHook",
    "TorchscriptHook", "VisdomHook",
})  # fmt: skip  # the names packed, not one a line
#: the mount points that fire while a step's ``last_batch`` is filled (a hook there may read its output)
_STEP_MOUNTS = ("on_forward", "on_loss_and_meter", "on_backward", "on_update", "on_step", "on_exception")


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
            ``(output, target)`` after every step (Classy meters on CPU with ``is_train``, as Classy does). With
            ``vissl`` and no ``meters``: the config's ``METERS.names``, built as VISSL's task builds them.
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
        hook_generator: with ``vissl``, the function that builds the config's hooks in place of VISSL's
            ``default_hook_generator``, as the ``hook_generator`` that a launcher script gives VISSL's
            ``launch_distributed``.

    With VISSL hooks or ``vissl``, the adapter does what VISSL's ``SelfSupervisionTrainer`` does around them: a
    single-process gloo group when there is no process group, Classy's device index set to the run's device (both
    undone at teardown), ``task.perf_stats`` filled with the step's timings, and VISSL's checkpoint layout.

    ``trainer.fit(ckpt_path=...)`` also takes Classy's or VISSL's own ``checkpoint.torch`` (or ``model_phase{N}.torch``,
    or their folder): it resumes where that run left off, ``max_epochs`` counting every train phase as the legacy run's
    ``num_epochs`` did; a file written at the end of a train phase first runs that epoch's test phase (a validation
    run after the ``on_start`` hooks), as Classy does (see :class:`~lightning_hooks.families.classy.resume.LegacyStart`).

    Example::

        from classy_vision.hooks import ExponentialMovingAverageModelHook
        trainer = Trainer(callbacks=[ClassyAdapter([ExponentialMovingAverageModelHook(decay=0.9)])])
    """

    family = "classy"
    loop: ClassyLoop
    events = EVENTS
    family_title, host_args, upstream = "Classy", ("task",), ("classy_vision.", "vissl.", "lightning_hooks.compat.")
    checkpoint_hooks = frozenset({"CheckpointHook", "LogLossMetricsCheckpointHook"})  # Classy's, VISSL's
    #: Classy's ``advance_phase`` and VISSL's ``_advance_phase`` make the phase's iterator, then the hooks'
    #: ``on_phase_start`` run: every train phase's iterator is made before them (a fit's first after ``on_start`` and
    #: a pending test phase)
    train_iterator_at = "before_epoch_start"
    #: and each test phase's too (``advance_phase`` / ``_advance_phase`` of a test phase), after the train phase before
    #: it ended (a train epoch cut short ends at the validation's start: :meth:`start_eval`)
    eval_iterator_at = "before_epoch_start"

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
        hook_generator: Callable[[Any], list[Any]] | None = None,
    ) -> None:
        if hook_generator is not None and vissl is None:
            raise ValueError("ClassyAdapter: hook_generator= builds the hooks of a VISSL config: pass vissl=... too")
        if vissl is not None:
            hooks, config, checkpoint_folder = vissl_host.with_config_hooks(
                hooks, vissl, config, checkpoint_folder, hook_generator
            )
            if meters is None:
                from lightning_hooks.families.classy.meters import vissl_meters

                meters = vissl_meters(config)
        super().__init__(hooks)
        names = Counter(hook.name() for hook in self.hooks)
        repeated = sorted(name for name, n in names.items() if n > 1)
        if repeated:
            raise ValueError(
                f"ClassyAdapter: several hooks share the name() {repeated}; Classy keys hook state by name(), so "
                "pass at most one hook of each class (or give a subclass its own name())."
            )
        self.vissl = vissl is not None or any(vissl_host.is_vissl_hook(hook) for hook in self.hooks)
        task_class = VisslTask if self.vissl else Task
        self.task = self.host = task_class(
            meters=meters, config=config, checkpoint_folder=checkpoint_folder, loss=loss, model=model
        )
        self._clock = StepClock(functools.partial(getattr, self.task, "perf_stats"))  # picklable (ddp_spawn)
        self._schedule = VisslSchedule(config if vissl is not None else None)
        #: Classy's phase loop: the counters the task shows, moved and fired from the events below; it fires Lightning's
        #: events' rows, which :meth:`trigger` passes to the dispatch as they are, so it fires through the dispatch
        #: (two calls fewer at every step)
        self.loop = ClassyLoop(self.dispatch, self.task, self._clock, self._at_phase_start)
        self.task.hooks, self.task._caller, self.task._loop = self.hooks, self.hook_caller, self.loop
        self.dispatch.build_plan((self.task,))
        self._in_step = False
        self._forwarded = False
        self._module_name = ""  # the LightningModule's class name, for the step's errors
        self.legacy_start = LegacyStart(self.task, self.hooks, self.family, saved=self)

    @classmethod
    def base_classes(cls) -> tuple[type[Any], ...]:
        hooks = sys.modules.get("classy_vision.hooks")
        real = getattr(hooks, "ClassyHook", compat.ClassyHook)
        return (compat.ClassyHook,) if real is compat.ClassyHook else (real, compat.ClassyHook)

    @property
    def noops(self) -> tuple[Any, ...]:  # type: ignore[override]  # a property where the base adapter has a class attribute: Classy's no-ops depend on the installed hook class
        return tuple(base._noop for base in self.base_classes())

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """``{"name": ..., **kwargs}`` through Classy's registry (when installed), then the compat one."""
        return build_hook(config)

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

    @override
    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Also: a fit resumed with this adapter's state from a checkpoint written at a train phase's last batch (its
        ``on_phase_end`` ran, its test phase not yet) runs that test phase first, as Classy's and VISSL's trainers
        resume from a train phase's end (``lightning_api.run_pending_validation``); Lightning 2.6 would go on with the
        next train phase and never run it. Not beside another family's adapter, whose host (MMEngine's runner,
        mmcv's) resumes an epoch's end with the next epoch: Lightning's resume stands there."""
        super().on_load_checkpoint(trainer, pl_module, checkpoint)
        callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it
        others = any(isinstance(c, LegacyHookAdapter) and not isinstance(c, ClassyAdapter) for c in callbacks)
        if trainer.state.fn == "fit" and not self._resumed_without_state and not others:
            lightning_api.run_pending_validation(trainer, checkpoint)

    # ------------------------------------------------------------------------------------------- conditions
    def train_epoch_open(self) -> bool:
        """A train phase of the loop is open (the loop owns it: :meth:`ClassyLoop.start_phase` / ``end_phase``)."""
        return self.loop.train and self.loop.phase_open

    def _mark_train_epoch(self, open_: bool) -> None:
        """Nothing: the loop opens and closes its phases itself."""

    def in_train_loop(self) -> bool:
        return bool(self._trainer is not None and self._trainer.training)

    def standalone_validation(self) -> bool:
        return self._trainer is not None and self._trainer.state.fn == "validate"

    # ----------------------------------------------------------------------------------------- step triggers
    def run_step(self, method: str, step: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A step method: ``last_batch`` filled from the batch and the step's result, then ``on_loss_and_meter``."""
        sanity = method != "training_step" and self._trainer is not None and self._trainer.sanity_checking
        if sanity:  # Lightning's sanity check (validation steps only) fills nothing
            return step(*args, **kwargs)
        fetch_time = self._clock.start_step()
        self.task.last_batch = LastBatch(sample=args[0] if args else kwargs["batch"], step_data={"sample_fetch_time": fetch_time})
        self._in_step, self._forwarded = True, False
        try:
            result = step(*args, **kwargs)
        finally:
            self._in_step = False
        if self._clock.active is not None:  # perf stats this step: the clock's calls cost nothing without them
            self._clock.section("loss_compute", "forward.fired" if self._forwarded else "step")
        record_step(self.task, self._clock, result, self._module_name)
        self.dispatch.fire(STEPS[method])
        return result


    def trigger(self, trigger: Trigger, **context: Any) -> None:
        if trigger is FORWARD:  # the step's first forward of task.base_model: its output is the model output
            if not self._in_step or self._forwarded:
                return
            clock = self._clock if self._clock.active is not None else None  # None: no perf stats this step
            if context.get("before"):
                if clock is not None:
                    clock.mark("forward")
                return
            self._forwarded = True
            if clock is not None:
                clock.section("forward", "forward")
            last_batch = self.task.last_batch
            assert last_batch is not None, "the step method fills last_batch before its forward"
            last_batch.model_output = self.task.model_output(context["output"])
            self.dispatch.fire(trigger)
            if clock is not None:
                clock.mark("forward.fired")
            return
        if trigger is OPTIMIZER_STEP:
            if self._clock.active is not None:
                self._clock.section("optimizer_step", "optimizer")
            self.dispatch.fire(trigger)
            return
        self.dispatch.fire(trigger)  # the rows (on_step at every step): the dispatch's own fire, one call fewer

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        """With VISSL, ``ClassyOptimizer.step(where=task.where)``'s schedule update first (VISSL's param schedulers).
        Keep the options the step uses: ``options_view`` reports them until the next step, as Classy's does."""
        if optimizer in self._schedule.classy:
            self._schedule.before_step(optimizer, self.task.where)
        self.task.used_options[optimizer] = param_options(optimizer)

    def _at_phase_start(self, train: bool) -> None:
        """With VISSL, a train phase first gets VISSL's ``optimizer.on_epoch(where)`` (its epoch param schedulers, also
        when a resumed phase reopens), which the ``on_phase_start`` hooks see (the loop calls it before them)."""
        if train and self._schedule.classy and not self.task.test_only:
            self._schedule.at_phase_start(self.task.where)
            for optimizer in self._schedule.classy:
                self.task.used_options[optimizer] = param_options(optimizer)

    # ---------------------------------------------------------------------------------------- lightning events
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.task.trainer = trainer
        self._module_name = type(pl_module).__name__
        self.task.find_model(pl_module)  # before the patches: the forward trigger hooks task.base_model
        super().setup(trainer, pl_module, stage)
        if stage == "fit":  # Lightning restores a checkpoint's counters after setup
            self.loop.new_run()
            self.task.new_run()
        if self.vissl and self.task.has_loss() and not isinstance(self.task._loss, str):
            vissl_host.check_loss_device(self.task.loss, trainer.strategy.root_device)  # after RUNTIME set the device
        self.legacy_start.position = None

    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """Also, firing no row: the checkpoint IO's ``load_checkpoint``, which reads Classy's and VISSL's own
        checkpoints; the rank variables VISSL reads from ``os.environ``; with VISSL, the process group and Classy's
        device index VISSL's trainer sets up."""
        vissl = (vissl_host.RUNTIME,) if self.vissl else ()
        unused = {  # a patch that would fire nothing and feed nothing: left out (each costs every step)
            FORWARD: not self._watches_forward(),
            OPTIMIZER_STEP: not (self.vissl or self.dispatch.fires(OPTIMIZER_STEP)),  # VISSL: its optimizer timer
        }
        table = tuple(patch for patch in super().run_patches(stage) if not unused.get(patch, False))
        return (*table, LOAD_CHECKPOINT, vissl_host.RANK_VARIABLES, *vissl)

    def _watches_forward(self) -> bool:
        """Whether the run needs the model's forward hooks (:data:`FORWARD`): with VISSL (``model_output``, its
        forward timer), meters (updated with the step's output, else the model's), or a hook at a step's mount point
        (``on_forward`` among them) that is not one of Classy's :data:`OUTPUT_BLIND` ones (it may read the output)."""
        if self.vissl or self.task.meters:
            return True
        return any(
            not (type(hook).__module__.startswith("classy_vision.hooks.") and type(hook).__name__ in OUTPUT_BLIND)
            for hook in self.hooks
            if any(self.dispatch.active(hook, mount) for mount in _STEP_MOUNTS)
        )

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        if self._clock.active is not None:
            self._clock.mark("backward")

    @override
    def on_after_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        timed = self._clock.active is not None
        if timed:
            self._clock.section("backward", "backward")
        self.dispatch.fire(ON["on_after_backward"])
        if timed:
            self._clock.mark("optimizer")

    @classmethod
    def weight_swap_classes(cls) -> tuple[type[Any], ...]:
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

    def start_train(self, trainer: pl.Trainer) -> None:
        self.legacy_start.apply(trainer)
        _warn_if_no_final_test_phase(trainer)
        self._schedule.attach(trainer, vissl=self.vissl)
        super().start_train(trainer)  # on_start
        self.legacy_start.run_pending_test_phase(trainer)

    def prepare_train_iterator(self, trainer: pl.Trainer, mid_epoch: bool) -> None:
        """With VISSL, its ``recreate_data_iterator``: the train sampler's epoch is the index of the phase starting
        (``mid_epoch``: of the phase a mid-phase checkpoint was written in, reopened), test phases counted (Lightning's
        counts train epochs only), before the iterator is made. (Classy's ``advance_phase`` builds its loader at the
        train phase index, Lightning's epoch.)"""
        self._start_vissl_phase_sampler(trainer.train_dataloader, reopened=mid_epoch)

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        """Start a train phase, or reopen the one a mid-epoch checkpoint was in (``mid_epoch``).

        Hooks rebuild their per-phase state in ``on_phase_start``; on reopening, the weights Lightning restored win
        over what they put in the model there (Classy's EMA hook swaps in the weights saved at the previous phase end).
        """
        weights = {k: v.clone() for k, v in pl_module.state_dict().items()} if mid_epoch else None
        self.legacy_start.start_train_epoch(trainer)
        self.loop.start_epoch(mid_epoch)
        if weights is not None:
            with torch.no_grad():
                for key, value in pl_module.state_dict().items():
                    value.copy_(weights[key])

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """Also the end of the train phase a VISSL mid-phase checkpoint resumed, at its last batch: Lightning, which
        counts the batches its sampler skips, sees no last batch (:meth:`LegacyStart.ends_resumed_phase`)."""
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self.train_epoch_open() and self.legacy_start.ends_resumed_phase(trainer, batch_idx):
            self._end_train_epoch(trainer, LAST_TRAIN_BATCH)

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        self.legacy_start.end_train_epoch()
        self.loop.end_epoch(trigger)

    def prepare_eval_iterator(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """With VISSL, its ``recreate_data_iterator`` of a test phase: the test sampler's epoch is the phase's index,
        test phases counted (Lightning set a fit's count of train epochs), before the iterator is made."""
        self._start_vissl_phase_sampler(trainer.val_dataloaders if run.stage == "val" else trainer.test_dataloaders)

    def _start_vissl_phase_sampler(self, loader: Any, reopened: bool = False) -> None:
        """With VISSL, the sampler of the phase starting (or ``reopened``) gets the phase's index as its epoch, test
        phases counted."""
        if self.vissl:
            set_sampler_epoch(loader, self.loop.phase_idx + int(not reopened))

    def start_eval(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """An evaluation; a train phase still open ends first when Lightning validates because the fit stops early,
        before the test phase's iterator is made (:attr:`eval_iterator_at`)."""
        if run.stage == "val" and not run.sanity_check and self.train_epoch_open():
            if not trainer.should_stop:
                raise ValueError(
                    "ClassyAdapter: validation started in the middle of a train epoch (val_check_interval < 1.0 or "
                    "check_val_every_n_epoch with a step count). Classy runs a test phase only after a whole train "
                    "phase: use Trainer(val_check_interval=1.0)."
                )
            # should_stop (max_time, EarlyStopping, a callback) inside the epoch: Lightning validates before it stops.
            # The train phase ends here, cut short, so its on_phase_end hooks (CheckpointHook) see the steps trained.
            self._end_train_epoch(trainer, ON["on_train_epoch_end"])
        super().start_eval(trainer, run)


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

