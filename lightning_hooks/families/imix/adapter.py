"""``IMIXAdapter``: iMIX hooks, ordered by level, driven by Lightning."""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import sys
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.compat import imix as compat
from lightning_hooks.core import lightning_api
from lightning_hooks.core.adapter_state import format_error
from lightning_hooks.core.checks import Periods, check_argument, check_periods
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.loaders import epoch_samplers
from lightning_hooks.core.manual_step import ManualStepAdapter
from lightning_hooks.core.triggers import Patch, Remove
from lightning_hooks.families.imix.engine import Engine
from lightning_hooks.families.imix.events import EVENTS
from lightning_hooks.families.imix.loop import IMIXLoop

#: iMIX's hooks with a period option: (attribute, the mount point that divides by it, None accepted)
_PERIODS: Periods = {
    "CheckPointHook": (("iter_period", "after_train_iter", True), ("epoch_period", "after_train_epoch", False)),
    "EvaluateHook": (("_eval_iter_period", "after_train_iter", True),),
}


@dataclass(frozen=True)
class EpochsOnRichBar(Patch):
    """Lightning's rich progress bar (its default with ``rich`` installed) reads ``Epoch N/<max_epochs - 1>``:
    ``Epoch 9/-2`` in a fit that ``max_steps`` alone bounds (``max_epochs`` is then -1), as iMIX's step-based runs
    are. There it reads the last epoch the steps reach, iMIX's ``total_epochs`` - 1: ``max_steps`` times the batches
    a step takes (the hook's accumulation), over the batches of an epoch."""

    def __str__(self) -> str:
        return "RichProgressBar epoch description"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        def describe(epoch: int, lightnings: str) -> str:
            batches = trainer.num_training_batches
            if trainer.max_epochs != -1 or trainer.max_steps <= 0 or not 0 < batches < math.inf:
                return lightnings
            per_step = adapter.host.gradient_accumulation_steps if adapter.steppers else trainer.accumulate_grad_batches
            last = math.ceil(trainer.max_steps * per_step / batches) - 1
            return lightnings.replace(f"Epoch {epoch}/-2", f"Epoch {epoch}/{last}", 1)

        undos = [undo for bar in trainer.callbacks if (undo := lightning_api.describe_train_epochs(bar, describe))]

        def remove() -> None:
            for undo in undos:
                undo()

        return remove


class IMIXAdapter(ManualStepAdapter):
    """Run ``imix.engine.hooks.HookBase`` hooks inside ``lightning.Trainer``.

    Hooks are ordered by level as iMIX's engine does; each reaches the :class:`Engine` facade (``adapter.engine``,
    iMIX's ``imixEngine``) as ``self.trainer``, a ``weakref.proxy`` as iMIX sets it. The LightningModule's
    ``training_step`` plays iMIX's forward plus loss: it returns the loss tensor or iMIX's loss dict
    (``{"loss": tensor, "total_loss": float, ...}``).

    If a legacy hook owns the step, Lightning doesn't: with an OptimizerHook or Fp16OptimizerHook the adapter
    switches the module to manual optimisation and runs ``before_train_iter``, the forward and ``after_train_iter``
    (backward, clipping, step) inside ``training_step``. The hook steps Lightning's optimizer wrapper, so
    ``trainer.global_step`` counts its steps and ``max_steps`` and step-based checkpoints keep working. The module
    stays in manual optimisation after the fit (``trainer.global_step`` reads the manual count only while it is);
    the next fit with an IMIXAdapter that has no such hook switches it back.

    ``by_epoch``, ``gradient_accumulation_steps`` and ``is_lr_accumulation`` not given are read from ``cfg`` as
    iMIX's Organizer reads them (a ``by_iter`` key means by iteration), else default as there (by epoch, 1, True).

    Example::

        from imix.engine.hooks import IterationTimerHook, OptimizerHook
        adapter = IMIXAdapter([OptimizerHook(grad_clip=dict(max_norm=1.0)), IterationTimerHook()],
                              gradient_accumulation_steps=2)
        Trainer(max_steps=100, callbacks=[adapter]).fit(model)
    """

    family = "imix"
    events = EVENTS
    loop: IMIXLoop
    family_title, host_args, upstream = "iMIX", (), ("imix.", "lightning_hooks.compat.")
    checkpoint_hooks = frozenset({"CheckPointHook"})
    ends_train_epoch_at_last_batch = False  # iMIX has no validation: its epochs end at on_train_epoch_end
    #: ``CommonEngine.run_train_epoch`` iterates the loader after ``before_train_epoch``; ``train_by_iter`` after
    #: ``before_train`` (no epoch rows by iteration: the same point)
    train_iterator_at = "after_epoch_start"

    def __init__(
        self,
        hooks: Any,
        by_epoch: bool | None = None,
        gradient_accumulation_steps: int | None = None,
        is_lr_accumulation: bool | None = None,
        work_dir: str | os.PathLike | None = None,
        cfg: Mapping[str, Any] | Any = None,
    ) -> None:
        super().__init__(hooks)
        by_iter = "by_iter" in cfg if isinstance(cfg, Mapping) else hasattr(cfg, "by_iter")  # iMIX: hasattr
        by_epoch = _setting("by_epoch", by_epoch, False if by_iter else None, True)
        gas = _cfg_value(cfg, "gradient_accumulation_steps")
        gradient_accumulation_steps = _setting("gradient_accumulation_steps", gradient_accumulation_steps, gas, 1)
        lr_accumulation = _cfg_value(cfg, "is_lr_accumulation")
        is_lr_accumulation = _setting("is_lr_accumulation", is_lr_accumulation, lr_accumulation, True)
        if not isinstance(gradient_accumulation_steps, int) or gradient_accumulation_steps < 1:
            raise ValueError(f"IMIXAdapter: gradient_accumulation_steps must be an int >= 1, got {gradient_accumulation_steps!r}")
        real = _loaded_imix()
        self.steppers = [h for h in self.hooks if real is not None and isinstance(h, real.OptimizerHook)]
        #: iMIX's engine loop: counters and log buffer (the engine facade reads them); fires the train rows through
        #: the dispatch itself (the adapter's ``fire`` would only pass them on, twice an iteration)
        self.loop = IMIXLoop(self.dispatch, by_epoch=by_epoch, hooks_step=bool(self.steppers))
        self.engine = self.host = Engine(
            self.hooks,
            self.loop,
            by_epoch=by_epoch,
            gradient_accumulation_steps=gradient_accumulation_steps,
            is_lr_accumulation=is_lr_accumulation,
            work_dir=work_dir,
            cfg=cfg,
        )
        for hook in self.hooks:
            _check_unowned(hook)
        for hook in self.hooks:
            hook.trainer = weakref.proxy(self.engine)
        self.scalers = [h for h in self.steppers if isinstance(h, real.Fp16OptimizerHook)]
        self.schedulers = [h for h in self.hooks if real is not None and isinstance(h, real.LRSchedulerHook)]
        self._module: pl.LightningModule | None = None
        self._train_running = False
        self._data_start = 0.0
        self._data_time = 0.0
        self._write_metrics: Any = None
        #: the train loader's samplers with their epoch when training started, which iMIX's engine never changes
        self._sampler_epochs: list[tuple[Any, int]] = []
        self.dispatch.build_plan(())

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        real = _loaded_imix()
        return (compat.HookBase,) if real is None else (real.HookBase, compat.HookBase)

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        """``dict(type=..., level=..., **kwargs)`` as in iMIX's ``custom_hooks``."""
        return compat.build_custom_hooks([config])[0]

    def check_arguments(self, hook: Any) -> None:
        """``OptimizerHook(grad_clip=...)`` is None or the keyword arguments of ``clip_grad_norm_``."""
        clip_args = set(inspect.signature(torch.nn.utils.clip_grad_norm_).parameters) - {"parameters"}
        check_argument(
            type(self).__name__, hook, "_grad_clip",
            lambda v: v is None or (isinstance(v, Mapping) and "max_norm" in v and set(v) <= clip_args),
            f"None or a dict of clip_grad_norm_ arguments ({', '.join(sorted(clip_args))}), e.g. "
            "grad_clip=dict(max_norm=1.0)",
        )  # fmt: skip  # the call's arguments grouped: hook and attribute, check, message
        check_periods(type(self).__name__, hook, _PERIODS)

    def order(self, hooks: list[Any]) -> list[Any]:
        """iMIX's rule: each hook goes after the last hook of lower or equal level (a stable sort by level)."""
        ordered: list[Any] = []
        for hook in hooks:
            level = compat.get_level(hook.level).value
            at = next((i for i in range(len(ordered), 0, -1) if compat.get_level(ordered[i - 1].level).value <= level), 0)
            ordered.insert(at, hook)
        return ordered

    def hook_state(self, hook: Any) -> Any:
        """LRSchedulerHook's scheduler: iMIX's checkpoints carry it (the Organizer's checkpointer saves it beside the
        model and optimizer, and ``resume_or_load`` restores it), so a resumed fit goes on with its learning rates."""
        return {"scheduler": hook._scheduler.state_dict()} if any(hook is h for h in self.schedulers) else None

    def load_hook_state(self, hook: Any, state: Any) -> None:
        hook._scheduler.load_state_dict(state["scheduler"])

    def host_state(self) -> dict[str, Any]:
        """The engine loop's counters (``epoch``, ``iter``, ``inner_iter``), which a resumed fit goes on from."""
        return {"loop": self.loop.state_dict()}

    def load_host_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`host_state`, strictly; a state written before it held the loop (no ``loop``) leaves the
        counters to Lightning's restored loop."""
        if "loop" in state:
            self.loop.load_state_dict(state["loop"])

    def upgrade_host_state(
        self, state: dict[str, Any], written: int, checkpoint: Mapping[str, Any] | None, source: str
    ) -> dict[str, Any]:
        """Format 1's loop counters in this format (:meth:`IMIXLoop.upgrade_state`), or refused where they cannot be."""
        if "loop" not in state:
            return state
        loop = self.loop.upgrade_state(state["loop"], checkpoint)
        if loop is None:
            raise format_error(
                self, source, written, "an epoch whose last iteration ran was kept as the current one until "
                "after_train_epoch, where it now counts as done and a resumed fit goes on at the next, as iMIX's "
                "resume_or_load; given the state alone, the two cannot be told apart",
                "resume it with trainer.fit(ckpt_path=...), which converts it from the whole Lightning checkpoint.",
            )  # fmt: skip  # the message's parts on their own lines
        return {**state, "loop": loop}

    def _main_only(self, rank: int) -> None:
        """iMIX's Organizer adds PeriodicLogger and CheckPointHook on the main process only: idle them elsewhere."""
        real = _loaded_imix()
        main_only = (real.PeriodicLogger, real.CheckPointHook) if real is not None else ()
        self.dispatch.mute("main process only", [h for h in self.hooks if rank != 0 and isinstance(h, main_only)])

    # ------------------------------------------------------------------------------------------ conditions
    def by_epoch(self) -> bool:
        return self.engine.by_epoch

    def train_running(self) -> bool:
        return self._train_running

    # ------------------------------------------------------------------------------------------ lightning glue
    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickled (``ddp_spawn``'s ranks): pickling a hook's ``weakref.proxy`` copied the engine into each hook, so
        point every hook at this adapter's engine again, and the loop at this adapter's dispatch (it travels without
        it)."""
        self.__dict__.update(state)
        self.loop.caller = self.dispatch
        for hook in self.hooks:
            hook.trainer = weakref.proxy(self.engine)

    @override
    def run_patches(self, stage: str) -> tuple[Patch, ...]:
        """The manual-step patches, and :class:`EpochsOnRichBar`."""
        return (*super().run_patches(stage), EpochsOnRichBar())

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        others = [type(c).__name__ for c in trainer.callbacks if isinstance(c, IMIXAdapter) and c is not self]  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        if others:
            raise ValueError(
                f"IMIXAdapter ({', '.join(self.hook_keys())}): this Trainer has another IMIXAdapter, but iMIX runs one "
                "engine per fit (one training step, one log buffer). Put all iMIX hooks in one IMIXAdapter, or pass "
                "them together to adapt()."
            )
        self.engine._attach(trainer)
        self._main_only(trainer.global_rank)
        if stage != "fit":
            return
        self._check_trainer(trainer)
        self.loop.start_run()

    def start_train(self, trainer: pl.Trainer) -> None:
        self._check_schedulers(trainer)
        self._check_epochs(trainer)
        real = compat.real_hooks()
        self.loop.log_buffer_class = None if real is None else real.LogBufferStorage
        if real is not None:
            self._write_metrics = real.periods.write_metrics
        self._train_running = True
        samplers = epoch_samplers(trainer.train_dataloader)
        self._sampler_epochs = [(s, s.epoch) for s in samplers if isinstance(getattr(s, "epoch", None), int)]
        super().start_train(trainer)

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        """iMIX's epoch starts: the train sampler gets back the epoch it had when training started, which Lightning
        replaced with the epoch's number (iMIX never calls ``set_epoch``: its ``DistributedSampler`` orders every
        epoch as the first, in a resumed run too), then ``before_train_epoch``; the epoch's iterator follows
        (:attr:`train_iterator_at`)."""
        for sampler, epoch in self._sampler_epochs:
            sampler.set_epoch(epoch)
        self.loop.start_epoch(mid_epoch)
        self._data_start = time.perf_counter()

    def start_train_batch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        self._data_time = time.perf_counter() - self._data_start
        super().start_train_batch(trainer, pl_module, batch, batch_idx)

    def run_step(self, method: str, step: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One iMIX iteration inside ``training_step``: [before_train_iter], forward, metrics; ``after_train_iter``
        follows from the strategy (:meth:`trigger`) or ``on_train_batch_end``."""
        self.loop.before_step()
        if self.scalers:
            with self._autocast():
                result = step(*args, **kwargs)
        else:  # no Fp16OptimizerHook: no autocast context to enter at every step
            result = step(*args, **kwargs)
        output = _loss_dict(result)
        self.engine.output = output
        if self._write_metrics is not None:
            self._write_metrics({"data_time": self._data_time, **output})
        return result

    def step_loss(self) -> torch.Tensor:
        return self.engine.output["loss"]

    def end_train_batch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        super().end_train_batch(trainer, pl_module, outputs, batch, batch_idx)
        self._data_start = time.perf_counter()

    def end_train(self, trainer: pl.Trainer) -> None:
        self._remove_patches()  # before after_train: EvaluateHook pickles the whole model there
        self._train_running = False
        try:
            super().end_train(trainer)  # after_train, then the loop leaves its log buffer
        finally:
            self._close_buffer()

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)  # after_train when training (iMIX's `finally`)
        self._train_running = False
        self._close_buffer()

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().teardown(trainer, pl_module, stage)
        self._close_buffer()

    # ---------------------------------------------------------------------------------------------- helpers
    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.scalers and self.engine._lightning("strategy").strategy.root_device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    def _check_trainer(self, trainer: pl.Trainer) -> None:
        gas = self.engine.gradient_accumulation_steps
        self.check_step_owner(
            trainer, f"Use IMIXAdapter(gradient_accumulation_steps={trainer.accumulate_grad_batches}) instead."
        )
        if self.steppers:
            owner = type(self.steppers[0]).__name__
            if getattr(trainer.precision_plugin, "scaler", None) is not None:
                raise ValueError(
                    f"IMIXAdapter: {owner} calls backward itself, so it cannot share Lightning's GradScaler "
                    f"(precision={trainer.precision!r}). Use precision='32-true'"
                    + (", and Fp16OptimizerHook for fp16." if not self.scalers else "; Fp16OptimizerHook brings its own.")
                )
        if self.scalers and trainer.precision != "32-true":
            raise ValueError(
                f"IMIXAdapter: Fp16OptimizerHook owns a GradScaler and the fp16 autocast, so Lightning must run at "
                f"precision='32-true', not {trainer.precision!r}."
            )
        if not self.steppers and gas != trainer.accumulate_grad_batches:
            raise ValueError(
                f"IMIXAdapter(gradient_accumulation_steps={gas}) but Lightning accumulates "
                f"{trainer.accumulate_grad_batches} batches (no OptimizerHook owns the step): set both to the same value."
            )

    def _check_schedulers(self, trainer: pl.Trainer) -> None:
        for hook in self.schedulers:
            if not any(hook._optimizer is opt for opt in trainer.optimizers):
                raise ValueError(
                    "IMIXAdapter: LRSchedulerHook was built with an optimizer Lightning does not train; return that "
                    "same optimizer from configure_optimizers()."
                )
            if any(cfg.scheduler is hook._scheduler or cfg.scheduler.optimizer is hook._optimizer
                   for cfg in trainer.lr_scheduler_configs):
                raise ValueError(
                    "IMIXAdapter: LRSchedulerHook steps its own scheduler; configure_optimizers() must not also return "
                    "a scheduler for the same optimizer, or the learning rate is stepped twice."
                )

    def _check_epochs(self, trainer: pl.Trainer) -> None:
        batches = trainer.num_training_batches
        if self.engine.by_epoch and math.isinf(batches):
            raise ValueError(
                "IMIXAdapter: by_epoch=True needs a sized train dataloader (iMIX's epoch-based hooks and log buffer "
                "read len(data_loader)); this one has no length. Use IMIXAdapter(by_epoch=False)."
            )
        gas = self.engine.gradient_accumulation_steps
        if not self.steppers and not math.isinf(batches) and batches % gas:
            raise ValueError(
                f"IMIXAdapter: Lightning accumulates gradient_accumulation_steps={gas} batches per step and starts "
                f"over each epoch of {batches} batches, while iMIX's hooks (LRSchedulerHook) and max_iter count "
                f"accumulation across epochs, so they would drift apart. Add OptimizerHook (it owns the step and "
                f"accumulates as iMIX does), or make the epoch length a multiple of {gas}."
            )

    def _close_buffer(self) -> None:
        self._write_metrics = None
        self.loop.close_log_buffer()


def _check_unowned(hook: Any) -> None:
    """A hook reaches its engine as ``hook.trainer``: one already driven by another live IMIXAdapter is refused."""
    owner = vars(hook).get("trainer")
    try:
        owned = isinstance(owner, Engine)
    except ReferenceError:  # that adapter is gone
        return
    if owned:
        raise ValueError(
            f"IMIXAdapter: the {type(hook).__qualname__} instance is already driven by another IMIXAdapter "
            "(its hook.trainer points at that adapter's engine). Build a new hook for each adapter."
        )


def _loss_dict(result: Any) -> dict[str, Any]:
    """iMIX's loss output: ``{"total_loss": float, ..., "loss": tensor}`` (a bare tensor gets its ``total_loss``)."""
    if isinstance(result, torch.Tensor):
        return {"total_loss": result.item(), "loss": result}
    if (type(result) is dict or isinstance(result, Mapping)) and isinstance(result.get("loss"), torch.Tensor):
        return dict(result)
    raise TypeError(
        "IMIXAdapter: training_step must return the loss tensor or iMIX's loss dict with a tensor under 'loss' "
        f"(Lightning event 'LightningModule.training_step'); got {type(result).__name__}."
    )


def _cfg_value(cfg: Any, key: str) -> Any:
    """``key`` of an iMIX cfg (a dict or an attribute config such as mmcv's ``Config``), ``None`` if absent."""
    return cfg.get(key) if isinstance(cfg, Mapping) else getattr(cfg, key, None)


def _setting(name: str, given: Any, from_cfg: Any, default: Any) -> Any:
    """An adapter setting: the keyword, else the cfg's value, else iMIX's default; keyword and cfg must agree."""
    if given is not None and from_cfg is not None and given != from_cfg:
        if name == "by_epoch":
            found = "has a by_iter key (iMIX then trains by iteration, whatever its value)"
        else:
            found = f"sets {name}={from_cfg!r}"
        raise ValueError(
            f"IMIXAdapter({name}={given!r}) disagrees with its cfg, which {found}. "
            "Set it in one place (the keyword or the cfg) or to the same value in both."
        )
    return given if given is not None else from_cfg if from_cfg is not None else default


def _loaded_imix() -> Any:
    """``imix.engine.hooks`` if a real imix is already imported (a real hook implies it is), else ``None``."""
    module = sys.modules.get("imix.engine.hooks")
    return None if module is None or getattr(module, "__lightning_hooks_alias__", False) else module
