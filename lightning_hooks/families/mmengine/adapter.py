"""``MMEngineAdapter``: MMEngine hooks, ordered by priority, driven by Lightning."""

from __future__ import annotations

import copy
import os
import sys
from typing import Any, ClassVar

from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.checks import check_argument, check_period, is_int
from lightning_hooks.core.host_loop import Evaluation
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.core.safety import plain
from lightning_hooks.core.triggers import ON, ModuleLoadCheckpoint, Patch, Trigger
from lightning_hooks.families.mmengine import ema, hook_checks, iter_based, trainer_checks
from lightning_hooks.families.mmengine.current import RUN_INSTANCES
from lightning_hooks.families.mmengine.events import EVENTS
from lightning_hooks.families.mmengine.host_loop import MMEngineLoop

# mmengine is not a dependency of lightning-hooks: the modules that import it (runner, loops, checkpoint, schedulers,
# config) are imported where an MMEngine hook or config is already in hand.


class MMEngineAdapter(LegacyHookAdapter):
    """Run ``mmengine.hooks.Hook`` instances inside ``lightning.Trainer``, as MMEngine's ``Runner`` runs them.

    Hooks are sorted by priority with MMEngine's stable priority queue and receive a :class:`Runner` facade, by
    keyword. Give ``param_schedulers`` (mmengine schedulers or their configs) to have ``ParamSchedulerHook`` step
    them; Lightning then must not schedule the same optimizer. Turn Lightning's own checkpointing off
    (``enable_checkpointing=False``) when ``CheckpointHook`` writes the checkpoints.

    ``train_cfg`` is MMEngine's loop config. ``dict(type="IterBasedTrainLoop", max_iters=..., val_interval=...)``
    (or ``by_epoch=False``) runs hooks as ``IterBasedTrainLoop`` does: one train epoch for the whole run,
    ``runner.epoch`` 0, ``batch_idx`` the global iteration, validation by iteration and at ``max_iters``, the train
    loader restarted when it runs out. Build the Trainer with :meth:`trainer_kwargs`.

    ``runner.model`` is the OpenMMLab model: the ``mmengine.model.BaseModel`` the LightningModule holds, or the
    submodule ``model`` names (``"model"``, ``"detector.model"``; ``""`` for the LightningModule itself). Checkpoints
    then hold its ``state_dict`` under the Runner's keys, so MMEngine and OpenMMLab's tools load them, and
    ``load_from`` (a file or URL of its weights) is loaded into it after ``before_run``, as the Runner does.

    Example::

        from mmengine.hooks import CheckpointHook, EMAHook
        adapter = MMEngineAdapter([EMAHook(), CheckpointHook(interval=1)], work_dir="work")
        Trainer(callbacks=[adapter], enable_checkpointing=False).fit(model, train_loader, val_loader)

        adapter = MMEngineAdapter([CheckpointHook(interval=1000, by_epoch=False)], work_dir="work",
                                  train_cfg=dict(type="IterBasedTrainLoop", max_iters=8000, val_interval=1000))
        Trainer(callbacks=[adapter], enable_checkpointing=False, **adapter.trainer_kwargs()).fit(...)
    """

    family = "mmengine"
    loop: MMEngineLoop
    events = EVENTS
    family_title, host_args, upstream = "MMEngine", ("runner",), ("mmengine.",)
    checkpoint_hooks = frozenset({"CheckpointHook"})
    #: ``ValLoop.run`` / ``TestLoop.run`` iterate the loader after ``before_val_epoch`` / ``before_test_epoch``
    eval_iterator_at = "after_epoch_start"
    delegates: ClassVar[dict[str, tuple[str, ...]]] = {
        **{f"{w}_{m}_epoch": (f"_{w}_epoch",) for w in ("before", "after") for m in ("train", "val", "test")},
        **{f"{w}_{m}_iter": (f"_{w}_iter",) for w in ("before", "after") for m in ("train", "val", "test")},
    }

    def __init__(
        self,
        hooks: Any,
        work_dir: str | os.PathLike | None = None,
        experiment_name: str | None = None,
        cfg: Any = None,
        seed: int | None = None,
        log_processor: Any = None,
        param_schedulers: Any = None,
        log_level: str = "INFO",
        train_cfg: dict | None = None,
        visualizer: Any = None,
        default_scope: str | None = None,
        model: str | None = None,
        load_from: str | os.PathLike | None = None,
    ) -> None:
        # the options, listed once (this signature): the runner reads its own by name
        options = {name: value for name, value in locals().items() if name not in ("self", "hooks", "__class__")}
        from mmengine.dist import get_world_size

        from lightning_hooks.families.mmengine import vis_backend  # noqa: F401  registers LightningLoggerVisBackend
        from lightning_hooks.families.mmengine.config import HookConfig
        from lightning_hooks.families.mmengine.runner import Runner

        #: the ``train_cfg`` loop settings; an ``IterLoopConfig`` runs ``IterBasedTrainLoop``'s semantics
        self.loop_cfg = iter_based.parse_train_cfg(train_cfg) if train_cfg is not None else None
        #: MMEngine's train loop run by Lightning's events: counters, stop rule, validation schedule, train rows
        self.loop = MMEngineLoop(self.hook_caller, self.loop_cfg)
        # as MMEngine's Runner: default scope and visualizer first, then the hooks (which may take the visualizer)
        runner = Runner(options, self.hook_caller, self.loop)
        if isinstance(hooks, HookConfig):
            hooks = hooks.build(default_scope)
        #: the processes ``mmengine.dist`` counted when the hooks were built (before Lightning's process group)
        self._hooks_world_size = get_world_size()
        super().__init__(hooks)
        self.runner = self.host = runner
        #: the checkpoint a ``from_config(resume=True)`` config resumes from: ``trainer.fit(..., ckpt_path=...)``
        self.ckpt_path: str | None = None
        #: ``resume=True`` without ``load_from``: the first fit logs the latest checkpoint it found (``ckpt_path``)
        self.auto_resume = False
        #: weights loaded into ``runner.model`` once, after ``before_run`` of the first run (``Runner.load_or_resume``)
        self._load_from = None if load_from is None else os.fspath(load_from)
        self._scheduler_states: list[dict] | None = None
        self.dispatch.build_plan((self.runner,))

    @classmethod
    def from_config(
        cls, default_hooks: dict | None = None, custom_hooks: list | None = None, **options: Any
    ) -> MMEngineAdapter:
        """An adapter for MMEngine's ``default_hooks`` / ``custom_hooks`` config (see :func:`build_hooks`), built after
        the adapter's default scope and visualizer exist, as MMEngine's ``Runner`` builds its hooks.

        ``options`` are adapter options or any other key of a whole MMEngine config, so an OpenMMLab config loads
        as it is: ``MMEngineAdapter.from_config(**Config.fromfile("configs/my_config.py"))`` (see :meth:`from_file`).
        ``param_scheduler``, ``train_cfg``, ``default_scope``, ``log_processor``, ``visualizer``, ``log_level`` and
        ``work_dir`` configure the adapter, and so does ``load_from`` without ``resume``; ``val_cfg`` / ``test_cfg`` are
        checked; ``resume=True`` sets :attr:`ckpt_path` (``load_from``, else the latest checkpoint in ``work_dir``) for
        ``trainer.fit(..., ckpt_path=adapter.ckpt_path)``. Keys the LightningModule, data or Trainer own (``model``, ``*_dataloader``,
        ``optim_wrapper``, ``env_cfg``, ...) and the config's own variables are ignored with a warning that lists them;
        a misspelled key raises a ``ValueError`` with a "did you mean".
        """
        from lightning_hooks.families.mmengine.config import adapter_from_config

        return adapter_from_config(cls, default_hooks, custom_hooks, options)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> MMEngineAdapter:
        """:meth:`from_config` of an MMEngine config file (``_base_`` inheritance and all), with keys overridden.

        ``runner.cfg`` is the loaded ``Config``; the adapter dumps it to ``work_dir`` under the file's name, as the
        Runner does. Example: ``MMEngineAdapter.from_file("configs/seg_20k.py", work_dir="work_dirs/seg")``.
        """
        from mmengine.config import Config

        config = Config.fromfile(os.fspath(path))
        config.merge_from_dict(overrides)
        return cls.from_config(**copy.deepcopy(config), cfg=config)  # building must not change runner.cfg

    def trainer_kwargs(self) -> dict[str, Any]:
        """The ``Trainer`` arguments that run ``train_cfg``'s loop (empty without ``train_cfg``).

        Iteration-based: ``max_steps=max_iters, max_epochs=1, val_check_interval=val_interval,
        check_val_every_n_epoch=None``; epoch-based: ``max_epochs``, ``check_val_every_n_epoch=val_interval``.
        """
        return self.loop_cfg.trainer_kwargs() if self.loop_cfg is not None else {}

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """One ``dict(type=..., priority=..., **kwargs)`` through MMEngine's ``HOOKS`` registry, as in ``custom_hooks``."""
        from mmengine.registry import HOOKS

        from lightning_hooks.families.mmengine.config import check_type, priority_of

        config = dict(config)
        priority = config.pop("priority", None)
        check_type(config, HOOKS)
        hook = HOOKS.build(config)
        if priority is not None:
            priority_of(priority, config["type"].__name__)
            hook.priority = priority
        return hook

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        hooks = sys.modules.get("mmengine.hooks")
        if hooks is None:  # an mmengine hook instance implies mmengine.hooks was imported
            return ()
        return (hooks.Hook,)

    def order(self, hooks: list[Any]) -> list[Any]:
        """MMEngine's ``register_hook`` queue: ascending priority, registration order among equals."""
        from lightning_hooks.families.mmengine.config import priority_of

        return sorted(hooks, key=lambda h: priority_of(h.priority, type(h).__qualname__))

    def check_arguments(self, hook: Any) -> None:
        """``interval`` (CheckpointHook, LoggerHook, ...) must be an int and ``by_epoch`` a bool; an ``interval``
        <= 0, MMEngine's "never" (``CheckpointHook``'s default -1), warns: the hook's periodic work never runs."""
        check_argument(type(self).__name__, hook, "interval", is_int, "an int, e.g. interval=1")
        check_argument(type(self).__name__, hook, "by_epoch", lambda v: isinstance(v, bool), "a bool")
        mount = "after_train_epoch" if getattr(hook, "by_epoch", False) is True else "after_train_iter"
        check_period(type(self).__name__, hook, "interval", mount, never_ok=True)

    # ------------------------------------------------------------------------------------------ conditions
    def writes_checkpoint(self) -> bool:
        trainer = self._trainer
        assert trainer is not None, "conditions are read once setup() has run"
        return trainer.is_global_zero

    @property
    def ends_train_epoch_at_last_batch(self) -> bool:
        """``IterBasedTrainLoop`` runs one train epoch for the whole run: it never ends at a loader's last batch."""
        return self.loop.by_epoch

    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """Also, firing no row: in a fit, the step count of the optimizer view schedulers are built on and the endless
        train loader of an ``IterBasedTrainLoop``; in every run, the runner's default scope and its MMEngine instances
        as the current ones (:data:`~lightning_hooks.families.mmengine.current.RUN_INSTANCES`)."""
        from lightning_hooks.families.mmengine import schedulers

        if stage != "fit":
            return (*super().run_patches(stage), RUN_INSTANCES)
        endless = () if self.runner.by_epoch else (iter_based.ENDLESS_TRAIN_DATA,)
        return (*super().run_patches(stage), *endless, schedulers.COUNT_WRAPPER_STEPS, RUN_INSTANCES)

    # ---------------------------------------------------------------------------------------- run lifecycle
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self.loop.start_run(trainer, stage)  # a resumed fit restores the count after setup (load_host_state)
        if stage == "fit" and self.loop_cfg is not None:
            trainer_checks.check_trainer(trainer, self.loop_cfg)
        self.runner.attach(trainer)  # in the runner's default scope, its MessageHub and Visualizer current (RUN_INSTANCES)
        from lightning_hooks.families.mmengine.vis_backend import attach_trainer

        attach_trainer(self.runner.visualizer, trainer)  # LightningLoggerVisBackend writes to trainer.loggers
        hook_checks.refuse_model_type_checks(self.hooks, self.runner._model or pl_module)
        self._hooks_world_size = hook_checks.init_dist_flags(self.hooks, self._hooks_world_size)
        self.fire(ON["setup"])
        if self.auto_resume and stage == "fit":  # Runner.load_or_resume's line, after before_run
            self.runner.logger.info(f"Auto resumed from the latest checkpoint {self.ckpt_path}.")
            self.auto_resume = False
        if self._load_from is not None:
            self.runner.load_checkpoint(self._load_from)
            self._load_from = None

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        try:
            self.fire(ON["teardown"])
        finally:
            # under fast_dev_run its log file is in the temporary work dir the base class removes
            if trainer.fast_dev_run:  # type: ignore[attr-defined]  # Lightning's connectors set it; Trainer does not declare it
                self.runner.close_log_file()
            super().teardown(trainer, pl_module, stage)

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        """Forward the failure to hooks, then close the run's log file (Lightning calls no teardown after a failure)."""
        try:
            super().on_exception(trainer, pl_module, exception)
        finally:
            self.runner.close_log_file()

    def _follow_restored_loop(self, trainer: pl.Trainer) -> None:
        """A fit resumed from a checkpoint without this adapter's state (a plain Lightning checkpoint): ``runner.iter``
        counts the train batches Lightning's restored loop has run, so by-iteration hooks (``CheckpointHook``,
        ``LoggerHook``) keep MMEngine's schedule; the hooks' own state and the message hub start fresh (warned)."""
        batches = lightning_api.train_batches_fetched(trainer)
        self.loop.load_state_dict({"iter": batches})
        self.loop.follow_lightning_epoch(trainer.current_epoch)
        epoch = self.loop.epoch
        rank_zero_warn(
            f"MMEngineAdapter ({', '.join(self.hook_keys())}): the checkpoint this fit resumes from holds no "
            f"MMEngineAdapter state (it was written without it): runner.iter {batches} and runner.epoch "
            f"{epoch} follow Lightning's restored loop (global step {trainer.global_step}), while the "
            "hooks' own state and the runner's message hub start fresh. Resume from a checkpoint written with the "
            "adapter to restore them."
        )

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        if type(trigger) is not ModuleLoadCheckpoint:  # every step's path: no dataclass __eq__, no hop through fire
            self.dispatch.fire(trigger, **context)
            return
        from lightning_hooks.families.mmengine.checkpoint import to_lightning_keys

        trainer = self._trainer
        assert trainer is not None, "Lightning loads checkpoints once setup() has run"
        self.runner._resume = trainer.state.fn == "fit"  # a checkpoint loaded by fit() is a resume
        if self.runner._resume:  # into runner.optim_wrapper once Lightning restored its optimizers (on_train_start)
            self.runner._resumed_optimizer = context["checkpoint"].get("optimizer")
        self.fire(trigger, **context)  # hooks see MMEngine's layout; Lightning then loads the LightningModule's keys
        if self.runner._resume:
            self.runner.logger.info(f"Load checkpoint from {trainer.ckpt_path}")  # as Runner.load_checkpoint
            if self.loop.resumed(context["checkpoint"], self.runner.logger):
                self.resume_made_exact()  # an epoch-based train_cfg: the epoch again from its first batch, as the Runner
        to_lightning_keys(context["checkpoint"])

    # ------------------------------------------------------------------------------------------------ train
    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        from lightning_hooks.families.mmengine import schedulers

        self.runner.build_param_schedulers()
        schedulers.start_fit(trainer, schedulers.stateful(self.runner.param_schedulers), self._scheduler_states)
        self._scheduler_states = None

    def start_train(self, trainer: pl.Trainer) -> None:
        # the facade may have sized the train loader before Lightning restored its mid-epoch position: apply it now
        lightning_api.load_combined_loader_states(trainer)
        self.runner.restore_optim_wrappers()
        if self._resumed_without_state:
            self._follow_restored_loop(trainer)
        if self.runner.by_epoch:
            trainer_checks.warn_loop_differences(trainer, self.runner.max_iters)
        super().start_train(trainer)

    @property
    def train_iterator_at(self) -> str | None:  # type: ignore[override]  # a property where the base adapter has a class attribute: the loop's type decides
        """``EpochBasedTrainLoop.run_epoch`` iterates the loader after ``before_train_epoch``; ``IterBasedTrainLoop``
        makes its one iterator when the Runner builds the loop, before ``before_run``: Lightning's data setup, before
        ``on_train_start``, stands for it (None)."""
        return "after_epoch_start" if self.loop.by_epoch else None

    @property
    def empty_train_opens_epoch(self) -> bool:  # type: ignore[override]  # a property where the base adapter has a class attribute: the loop's type decides
        """``IterBasedTrainLoop.run`` opens and closes its one epoch with no iteration left to run."""
        return not self.loop.by_epoch

    # -------------------------------------------------------------------------------------- validation, test
    def start_eval_epoch(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """Refuse hooks that wrap the evaluation loader's sampler (MMEngine builds it; Lightning does here) first."""
        hook_checks.refuse_wrapped_samplers(self.hooks, getattr(self.runner, f"{run.stage}_dataloader"), run.stage)
        super().start_eval_epoch(trainer, run)

    @classmethod
    def weight_swap_classes(cls) -> tuple[type, ...]:
        from mmengine.hooks import EMAHook

        return (EMAHook,)

    def restore_live_weights(self) -> None:
        """Swap back every ``EMAHook`` that swapped the EMA in and did not swap back (see :func:`ema.swap_back`)."""
        if self.loop.weights_swapped:
            self.loop.weights_swapped = False
            ema.swap_back(self.hooks, self.dispatch.failed_at)

    # ------------------------------------------------------------------------------------------- checkpoints
    @override
    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Give hooks MMEngine's checkpoint layout on Lightning's own dict, so what they write reaches the file. The
        message hub and scheduler states are the objects this adapter's own state holds: the file stores them once."""
        if self.writes_checkpoint():
            saved = checkpoint.get("callbacks", {}).get(self.state_key, {}).get("host")
            self.fire(ON["on_save_checkpoint"], checkpoint=self.runner.mmengine_checkpoint(checkpoint, saved))

    def host_state(self) -> dict[str, Any]:
        from lightning_hooks.families.mmengine.checkpoint import hub_state
        from lightning_hooks.families.mmengine.schedulers import stateful

        return {
            **self.loop.state_dict(),
            "message_hub": hub_state(self.runner.message_hub),
            "param_schedulers": [plain(s.state_dict()) for s in stateful(self.runner.param_schedulers)],
        }

    def load_host_state(self, state: dict[str, Any]) -> None:
        from lightning_hooks.families.mmengine.checkpoint import load_hub_state

        self.loop.load_state_dict({"iter": state.get("iter", 0)})  # a checkpoint without it: from the start
        if "message_hub" in state:
            load_hub_state(self.runner.message_hub, state["message_hub"])
        self._scheduler_states = state.get("param_schedulers") or None

    def removed_hooks_note(self, removed: list[str]) -> str:
        return ema.removed_note(removed)
