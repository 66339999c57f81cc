"""The LightningModule built from a whole Classy task config (:class:`ClassyTaskModule`): what
``ClassificationTask.from_config`` builds (Classy's own builder runs): the model, the loss, the optimizer with Classy's
param schedulers (applied per step and per phase as Classy's task does), mixup, ``clip_grad_norm``; its meters and
config hooks go to the :class:`ClassyAdapter` that :meth:`ClassyTaskModule.adapter` returns. It logs the values
Classy's logging hooks print (losses, learning rates, meters) with ``self.log``, so they reach ``trainer.loggers``.
The data comes from :mod:`lightning_hooks.families.classy.data`; the VISSL counterpart is
:mod:`lightning_hooks.families.classy.vissl_module`.

Classy is imported when a module is built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from typing_extensions import override

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.core.lightning_api import ddp_kwargs, pl, train_batch_index
from lightning_hooks.families.classy.adapter import ClassyAdapter
from lightning_hooks.families.classy.data import load_task_config

if TYPE_CHECKING:  # configure_optimizers' return type only (Lightning's namespace is chosen at run time)
    from lightning.pytorch.utilities.types import OptimizerLRSchedulerConfig

#: Classy task names this module builds (``ClassificationTask``; fine-tuning needs a pretrained checkpoint flow).
CLASSY_TASKS = ("classification_task",)


def build_classy_task(config: dict[str, Any]) -> Any:
    """Classy's ``build_task(config)``, refusing what a Lightning run does not reproduce. As in ``classy_train.py``,
    Classy's builders complete ``config`` with their defaults (the optimizer's ``lr``, ``nesterov``, ``num_epochs``,
    ...): the config ``CheckpointHook`` stores is that one."""
    name = config.get("name")
    if name not in CLASSY_TASKS:
        raise ConfigError(
            f"name: the Classy task {name!r} is not built under Lightning (only {', '.join(CLASSY_TASKS)}); "
            "train it with classy_train.py, or use a classification_task config."
        )
    if config.get("test_only"):
        raise ConfigError("test_only: a test-only Classy task is a Lightning trainer.test(); this module trains")
    phases = config.get("dataset", {}).get("train", {}).get("phases_per_epoch", 1)
    if phases != 1:
        raise ConfigError(
            f"dataset.train.phases_per_epoch: {phases}; Lightning runs one train epoch per phase: set it to 1 and "
            "multiply num_epochs instead."
        )
    amp = config.get("amp_args")
    if amp is not None and str(amp.get("amp_type", "apex")).lower() != "pytorch":
        raise ConfigError(
            "amp_args: Apex AMP is not reproduced under Lightning; use amp_args.amp_type: pytorch (Lightning's "
            "precision='16-mixed') or drop amp_args and pass --precision."
        )
    if config.get("use_sharded_ddp"):
        raise ConfigError(
            "use_sharded_ddp: Classy's sharded DDP is fairscale's ShardedDataParallel with its OSS optimizer (each rank "
            "keeps a shard of the optimizer state), which Lightning 2 has no strategy for (it removed its fairscale "
            "ones); set use_sharded_ddp: false to train with Lightning's DDP (--devices N), where each rank keeps the "
            "whole optimizer state."
        )
    from classy_vision.tasks import build_task

    return build_task(config)


class ClassyTaskModule(pl.LightningModule):
    """A LightningModule from a Classy task config, built by Classy's own ``ClassificationTask.from_config``.

    ``self.model`` is the ``ClassyModel``, ``self.criterion`` the loss, ``self.task`` the Classy task the rest was
    built on (optimizer and param schedulers, datasets, meters, config hooks, mixup, ``clip_grad_norm``). The steps
    follow Classy's ``train_step`` / ``eval_step`` on its ``{"input", "target"}`` samples; the optimizer's param
    groups are Classy's (``bn_weight_decay``) and its scheduled options are set from Classy's param schedulers at
    Classy's ``where`` before each step, the per-epoch ones at each train phase end.

    Train with :meth:`adapter` (the config's meters and hooks) and :meth:`datamodule` (the config's datasets), for
    ``max_epochs`` = the config's ``num_epochs`` and ``check_val_every_n_epoch`` = its ``test_phase_period``
    (:meth:`trainer_options`).

    Example::

        module = ClassyTaskModule("my_task.json")
        trainer = Trainer(callbacks=[module.adapter()], **module.trainer_options())
        trainer.fit(module, datamodule=module.datamodule())
    """

    #: whether :meth:`_log_phase` sends the phase values to the loggers; ``tracker.HookScalars`` turns it off while a
    #: TensorboardPlotHook sends them there at its own steps
    log_phase_values = True

    def __init__(self, config: Mapping[str, Any] | str | os.PathLike[str]) -> None:
        super().__init__()
        self.config = load_task_config(config)
        task = build_classy_task(self.config)
        self.model = task.base_model
        self.criterion = task.base_loss
        self.task = task  # not a Module: the model and loss are registered once, above
        self._step_lr: float | None = None
        self._step_loss: torch.Tensor | None = None

    # ----------------------------------------------------------------------------------------------- wiring
    def adapter(self, hooks: list[Any] | None = None, **options: Any) -> ClassyAdapter:
        """A :class:`ClassyAdapter` with ``hooks`` (e.g. those ``classy_train.py`` adds from its flags) then the
        config's hooks, and the config's meters, as ``classy_train.py`` sets ``task.hooks``; the hooks see
        ``self.model`` as ``task.base_model`` and ``self.criterion`` as ``task.loss``."""
        options = {"meters": self.task.meters, "model": "model", "loss": "criterion", **options}
        return ClassyAdapter([*(hooks or []), *self.task.hooks], **options)

    def datamodule(self) -> Any:
        """The config's train and test datasets (those ``from_config`` built) as a LightningDataModule."""
        from lightning_hooks.families.classy.data import ClassyTaskData

        return ClassyTaskData(self.task)

    def trainer_options(self) -> dict[str, Any]:
        """The ``Trainer`` options the config fixes: epochs, test period, no sanity check, Classy's samplers kept."""
        options: dict[str, Any] = {
            "max_epochs": int(self.task.num_epochs),
            "check_val_every_n_epoch": int(self.task.test_phase_period),
            "num_sanity_val_steps": 0,
            "use_distributed_sampler": False,  # Classy's datasets shard with their own DistributedSampler
        }
        if self.task.amp_args is not None:
            options["precision"] = "16-mixed"
        if self.task.batch_norm_sync_mode.name == "PYTORCH":
            options["sync_batchnorm"] = True  # Classy's distributed.batch_norm_sync_mode: pytorch (SyncBatchNorm)
        if self.config.get("simulated_global_batchsize"):
            options["accumulate_grad_batches"] = self._accumulation()
        return options

    def _accumulation(self) -> int:
        simulated = int(self.config["simulated_global_batchsize"])
        batch = self.task.datasets["train"].get_global_batchsize()
        if simulated % batch:
            raise ConfigError(
                f"simulated_global_batchsize: {simulated} is not a multiple of the global batch size {batch}"
            )
        return simulated // batch

    def ddp_options(self) -> dict[str, Any]:
        """The ``DistributedDataParallel`` arguments Classy's task wraps its model with, from the config's
        ``distributed`` section: ``broadcast_buffers`` only in its ``forward_pass`` mode (its default ``before_eval``
        broadcasts rank 0's buffers before each test phase instead: :meth:`on_validation_model_eval`),
        ``find_unused_parameters``, ``bucket_cap_mb``."""
        task = self.task
        return {"broadcast_buffers": task.broadcast_buffers_mode.name == "FORWARD_PASS",
                "find_unused_parameters": task.find_unused_parameters, "bucket_cap_mb": task.ddp_bucket_cap_mb}  # fmt: skip  # the three DDP options on two lines

    @override
    def setup(self, stage: str) -> None:
        """Under a ``DDPStrategy``, :meth:`ddp_options` become the defaults of the arguments it wraps this module with
        (before it wraps it; those given to ``DDPStrategy(...)`` win)."""
        kwargs = ddp_kwargs(self.trainer.strategy)
        if kwargs is not None:
            for key, value in self.ddp_options().items():
                kwargs.setdefault(key, value)

    # ------------------------------------------------------------------------------------------------ steps
    @override
    def forward(self, x: Any) -> Any:
        return self.model(x)

    @override
    def on_validation_model_eval(self) -> None:
        """The model in eval mode, then Classy's ``before_eval`` buffer broadcast (its default
        ``distributed.broadcast_buffers``): rank 0's buffers (BatchNorm statistics) to every rank before a test
        phase, as ``ClassificationTask._set_model_train_mode`` does."""
        super().on_validation_model_eval()
        self._broadcast_buffers()

    @override
    def on_test_model_eval(self) -> None:
        """As :meth:`on_validation_model_eval`, for ``trainer.test``."""
        super().on_test_model_eval()
        self._broadcast_buffers()

    def _broadcast_buffers(self) -> None:
        buffers = list(self.model.buffers())
        if self.task.broadcast_buffers_mode.name != "BEFORE_EVAL" or self.trainer.world_size <= 1 or not buffers:
            return
        logging.info("Synchronizing buffers before evaluation.")  # Classy's line
        for buffer in buffers:
            torch.distributed.broadcast(buffer, 0)

    @override
    def training_step(self, sample: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        if self.task.mixup_transform is not None:
            sample = self.task.mixup_transform(sample)
        output = self.model(sample["input"])
        loss = self.criterion(output, sample["target"])
        self._step_loss = loss.detach()
        return {"loss": loss, "output": output, "target": sample["target"]}

    @override
    def validation_step(self, sample: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        return self._eval_step(sample)

    @override
    def test_step(self, sample: dict[str, Any], batch_idx: int) -> dict[str, Any]:
        return self._eval_step(sample)

    def _eval_step(self, sample: dict[str, Any]) -> dict[str, Any]:
        output = self.model(sample["input"])
        return {"loss": self.criterion(output, sample["target"]), "output": output, "target": sample["target"]}

    # ---------------------------------------------------------------------------------- optimizer, schedule
    @override
    def configure_optimizers(self) -> OptimizerLRSchedulerConfig:
        """Classy's ``prepare_optimizer``: non-BatchNorm then BatchNorm parameter groups (loss's included), the
        latter without weight decay unless ``bn_weight_decay``; the ClassyOptimizer's torch optimizer, with
        :class:`ClassyPhaseSchedule` (Classy's ``optimizer.on_epoch(where)`` at each train phase end)."""
        classy = self.task.optimizer
        self.task.prepare_optimizer(optimizer=classy, model=self.model, loss=self.criterion)
        schedule = ClassyPhaseSchedule(classy, self.task.num_epochs)
        return {"optimizer": classy.optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "epoch"}}

    @override
    def on_fit_start(self) -> None:
        epochs = self.trainer.max_epochs
        if epochs != self.task.num_epochs:
            raise ConfigError(
                f"num_epochs: the config trains {self.task.num_epochs} epochs (its param schedulers span them) but "
                f"Trainer(max_epochs={epochs}); pass max_epochs={self.task.num_epochs} (trainer_options())."
            )

    @override
    def on_train_start(self) -> None:
        """Every scheduled option at the ``where`` the run starts from (0, or where a resumed checkpoint left off)."""
        self._schedule(self.current_epoch / self.task.num_epochs, None)

    @override
    def optimizer_step(self, epoch: int, batch_idx: int, optimizer: Any, optimizer_closure: Any = None) -> None:
        """Classy's ``optimizer.step(where=task.where)``: the per-step options at ``where``, then the step."""
        from classy_vision.optim.param_scheduler import UpdateInterval

        batches = self.trainer.num_training_batches
        self._schedule((epoch * batches + batch_idx) / (self.task.num_epochs * batches), UpdateInterval.STEP)
        self._step_lr = optimizer.param_groups[0]["lr"]
        optimizer.step(closure=optimizer_closure)

    def _schedule(self, where: float, interval: Any) -> None:
        classy = self.task.optimizer
        classy._update_schedule(classy._run_schedulers(min(where, 1.0 - 1e-12), interval))

    @override
    def configure_gradient_clipping(
        self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:  # fmt: skip  # Lightning's signature, parameters a few to a line
        """Classy's ``clip_grad_norm`` (the norm over the optimizer's parameters), else Lightning's own setting."""
        if self.task.clip_grad_norm is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.task.clip_grad_norm, gradient_clip_algorithm="norm")
        else:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    # ------------------------------------------------------------------------------- values to the loggers
    @override
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """Every ``log_every_n_steps`` (``--log_freq``) train steps, the step's loss (this rank's, as Classy's
        ``on_step`` hooks see it) and LR as ``train/loss`` and ``train/lr``, to the loggers at Classy's step: the
        train step count from 1 (TensorboardPlotHook's ``Learning Rate/train`` step, every batch counted); after a
        train phase's last batch (its phase end has run), the phase's values."""
        step = train_batch_index(self.trainer) + 1
        if step % self.trainer.log_every_n_steps == 0:  # type: ignore[attr-defined]  # Lightning's logger connector sets it; Trainer does not declare it
            loss, lr = self._step_loss, self._step_lr
            assert loss is not None and lr is not None, "each train step sets its loss and LR before this hook"
            self.log_dict({"train/loss": loss, "train/lr": lr}, on_step=True, on_epoch=False, batch_size=1, logger=False)
            for logger in self.trainer.loggers:
                logger.log_metrics({"train/loss": float(loss), "train/lr": float(lr)}, step=step)
        if batch_idx + 1 == self.trainer.num_training_batches:
            self._log_phase("train")

    @override
    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self._log_phase("test")

    @override
    def on_test_epoch_end(self) -> None:
        self._log_phase("test")

    def _host_task(self) -> Any:
        """The task facade of the ClassyAdapter training this module (None without one)."""
        adapter = next((cb for cb in self.trainer.callbacks if isinstance(cb, ClassyAdapter)), None)  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        return None if adapter is None else adapter.task

    def _log_phase(self, phase: str) -> None:
        """What Classy's TensorboardPlotHook plots at a phase end, under its tags: the phase's mean loss
        (``Losses/{phase}``) and each meter's values (``Meters/{phase}/{meter}/{value}``). The loggers get them at the
        phase's index (Classy's ``train_phase_idx`` / ``eval_phase_idx``), the step the hook plots them at and
        LossLrMeterLoggingHook prints, so the curves line up with runs made under Classy; ``self.log`` keeps them
        (not for the loggers) for callbacks that monitor them (``EarlyStopping``, ``ModelCheckpoint``)."""
        task = self._host_task()
        values = {f"Losses/{phase}": sum(task.losses) / len(task.losses)} if task is not None and task.losses else {}
        for meter in self.task.meters:
            value = meter.value
            items = value.items() if isinstance(value, Mapping) else [("value", value)]
            values.update({f"Meters/{phase}/{meter.name}/{k}": float(v) for k, v in items if _number(v)})
        if not values:
            return
        self.log_dict(values, on_step=False, on_epoch=True, batch_size=1, logger=False)
        if self.log_phase_values and task is not None:
            step = task.train_phase_idx if phase == "train" else task.eval_phase_idx
            scalars = {name: float(value) for name, value in values.items()}
            for logger in self.trainer.loggers:
                logger.log_metrics(scalars, step=int(step))


class ClassyPhaseSchedule(torch.optim.lr_scheduler.LRScheduler):
    """Classy's ``optimizer.on_epoch(where)`` at the end of each train phase, as a Lightning ``"epoch"`` scheduler:
    Lightning steps it after the phase's last optimizer step and before the phase-end hooks, which then see the
    per-epoch options (``where`` < 1) in ``options_view``, as in Classy. ``where`` is the phases done over
    ``num_epochs``.
    """

    def __init__(self, classy_optimizer: Any, num_epochs: int) -> None:
        self.classy = classy_optimizer
        self.num_epochs = num_epochs
        super().__init__(classy_optimizer.optimizer)

    @override
    def step(self, epoch: int | None = None) -> None:
        self.last_epoch += 1
        if self.last_epoch > 0:
            self.classy.on_epoch(self.last_epoch / self.num_epochs)
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_epoch = state_dict["last_epoch"]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.numel() == 1)
