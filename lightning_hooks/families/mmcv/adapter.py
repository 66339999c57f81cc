"""``MMCVAdapter``: OpenMMLab 1.x hooks (``mmcv.runner``), ordered by priority, driven by Lightning."""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter import warn_if_last_epoch_unvalidated
from lightning_hooks.core.checks import check_argument, is_int
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.family import adapter_options
from lightning_hooks.core.host_loop import Evaluation
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.loaders import epoch_sampler
from lightning_hooks.core.manual_step import ManualStepAdapter
from lightning_hooks.core.triggers import ON, ModuleLoadCheckpoint, Patch, Remove, Trigger
from lightning_hooks.families.mmcv.events import EVENTS
from lightning_hooks.families.mmcv.loop import MMCVLoop, run_limits, start_pass

# mmcv 1.x is not a dependency of lightning-hooks (and mmcv 2.x has no mmcv.runner): its modules are imported where
# an mmcv hook or config is already in hand.

_STAGES = ("train", "val")
_LOAD_CHECKPOINT = ModuleLoadCheckpoint()
_UNSET = object()  # a hook that had no priority of its own


@dataclass(frozen=True)
class HookPriorities(Patch):
    """Each hook's ``priority``, for the run, as the number mmcv's ``register_hook`` stores on it (``NORMAL`` for a
    hook without one); removing it gives each hook its own value back, or none."""

    environment = True

    def __str__(self) -> str:
        return "mmcv hooks' priority"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        from mmcv.runner import get_priority

        saved = [(hook, vars(hook).get("priority", _UNSET)) for hook in adapter.hooks]
        for hook in adapter.hooks:
            hook.priority = get_priority(getattr(hook, "priority", "NORMAL"))

        def remove() -> None:
            for hook, priority in saved:
                if priority is _UNSET:
                    vars(hook).pop("priority", None)
                else:
                    hook.priority = priority

        return remove


_PRIORITIES = HookPriorities()


class MMCVAdapter(ManualStepAdapter):
    """Run ``mmcv.runner.Hook`` hooks (mmcv 1.x: mmdet 2.x, mmcls 0.x, mmseg 0.x, ...) inside ``lightning.Trainer``.

    Hooks are ordered by priority as mmcv's ``register_hook`` does (a hook's ``priority`` attribute, ``NORMAL`` when
    it has none) and receive a :class:`~lightning_hooks.families.mmcv.runner.Runner` facade. ``runner`` picks the
    runner replayed: ``"EpochBasedRunner"`` (default) or ``"IterBasedRunner"`` (one run-long epoch for the hooks:
    ``before_epoch`` / ``after_epoch`` once, no train epoch mount points), or mmcv's config dict
    ``dict(type=..., max_epochs=... | max_iters=...)``; build the Trainer with :meth:`trainer_kwargs`.

    The LightningModule's ``training_step`` plays mmcv's ``model.train_step``: it returns mmcv's output dict
    (``loss``, ``log_vars``, ``num_samples``: ``log_vars`` go to ``runner.log_buffer``) or the loss tensor. If a hook
    owns the step (``OptimizerHook``, ``Fp16OptimizerHook``, ``GradientCumulative*OptimizerHook``), Lightning doesn't:
    the adapter switches the module to manual optimisation, and the hook's backward, clipping and ``step()`` of
    Lightning's optimizer wrapper run in ``after_train_iter``, so ``trainer.global_step`` counts its steps. The module
    stays in manual optimisation after the fit; the next fit with an MMCVAdapter that has no such hook switches it back.

    Example::

        from mmcv.runner import CheckpointHook, OptimizerHook, StepLrUpdaterHook
        adapter = MMCVAdapter([StepLrUpdaterHook(step=[8, 11]), OptimizerHook(grad_clip=dict(max_norm=35)),
                               CheckpointHook(interval=1)], work_dir="work_dirs/demo")
        Trainer(callbacks=[adapter], enable_checkpointing=False, **adapter.trainer_kwargs()).fit(model, loader)

        adapter = MMCVAdapter.from_config(lr_config=dict(policy="step", step=[8, 11]),
                                          optimizer_config=dict(grad_clip=None),
                                          checkpoint_config=dict(interval=1),
                                          log_config=dict(interval=50, hooks=[dict(type="TextLoggerHook")]),
                                          runner=dict(type="EpochBasedRunner", max_epochs=12))
    """

    family = "mmcv"
    instance_mounts = True  # ClosureHook(fn_name, fn) sets hook.<fn_name> = fn
    events = EVENTS
    loop: MMCVLoop
    family_title, host_args, upstream = "mmcv", ("runner",), ("mmcv.", "mmdet.", "mmcls.", "mmseg.")
    checkpoint_hooks = frozenset({"CheckpointHook"})
    #: ``EpochBasedRunner.train`` iterates the loader after ``before_train_epoch``; ``IterBasedRunner.run`` makes its
    #: ``IterLoader`` after ``before_run`` (on_fit_start here) and before ``before_epoch`` (on_train_start here):
    #: the loop makes it there (:meth:`_make_train_iterator`), before the epoch's start
    train_iterator_at = "after_epoch_start"
    delegates: ClassVar[dict[str, tuple[str, ...]]] = {
        **{f"{w}_{stage}_epoch": (f"{w}_epoch",) for w in ("before", "after") for stage in _STAGES},
        **{f"{w}_{stage}_iter": (f"{w}_iter",) for w in ("before", "after") for stage in _STAGES},
    }

    def __init__(
        self,
        hooks: Any,
        runner: str | Mapping[str, Any] = "EpochBasedRunner",
        work_dir: str | os.PathLike | None = None,
        meta: dict[str, Any] | None = None,
        logger: logging.Logger | None = None,
        model: str | None = None,
    ) -> None:
        from lightning_hooks.families.mmcv.runner import RUNNERS, Runner

        runner_cfg: dict[str, Any] = dict(runner) if isinstance(runner, Mapping) else {"type": runner}
        runner_type = runner_cfg.pop("type", "EpochBasedRunner")
        if runner_type not in RUNNERS:
            unknown = unknown_name("runner type", str(runner_type), RUNNERS, listed="Accepted")
            raise ValueError(f"MMCVAdapter(runner={runner!r}): {unknown}")
        for key in runner_cfg:
            if key not in ("max_epochs", "max_iters"):
                unknown = unknown_name("runner option", key, ["type", "max_epochs", "max_iters"], listed="Accepted")
                raise ValueError(f"MMCVAdapter(runner={runner!r}): {unknown}")
        self._runner_cfg = runner_cfg
        super().__init__(hooks)
        real = _runner_module()
        self.steppers = [h for h in self.hooks if isinstance(h, real.OptimizerHook)]
        #: mmcv's runner loop: counters, lengths, mode; fires the train and val rows (the runner facade reads it)
        self.loop = MMCVLoop(  # fires through the dispatch itself, as Classy's and iMIX's loops: no call in between
            self.dispatch, runner_type == "IterBasedRunner", hooks_step=bool(self.steppers),
            take_outputs=self._take_outputs, make_train_iterator=self._make_train_iterator,
        )  # fmt: skip  # the keywords a few to a line
        self.runner = self.host = Runner(self.hooks, self.hook_caller, self.loop, runner_type, work_dir, meta, logger,
                                         model)  # fmt: skip  # Runner's arguments, continued
        self.dispatch.build_plan((self.runner,))
        self._resumed_at: tuple[int, int] | None = None

    def start_after(self, epoch: int, iteration: int) -> None:
        """Let the next fit go on from an mmcv checkpoint's ``meta['epoch']`` / ``meta['iter']``, as after mmcv's
        ``runner.resume``: the runner's counters start there, and so do Lightning's global step and (``EpochBasedRunner``)
        epoch; ``IterBasedRunner``'s train loader starts a new pass (its ``IterLoader`` does: ``runner.epoch`` follows it
        from the first iteration). Weights, optimizer and ``meta`` are loaded by the caller, as ``runner.resume`` does.

        Example::

            adapter.start_after(checkpoint["meta"]["epoch"], checkpoint["meta"]["iter"])
        """
        self._resumed_at = (epoch, iteration)

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        real = sys.modules.get("mmcv.runner")  # an mmcv hook instance implies mmcv.runner was imported
        return (real.Hook,) if real is not None and hasattr(real, "Hook") else ()

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """One ``dict(type=..., priority=..., **kwargs)`` through mmcv's ``HOOKS`` registry, as in ``custom_hooks``."""
        from mmcv.runner import HOOKS

        from lightning_hooks.families.mmcv.config import build_hook

        return build_hook(config, HOOKS)

    @classmethod
    def from_config(cls, lr_config: Any = None, optimizer_config: Any = None, checkpoint_config: Any = None,
                    log_config: Any = None, momentum_config: Any = None, custom_hooks: Any = None,
                    **options: Any) -> MMCVAdapter:  # fmt: skip  # parameters aligned under the signature
        """The hooks mmcv's ``runner.register_training_hooks`` registers for these configs (plus ``custom_hooks``,
        ``timer_config`` and ``profiler_config`` where mmdet/mmcls/mmseg's train scripts pass them), in its order and
        with its priorities; ``IterBasedRunner`` defaults ``by_epoch=False`` as that runner does. ``options`` are
        adapter options (``runner`` as mmcv's ``runner = dict(type=..., max_epochs=...)``, ``work_dir``, ...) or other
        keys of a whole mmcv config, which are ignored: ``MMCVAdapter.from_config(**mmcv.Config.fromfile(path))``.
        """
        from lightning_hooks.families.mmcv.config import register_training_hooks, split_options

        options, hook_options = split_options(options, adapter_options(cls))
        runner = options.get("runner", "EpochBasedRunner")
        runner_type = runner.get("type", "EpochBasedRunner") if isinstance(runner, Mapping) else runner
        hooks = register_training_hooks(
            runner_type, lr_config=lr_config, optimizer_config=optimizer_config,
            checkpoint_config=checkpoint_config, log_config=log_config, momentum_config=momentum_config,
            custom_hooks=custom_hooks, **hook_options,
        )  # fmt: skip  # the keywords grouped by what they hand over, a few to a line
        return cls(hooks, **options)

    @classmethod
    def from_file(cls, path: str | os.PathLike, **overrides: Any) -> MMCVAdapter:
        """:meth:`from_config` of an mmcv 1.x config file (``mmcv.Config.fromfile``, ``_base_`` and all).

        ``overrides`` with a dot (``**{"lr_config.step": [8, 11]}``) are merged into the config as mmcv's
        ``--cfg-options`` are; the others replace a top-level key as given (hook objects stay the same objects):
        ``MMCVAdapter.from_file("configs/faster_rcnn.py", work_dir="work_dirs/frcnn", custom_hooks=[MyHook()])``."""
        from mmcv import Config

        config = Config.fromfile(os.fspath(path))
        config.merge_from_dict({k: v for k, v in overrides.items() if "." in k})
        options = config._cfg_dict.to_dict()
        options.update({k: v for k, v in overrides.items() if "." not in k})
        return cls.from_config(**options)

    def trainer_kwargs(self) -> dict[str, Any]:
        """The ``Trainer`` arguments for ``runner``'s ``max_epochs`` / ``max_iters``: ``max_epochs`` for
        ``EpochBasedRunner``; ``max_steps`` (optimizer steps: ``max_iters`` over a ``GradientCumulativeOptimizerHook``'s
        ``cumulative_iters``) and ``max_epochs=-1`` for ``IterBasedRunner``."""
        cfg = self._runner_cfg
        if self.runner._runner_type == "IterBasedRunner":
            if "max_iters" not in cfg:
                return {}
            return {"max_steps": math.ceil(cfg["max_iters"] / self.runner._iters_per_step()), "max_epochs": -1}
        return {"max_epochs": cfg["max_epochs"]} if "max_epochs" in cfg else {}

    def order(self, hooks: list[Any]) -> list[Any]:
        """mmcv's ``register_hook`` queue: ascending priority (``NORMAL`` for a hook without one), registration order
        among equals. The hooks are left as given; during a run each has the number ``register_hook`` stores
        (:class:`HookPriorities`)."""
        from mmcv.runner import get_priority

        return sorted(hooks, key=lambda h: get_priority(getattr(h, "priority", "NORMAL")))

    def check_arguments(self, hook: Any) -> None:
        """``interval`` (CheckpointHook, LoggerHook, EvalHook, ...) must be an int and ``by_epoch`` a bool."""
        check_argument(type(self).__name__, hook, "interval", is_int, "an int, e.g. interval=1")
        check_argument(type(self).__name__, hook, "by_epoch", lambda v: isinstance(v, bool), "a bool")

    # ------------------------------------------------------------------------------------------ conditions
    def iter_based(self) -> bool:
        return self.loop.iter_based

    def epoch_based(self) -> bool:
        return not self.iter_based()

    def epoch_cut_short(self) -> bool:
        """``on_train_epoch_end`` ends only an epoch still open (one cut short); ``IterBasedRunner`` has none."""
        return self.epoch_based() and self.train_epoch_open()

    def epoch_validation(self) -> bool:
        return self.epoch_based() and self.real_validation()

    @property
    def ends_train_epoch_at_last_batch(self) -> bool:
        """``IterBasedRunner`` has no train epochs: nothing ends at a loader's last batch."""
        return self.epoch_based()

    # ------------------------------------------------------------------------------------------ lightning glue
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        others = [c for c in trainer.callbacks if isinstance(c, MMCVAdapter) and c is not self]  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        if others:
            raise ValueError(
                f"MMCVAdapter ({', '.join(self.hook_keys())}): this Trainer has another MMCVAdapter, but mmcv runs one "
                "runner per fit (one log buffer, one hook queue). Put all mmcv hooks in one MMCVAdapter, or pass them "
                "together to adapt()."
            )
        self.runner._attach(trainer)
        if stage != "fit":
            return
        # a new run, or one going on from an mmcv checkpoint (start_after); a resumed fit restores the counters
        # after setup (load_host_state)
        self.loop.start_run(*(self._resumed_at or (0, 0)))
        self.runner.outputs = {}
        self._held_back: dict[str, torch.Tensor] = {}
        self._sampler_epoch: int | None = None
        self._check_trainer(trainer)

    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """Also the hooks' priorities as ``register_hook`` sets them (:class:`HookPriorities`), and in a fit the
        module's ``on_load_checkpoint`` (not a table row: mmcv has no mount point there), to set aside the weights of
        buffers that hooks register on the model in ``before_run`` (EMAHook's ``ema_*``), which a resumed checkpoint
        holds before they exist."""
        return (*super().run_patches(stage), _PRIORITIES, *((_LOAD_CHECKPOINT,) if stage == "fit" else ()))

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.epoch_based():
            warn_if_last_epoch_unvalidated(trainer, "MMCVAdapter", "while mmcv's workflow [('train', 1), ('val', 1)] "
                                           "also validates after the last epoch")  # fmt: skip  # the message continues under its first half
        # mmcv's runners know max_iters before before_run (CyclicLrUpdaterHook reads it there): size the loader now
        lightning_api.setup_train_data(trainer)
        self._set_limits(trainer)
        self._sampler_epoch = getattr(epoch_sampler(trainer.train_dataloader), "epoch", None)
        if self._resumed_at is not None:
            epoch, iteration = self._resumed_at
            lightning_api.start_fit_after(trainer, 0 if self.iter_based() else epoch, iteration)
            self._resumed_at = None
        self.fire(ON["on_fit_start"])
        self._restore_held_back(pl_module)

    def start_train(self, trainer: pl.Trainer) -> None:
        # the loader was built at on_fit_start, before Lightning restored its mid-epoch position: apply it now
        lightning_api.load_combined_loader_states(trainer)
        super().start_train(trainer)

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        # mmcv's runner.train() puts the model in train mode first: an EvalHook's test left it in eval mode
        self.runner.model.train()
        self._set_limits(trainer)  # the loader may have been reloaded
        self.loop.start_mode("train", trainer.train_dataloader, _batches(trainer.num_training_batches))
        self._hand_back_sampler_epoch(trainer)
        self.loop.start_epoch(mid_epoch)

    def start_train_batch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        if self.loop.mode != "train":
            self.loop.start_mode("train", trainer.train_dataloader, _batches(trainer.num_training_batches))
        if self.loop.iter_based:
            self.runner.model.train()  # IterBasedRunner.train() does, each iteration
        super().start_train_batch(trainer, pl_module, batch, batch_idx)

    def run_step(self, method: str, step: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One mmcv iteration inside ``training_step``: [before_train_iter], the step, ``runner.outputs`` and the log
        buffer update of mmcv's ``run_iter``; ``after_train_iter`` follows from the strategy or the batch end."""
        self.loop.before_step()
        result = step(*args, **kwargs)
        self._take_outputs(result, "training_step")
        return result

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        """``after_train_iter`` once the strategy returned from the step, when a hook owns backward and step; before
        Lightning loads a resumed checkpoint's weights, hold back those of buffers the hooks have not registered yet."""
        if type(trigger) is ModuleLoadCheckpoint:  # every step's path: no dataclass __eq__ (as MMEngine's trigger)
            self._hold_back(context["checkpoint"])
        else:
            super().trigger(trigger, **context)

    def step_loss(self) -> torch.Tensor:
        return self.runner.outputs["loss"]

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        self.loop.end_epoch(trigger)
        self._sampler_epoch = getattr(epoch_sampler(trainer.train_dataloader), "epoch", None)

    def _set_limits(self, trainer: pl.Trainer) -> None:
        self.loop.set_limits(*run_limits(trainer, self.loop.iter_based, self.runner._iters_per_step()))

    def _release_work_dir(self) -> None:
        """Also close the log file :func:`~lightning_hooks.families.mmcv.logging.configure_logging` opened in a
        ``fast_dev_run``'s temporary work dir before the folder goes."""
        from lightning_hooks.families.mmcv.logging import close_log_files

        temporary = self.runner._work_dir.temporary
        if temporary is not None:
            close_log_files(temporary)
        super()._release_work_dir()

    # ------------------------------------------------------------------------------------------ validation
    def start_eval_epoch(self, trainer: pl.Trainer, run: Evaluation) -> None:
        """mmcv's ``val`` workflow starts: ``mode="val"`` and the val loader (not for Lightning's sanity check)."""
        if run.stage == "val" and not run.sanity_check:
            loaders = trainer.val_dataloaders
            loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
            self.loop.start_mode("val", loader, _batches(sum(trainer.num_val_batches)))
        super().start_eval_epoch(trainer, run)

    # ------------------------------------------------------------------------------------------ checkpoint state
    def host_state(self) -> dict[str, Any]:
        return {**self.loop.state_dict(), "meta": self.runner.meta}

    def load_host_state(self, state: dict[str, Any]) -> None:
        self.loop.load_state_dict({"epoch": state.get("epoch", 0), "iter": state.get("iter", 0)})
        if state.get("meta") is not None:
            self.runner.meta = state["meta"]

    @override
    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Also: a fit resumed with this adapter's state goes on as mmcv's ``runner.resume`` (:meth:`MMCVLoop.resumed`),
        without Lightning's caution on a mid-epoch resume where it does so (IterBasedRunner)."""
        super().on_load_checkpoint(trainer, pl_module, checkpoint)
        if trainer.state.fn == "fit" and not self._resumed_without_state and self.loop.resumed(checkpoint):
            self.resume_made_exact()

    def upgrade_host_state(
        self, state: dict[str, Any], written: int, checkpoint: Mapping[str, Any] | None, source: str
    ) -> dict[str, Any]:
        """Format 1's counters in this format (:meth:`MMCVLoop.upgrade_state`)."""
        return self.loop.upgrade_state(state)

    # ---------------------------------------------------------------------------------------------- helpers
    def _hand_back_sampler_epoch(self, trainer: pl.Trainer) -> None:
        """Under mmcv's runner only ``DistSamplerSeedHook`` (in ``before_epoch``) and IterBasedRunner's
        ``IterLoader`` (from its second pass on) set the train sampler's epoch; Lightning sets it before each epoch
        starts. With that hook, the sampler gets back the epoch it had, so the hooks before that one see it as under
        mmcv; that one sets Lightning's value again before a batch is drawn. IterBasedRunner's first pass (unless
        Lightning's resume numbers the passes) draws from the sampler as the fit found it, as a new ``IterLoader``
        does: a loader of an earlier fit keeps that fit's last epoch."""
        sampler = epoch_sampler(trainer.train_dataloader)
        seeder = _runner_module().DistSamplerSeedHook
        first_pass = self.loop.iter_based and self.loop.passes == 0 and not self._resumed_without_state
        if sampler is not None and self._sampler_epoch is not None and (
            first_pass or any(isinstance(h, seeder) for h in self.hooks)
        ):
            sampler.set_epoch(self._sampler_epoch)

    def _make_train_iterator(self, pass_number: int) -> None:
        """IterBasedRunner's ``IterLoader``: the fit's first train iterator, which :attr:`train_iterator_at` held back
        from Lightning's data setup, made now (its workers take their first indices from the sampler then), from the
        sampler as the fit found it (a new ``IterLoader`` sets no epoch for its first pass); a fit resumed from a
        Lightning checkpoint without this adapter's state first gives the sampler Lightning's epoch, which numbers
        the passes there and which Lightning gives the sampler only after this."""
        assert self._trainer is not None, "training starts with the adapter set up"
        if self._resumed_without_state:
            start_pass(self._trainer.train_dataloader, pass_number)
        lightning_api.make_pending_train_iterator(self._trainer)

    def _hold_back(self, checkpoint: dict[str, Any]) -> None:
        """Take the checkpoint's weights that the LightningModule has no entry for out of its ``state_dict``."""
        state = checkpoint.get("state_dict", {})
        assert self._trainer is not None, "Lightning saves and loads checkpoints with the adapter set up"
        known = self._trainer.lightning_module.state_dict().keys()
        self._held_back = {key: state.pop(key) for key in [k for k in state if k not in known]}

    def _restore_held_back(self, pl_module: pl.LightningModule) -> None:
        """Load the held-back weights once ``before_run`` registered their buffers; any left over is an error."""
        held, self._held_back = self._held_back, {}
        if not held:
            return
        missing = sorted(held.keys() - pl_module.state_dict().keys())
        if missing:
            raise RuntimeError(
                f"MMCVAdapter: the checkpoint holds weights {missing} that neither the LightningModule nor the mmcv "
                f"hooks' before_run ({', '.join(self.hook_keys())}) define. Resume with the module and hooks the "
                "checkpoint was written with."
            )
        pl_module.load_state_dict(held, strict=False)

    def _take_outputs(self, result: Any, step: str) -> None:
        """mmcv's ``run_iter``: the step's dict becomes ``runner.outputs``; its ``log_vars`` go to the log buffer."""
        if isinstance(result, torch.Tensor):
            result = {"loss": result}
        if not isinstance(result, Mapping):
            raise TypeError(
                f"MMCVAdapter: {step} must return mmcv's output dict (loss, log_vars, num_samples) or the loss tensor "
                f"(Lightning event 'LightningModule.{step}'); got {type(result).__name__}."
            )
        if "log_vars" in result:
            self.runner.log_buffer.update(result["log_vars"], result.get("num_samples", 1))
        self.runner.outputs = result if type(result) is dict else dict(result)  # run_iter keeps the step's dict itself

    def _check_trainer(self, trainer: pl.Trainer) -> None:
        # Trainer(fast_dev_run=n) runs n batches of one epoch whatever the runner's length
        expected = {} if trainer.fast_dev_run else self.trainer_kwargs()  # type: ignore[attr-defined]  # Lightning's connectors set it; Trainer does not declare it
        wrong = {k: getattr(trainer, k) for k, v in expected.items() if getattr(trainer, k) != v}
        if wrong:
            raise ValueError(
                f"MMCVAdapter(runner={dict(type=self.runner._runner_type, **self._runner_cfg)}) runs with "
                f"Trainer({_kwargs(expected)}), but this Trainer has {_kwargs(wrong)}. "
                "Build it with Trainer(**adapter.trainer_kwargs(), ...)."
            )
        self.check_step_owner(
            trainer, "Use mmcv's GradientCumulativeOptimizerHook"
            f"(cumulative_iters={trainer.accumulate_grad_batches}) instead.",
        )
        if not self.steppers:
            return
        owner = type(self.steppers[0]).__name__
        if trainer.precision != "32-true":
            raise ValueError(
                f"MMCVAdapter: {owner} calls backward itself, so Lightning must run at precision='32-true', not "
                f"{trainer.precision!r}; use mmcv's Fp16OptimizerHook (optimizer_config=dict(type="
                "'Fp16OptimizerHook', loss_scale=...) or fp16=dict(loss_scale=...)) for mixed precision."
            )


def _batches(count: float) -> int:
    return count if math.isinf(count) else int(count)  # type: ignore[return-value]  # math.inf stands for an unsized loader (len() of it raises, as for the loader itself)


def _kwargs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def _runner_module() -> Any:
    """``mmcv.runner`` (imported: the adapter was given mmcv hooks)."""
    return sys.modules["mmcv.runner"]
