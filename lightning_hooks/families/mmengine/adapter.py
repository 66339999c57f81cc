"""``MMEngineAdapter``: MMEngine hooks, ordered by priority, driven by Lightning."""

from __future__ import annotations

import os
import sys
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_warn

from lightning_hooks.core.adapter import LegacyHookAdapter, warn_if_last_epoch_unvalidated
from lightning_hooks.core.safety import plain
from lightning_hooks.core.triggers import ON, Trigger
from lightning_hooks.families.mmengine.events import EVENTS, LOAD_CHECKPOINT

# mmengine is not a dependency of lightning-hooks: the modules that import it (runner, config) are imported where an
# MMEngine hook or config is already in hand.


class MMEngineAdapter(LegacyHookAdapter):
    """Run ``mmengine.hooks.Hook`` instances inside ``lightning.Trainer``, as MMEngine's ``Runner`` runs them.

    Hooks are sorted by priority with MMEngine's stable priority queue and receive a :class:`Runner` facade, by
    keyword. Give ``param_schedulers`` (mmengine schedulers or their configs) to have ``ParamSchedulerHook`` step
    them; Lightning then must not schedule the same optimizer. Turn Lightning's own checkpointing off
    (``enable_checkpointing=False``) when ``CheckpointHook`` writes the checkpoints.

    Example::

        from mmengine.hooks import CheckpointHook, EMAHook
        adapter = MMEngineAdapter([EMAHook(), CheckpointHook(interval=1)], work_dir="work")
        Trainer(callbacks=[adapter], enable_checkpointing=False).fit(model, train_loader, val_loader)
    """

    family = "mmengine"
    events = EVENTS
    family_title, host_args, upstream = "MMEngine", ("runner",), ("mmengine.",)
    delegates = {
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
    ) -> None:
        super().__init__(hooks)
        from lightning_hooks.families.mmengine.runner import Runner

        self.runner = self.host = Runner(
            work_dir=work_dir,
            experiment_name=experiment_name,
            cfg=cfg,
            seed=seed,
            log_processor=log_processor,
            param_schedulers=param_schedulers,
            log_level=log_level,
        )
        self.runner._adapter = self
        self._done = 0  # finished train iterations, MMEngine's ``train_loop.iter``
        self._scheduler_states: list[dict] | None = None
        self._build_plan((self.runner,))

    @classmethod
    def from_config(
        cls, default_hooks: dict | None = None, custom_hooks: list | None = None, **options: Any
    ) -> MMEngineAdapter:
        """An adapter for MMEngine's ``default_hooks`` / ``custom_hooks`` config (see :func:`build_hooks`)."""
        from lightning_hooks.families.mmengine.config import build_hooks

        return cls(build_hooks(default_hooks=default_hooks, custom_hooks=custom_hooks), **options)

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

    # ------------------------------------------------------------------------------------------ conditions
    def writes_checkpoint(self) -> bool:
        return self._trainer.is_global_zero

    # ---------------------------------------------------------------------------------------- run lifecycle
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if stage == "fit":  # a new training run; a resumed one restores the count after setup (load_host_state)
            self._done = self.runner.iter = 0
        self.runner.attach(trainer)
        _init_dist_flags(self.hooks)
        self.fire(ON["setup"])

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        try:
            self.fire(ON["teardown"])
        finally:
            super().teardown(trainer, pl_module, stage)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        """Forward the failure to hooks, then close the run's log file (Lightning calls no teardown after a failure)."""
        try:
            super().on_exception(trainer, pl_module, exception)
        finally:
            self.runner.close_log_file()

    def trigger(self, trigger: Trigger, **context: Any) -> None:
        if trigger == LOAD_CHECKPOINT:
            self.runner._resume = self._trainer.state.fn == "fit"  # a checkpoint loaded by fit() is a resume
        self.fire(trigger, **context)

    # ------------------------------------------------------------------------------------------------ train
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.runner.build_param_schedulers()
        scheduled = {id(getattr(s.optimizer, "optimizer", s.optimizer)) for s in self.runner._built_schedulers()}
        if any(id(config.scheduler.optimizer) in scheduled for config in trainer.lr_scheduler_configs):
            raise ValueError(
                "MMEngineAdapter(param_schedulers=...) and configure_optimizers() both schedule the same optimizer, "
                "so its learning rate would be stepped twice. Return only the optimizer from configure_optimizers(), "
                "or drop param_schedulers."
            )
        if self._scheduler_states is not None:
            for scheduler, state in zip(self.runner._built_schedulers(), self._scheduler_states):
                scheduler.load_state_dict(state)
            self._scheduler_states = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # the facade may have sized the train loader before Lightning restored its mid-epoch position: apply it now
        trainer.fit_loop._load_combined_loader_states()
        _warn_loop_differences(trainer, self.runner)
        self.runner.iter = self._done
        self.runner.epoch = trainer.current_epoch
        self.fire(ON["on_train_start"])

    def start_train_epoch(self, trainer: pl.Trainer, pl_module: pl.LightningModule, mid_epoch: bool) -> None:
        self.runner.epoch = trainer.current_epoch
        self.runner.train_loop.in_epoch = True
        self.fire(ON["on_train_epoch_start"])

    def end_train_batch(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._done += 1
        self.fire(ON["on_train_batch_end"], batch_idx=batch_idx, data_batch=batch, outputs=outputs)
        self.runner.iter = self._done

    def end_train_epoch(self, trainer: pl.Trainer, trigger: Trigger) -> None:
        self.fire(trigger)
        _agree_on_stop(trainer, self.runner.train_loop)
        self.runner.epoch = trainer.current_epoch + 1
        self.runner.train_loop.end_epoch()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.runner.epoch = trainer.current_epoch
        self.fire(ON["on_train_end"])

    # -------------------------------------------------------------------------------------- validation, test
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire(ON["on_validation_end"], metrics=_epoch_metrics(trainer))
        _agree_on_stop(trainer, self.runner.train_loop)  # EarlyStoppingHook may have stopped this rank only

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fire(ON["on_test_end"], metrics=_epoch_metrics(trainer))

    # ------------------------------------------------------------------------------------------- checkpoints
    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        """Give hooks MMEngine's checkpoint layout on Lightning's own dict, so what they write reaches the file."""
        if self.writes_checkpoint():
            self.fire(ON["on_save_checkpoint"], checkpoint=self.runner.mmengine_checkpoint(checkpoint))

    def host_state(self) -> dict[str, Any]:
        from lightning_hooks.families.mmengine.runner import hub_state

        return {
            "iter": self._done,
            "message_hub": hub_state(self.runner.message_hub),
            "param_schedulers": [plain(s.state_dict()) for s in self.runner._built_schedulers()],
        }

    def load_host_state(self, state: dict[str, Any]) -> None:
        from lightning_hooks.families.mmengine.runner import load_hub_state

        self._done = self.runner.iter = state.get("iter", 0)
        if "message_hub" in state:
            load_hub_state(self.runner.message_hub, state["message_hub"])
        self._scheduler_states = state.get("param_schedulers") or None


def _warn_loop_differences(trainer: pl.Trainer, runner: Any) -> None:
    """Warn where Lightning's loop will not run the hooks as the MMEngine loop the settings suggest would."""
    iters, batches, every = runner.max_iters, trainer.num_training_batches, trainer.check_val_every_n_epoch
    if trainer.max_steps >= 0 and (trainer.max_epochs < 0 or iters < trainer.max_epochs * batches):
        if batches == float("inf"):
            where = "from a train loader without a length"
        else:
            epochs, rest = divmod(iters, batches)
            where = f", {rest} batches into epoch {epochs + 1}" if rest else f", {epochs} epochs"
            where += f" of {batches} batches"
        rank_zero_warn(
            f"MMEngineAdapter: Trainer(max_steps={trainer.max_steps}) ends training after {iters} iterations{where}. "
            "Hooks run MMEngine's epoch-based loop, not IterBasedTrainLoop: every pass over the data is an epoch "
            "(before/after_train_epoch, batch_idx from 0, runner.epoch + 1), and an epoch that max_steps cuts "
            "short ends without validation. IterBasedTrainLoop would run one epoch, pass the global iteration as "
            "batch_idx and validate at max_iters. Port iteration-based configs with by_epoch=False in hooks, "
            "schedulers and log_processor, and call trainer.validate() after fit to validate the final weights "
            "(docs/migration-mmengine.md)."
        )
    else:
        warn_if_last_epoch_unvalidated(
            trainer, "MMEngineAdapter", f"while MMEngine's EpochBasedTrainLoop(val_interval={every}) also validates "
            "at max_epochs, no after_val_epoch sees the final weights (CheckpointHook(save_best=...), EarlyStoppingHook)"
        )


def _init_dist_flags(hooks: list[Any]) -> None:
    """Flags MMEngine hooks compute from ``mmengine.dist`` in ``__init__``: the Runner builds hooks after
    ``init_dist``, Lightning starts the process group after the hooks exist, so compute them again now."""
    from mmengine.dist import is_distributed
    from mmengine.hooks import SyncBuffersHook

    for hook in hooks:
        if isinstance(hook, SyncBuffersHook):
            hook.distributed = is_distributed()


def _agree_on_stop(trainer: pl.Trainer, loop: Any) -> None:
    """Under DDP, stop every rank when any rank's hooks set ``stop_training`` (as Lightning's EarlyStopping)."""
    if trainer.world_size > 1 and trainer.strategy.reduce_boolean_decision(loop._stop, all=False):
        loop.stop_training = True


def _epoch_metrics(trainer: pl.Trainer) -> dict[str, float]:
    """Metrics logged during the evaluation epoch that just ended (MMEngine names them, e.g. ``toy/mse``).

    Under DDP the float metrics are averaged over the ranks, so every rank's hooks see the same values, as MMEngine's
    evaluator gives them (for per-rank means over equal-size shards, their mean is the mean over the whole set).
    Every rank must log the same metric names."""
    results = trainer._results  # the evaluation loop's result collection, still filled in on_*_end
    metrics = results.metrics(on_step=False)["callback"] if results is not None else trainer.callback_metrics
    out = {k: v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for k, v in metrics.items()}
    if trainer.world_size > 1:
        names = sorted(k for k, v in out.items() if isinstance(v, float))
        values = torch.tensor([out[k] for k in names], dtype=torch.float64, device=trainer.strategy.root_device)
        out.update(zip(names, trainer.strategy.reduce(values, reduce_op="mean").tolist()))
    return out
