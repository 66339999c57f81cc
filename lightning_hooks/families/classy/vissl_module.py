"""The LightningModule built from a whole VISSL config (:class:`VisslConfigModule`): what VISSL's
``SelfSupervisionTask`` builds (VISSL's builders): the model (trunk + heads), the loss (built in ``setup``, after the
adapter set Classy's device, as VISSL's trainer does) and the optimizer with its ``OPTIMIZER.param_schedulers`` (the
adapter applies them). It sends the values VISSL's logging hooks write (stdout.json's losses and learning rates,
metrics.json's meters) to ``trainer.loggers`` at VISSL's steps. The data comes from :class:`lightning_hooks.families.classy.data.VisslConfigData`.

VISSL is imported when a module is built.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.errors import ConfigError
from lightning_hooks.core.lightning_api import ddp_kwargs, pl
from lightning_hooks.families.classy.adapter import ClassyAdapter
from lightning_hooks.families.classy.vissl import ends_train_phase


def vissl_ddp_options(config: Any) -> dict[str, Any]:
    """The ``DistributedDataParallel`` arguments VISSL's task wraps its model with: ``broadcast_buffers`` when
    ``DISTRIBUTED.BROADCAST_BUFFERS`` (VISSL's ``_set_ddp_options`` then picks Classy's ``forward_pass`` mode),
    ``bucket_cap_mb`` from ``DATA.DDP_BUCKET_CAP_MB``, and Classy's ``find_unused_parameters`` default, which VISSL
    never changes."""
    return {"broadcast_buffers": bool(config.DISTRIBUTED.BROADCAST_BUFFERS), "find_unused_parameters": False,
            "bucket_cap_mb": config.DATA.DDP_BUCKET_CAP_MB}  # fmt: skip  # the three DDP options on two lines


class VisslConfigModule(pl.LightningModule):
    """A LightningModule from a VISSL config, built by VISSL's own builders as its ``SelfSupervisionTask`` does.

    ``config``: VISSL's command-line overrides (``["config=test/integration_test/quick_simclr_synthetic", ...]``,
    composed with VISSL's hydra plugin) or a composed ``AttrDict``. ``self.model`` is VISSL's model (trunk + heads),
    ``self.criterion`` its loss, built in ``setup`` (after the adapter set Classy's device, as VISSL's trainer builds
    it after its device); ``self.classy_optimizer`` VISSL's ClassyOptimizer with VISSL's param groups, whose
    ``OPTIMIZER.param_schedulers`` the adapter applies. Steps follow VISSL's ``standard_train_step``.

    Train with :meth:`adapter` (``default_hook_generator``'s hooks, the checkpoint folder) and :meth:`datamodule`.

    Example::

        module = VisslConfigModule(["config=test/integration_test/quick_simclr_synthetic", "config.MACHINE.DEVICE=cpu"])
        trainer = Trainer(callbacks=[module.adapter()], **module.trainer_options())
        trainer.fit(module, datamodule=module.datamodule())
    """

    def __init__(self, config: Any) -> None:
        from vissl.models import build_model

        from lightning_hooks.families.classy.vissl import compose

        super().__init__()
        self.config = config = compose(config)
        check_test_phases(config)
        check_fsdp(config)
        check_params_file(config)
        check_amp_type(config)
        check_amp_device(config)
        self.model = build_model(config.MODEL, config.OPTIMIZER)
        init_weights(self.model, config)
        check_trainable(self.model, config)
        # VISSL's trainer sets train mode by model.train(True) at each (train) phase start, where a feature-extraction
        # trunk (linear evaluation) keeps its frozen base model in eval mode; Lightning keeps the modes it finds
        self.model.train(True)
        self._step_loss: torch.Tensor | None = None
        self._skipped = 0  # the batches this train epoch's sampler skips (on_train_epoch_start)

    def adapter(self, hooks: list[Any] | None = None, **options: Any) -> ClassyAdapter:
        """A :class:`ClassyAdapter` with VISSL's ``default_hook_generator(config)`` hooks, then ``hooks``, and the
        config's meters (:func:`~lightning_hooks.families.classy.meters.vissl_meters`, which ``ClassyAdapter(vissl=...)`` builds) as ``task.meters``."""
        return ClassyAdapter(hooks or [], vissl=self.config, loss="criterion", **options)

    def datamodule(self) -> Any:
        """The config's ``DATA.TRAIN`` through VISSL's dataset and dataloader builders, as a LightningDataModule."""
        from lightning_hooks.families.classy.data import VisslConfigData

        return VisslConfigData(self.config)

    def trainer_options(self) -> dict[str, Any]:
        """The ``Trainer`` options the config fixes: ``OPTIMIZER.num_epochs``, VISSL's own samplers kept; with
        ``TEST_MODEL`` a validation (VISSL's test phase) after every epoch VISSL tests after
        (:meth:`on_train_epoch_start`), else none."""
        options: dict[str, Any] = {
            "max_epochs": int(self.config.OPTIMIZER.num_epochs),
            "num_sanity_val_steps": 0,
            "use_distributed_sampler": False,  # VISSL's StatefulDistributedSampler shards and seeds the data
        }
        if self.config.TEST_MODEL:
            options["check_val_every_n_epoch"] = 1
        else:
            options["limit_val_batches"] = 0
        amp = self.config.MODEL.get("AMP_PARAMS", {})
        if amp.get("USE_AMP"):
            options["precision"] = "16-mixed"
        return options

    @override
    def setup(self, stage: str) -> None:
        """VISSL's loss, built once; under a ``DDPStrategy``, :func:`vissl_ddp_options` become the defaults of the
        arguments it wraps this module with (those given to ``DDPStrategy(...)`` win)."""
        import vissl.losses  # noqa: F401  (registers VISSL's losses)
        from classy_vision.losses import build_loss

        kwargs = ddp_kwargs(self.trainer.strategy)
        if kwargs is not None:
            for key, value in vissl_ddp_options(self.config).items():
                kwargs.setdefault(key, value)
        if hasattr(self, "criterion"):
            return
        name = self.config.LOSS.name
        loss_config = copy.deepcopy(self.config.LOSS[name])
        if "num_train_samples" in loss_config:  # memory banks (PIRL's nce_loss_with_memory, DeepClusterV2)
            loss_config["num_train_samples"] = self._num_train_samples()
        loss_config["name"] = name
        self.criterion = build_loss(loss_config)
        self._keep_loss_out_of_ddp()

    def _num_train_samples(self) -> int:
        """VISSL's ``_build_loss``: a loss's ``num_train_samples`` (its memory bank's size) is the length of the
        dataset of the last of VISSL's available splits (``TRAIN`` unless ``TEST_ONLY``), whatever the config says;
        the datamodule's datasets (:class:`~lightning_hooks.families.classy.data.VisslConfigData`), else built as
        VISSL builds them."""
        from lightning_hooks.families.classy.data import VisslConfigData

        data = getattr(self.trainer, "datamodule", None)
        if not isinstance(data, VisslConfigData):
            data = VisslConfigData(self.config)
        data.setup("fit")
        return len(data.datasets[data.splits[-1]])

    def _keep_loss_out_of_ddp(self) -> None:
        """VISSL's DDP wraps the model only: the loss's parameters and buffers (SwAV's per-rank queues, MoCo's
        queue) are never synchronized nor broadcast from rank 0. Lightning's DDP wraps this module, loss included:
        they are left out of it, as DDP allows for named parameters and buffers."""
        names = [f"criterion.{name}" for name, _ in (*self.criterion.named_parameters(), *self.criterion.named_buffers())]
        if names:
            torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(self, names)

    @override
    def on_train_epoch_start(self) -> None:
        """VISSL's test schedule: with ``TEST_MODEL``, this epoch's validation runs after its last batch only if
        VISSL tests after that train phase (:func:`~lightning_hooks.families.classy.vissl.tests_after`: phases 0,
        ``TEST_EVERY_NUM_EPOCH``, 2 x ``TEST_EVERY_NUM_EPOCH``, ... and the last), which Lightning's
        ``check_val_every_n_epoch`` (after epochs N-1, 2N-1, ...) cannot give; the check moves past the epoch's last
        batch otherwise (``lightning_api.validate_after``). A phase resumed inside it (:meth:`_skipped_batches`) ends
        that many batches before Lightning's count of the loader: its last batch is the one checked, as the adapter's
        resume sets it for any LightningModule."""
        from lightning_hooks.families.classy.vissl import tests_after

        batches = self.trainer.num_training_batches
        self._skipped = self._skipped_batches()
        tested = bool(self.config.TEST_MODEL) and tests_after(self.config, self.trainer.current_epoch)
        if self.config.TEST_MODEL:
            lightning_api.validate_after(self.trainer, batches - self._skipped if tested else batches + 1)

    def _skipped_batches(self) -> int:
        """The batches VISSL's ``StatefulDistributedSampler`` skips in this train phase: its ``start_iter``, which the
        adapter's resume sets for a phase resumed from a checkpoint written inside it (0 otherwise)."""
        sampler = getattr(self.trainer.train_dataloader, "sampler", None)
        return int(getattr(sampler, "start_iter", 0) or 0)

    @override
    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """VISSL's ``construct_sample_for_model``: the collated batch as ``{"input", "target", ...}``, with the keys
        of ``DATA.TRAIN`` (``DATA.TEST`` in a test phase)."""
        import types

        from vissl.trainer.train_steps.standard_train_step import construct_sample_for_model

        data = self.config.DATA.TRAIN if self.trainer.training else self.config.DATA.TEST
        keys = {"input": data.INPUT_KEY_NAMES, "target": data.TARGET_KEY_NAMES}
        return construct_sample_for_model(batch, types.SimpleNamespace(data_and_label_keys=keys))

    @override
    def forward(self, x: Any) -> Any:
        return self.model(x)

    @override
    def training_step(self, sample: dict[str, Any], batch_idx: int) -> torch.Tensor:
        output = self.model(sample["input"])
        return self.criterion(output[0] if len(output) == 1 else output, sample["target"])

    @override
    def validation_step(self, sample: dict[str, Any], batch_idx: int) -> torch.Tensor:
        """VISSL's test phase step (``standard_train_step`` with ``task.train`` False): the loss, without gradients,
        the model in eval mode; the adapter records it and updates the meters, as VISSL's step."""
        output = self.model(sample["input"])
        return self.criterion(output[0] if len(output) == 1 else output, sample["target"])

    @override
    def on_validation_epoch_end(self) -> None:
        """After VISSL's test phase end (the adapter's, which runs first): metrics.json's test meter values to the
        loggers (:meth:`_log_meters`)."""
        task = self._host_task()
        if task is not None:
            self._log_meters(task)

    @override
    def on_before_backward(self, loss: torch.Tensor) -> None:
        """Keep the step's loss as VISSL's ``last_batch.loss`` holds it (averaged over ranks by the adapter; this
        rank's loss without one): after a phase's last batch the adapter's phase end has cleared ``last_batch``
        before :meth:`on_train_batch_end` logs it."""
        task = self._host_task()
        last = None if task is None else task.last_batch
        self._step_loss = loss.detach() if last is None or last.loss is None else last.loss

    @override
    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        """What VISSL's logging hooks write, to ``trainer.loggers`` at VISSL's steps (no TensorBoard hook needed):
        at LogLossLrEtaHook's iterations (the first, every ``LOG_FREQUENCY``, every 5 up to 100) the step's loss
        (averaged over ranks, as VISSL's ``last_batch.loss``) and its LR, stdout.json's ``loss`` and ``lr``, as
        ``train/loss`` and ``train/lr`` at stdout.json's ``iter`` (``task.iteration`` as LogLossLrEtaHook reads it:
        the iterations before this one, from 0); after a train phase's last batch (its phase end has run; a resumed
        phase's is its sampler's skipped batches early: :func:`ends_train_phase` with the count read at
        :meth:`on_train_epoch_start`, since the adapter's phase end, which runs first, sets the sampler's back to 0),
        the meters' values of ``metrics.json`` (:meth:`_log_meters`)."""
        task = self._host_task()
        iteration = (int(task.iteration) if task is not None else self.trainer.global_step) - 1  # counted after on_update
        if _logging_iteration(iteration, int(self.config.LOG_FREQUENCY)):
            loss = outputs["loss"] if self._step_loss is None else self._step_loss
            lr = self.classy_optimizer.optimizer.param_groups[0]["lr"]
            self.log_dict({"train/loss": loss, "train/lr": lr}, on_step=True, on_epoch=False, batch_size=1, logger=False)
            values = {"train/loss": float(loss), "train/lr": float(lr)}
            for logger in self.trainer.loggers:
                logger.log_metrics(values, step=iteration)
        if task is not None and ends_train_phase(self.trainer, batch_idx, self._skipped):
            self._log_meters(task)

    def _host_task(self) -> Any:
        """The task facade of the ClassyAdapter training this module (None without one)."""
        adapter = next((cb for cb in self.trainer.callbacks if isinstance(cb, ClassyAdapter)), None)  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        return None if adapter is None else adapter.task

    def _log_meters(self, task: Any) -> None:
        """What LogLossMetricsCheckpointHook writes to ``metrics.json`` at a phase end: each meter's value under
        ``{phase}_{meter.name}`` (train phases only with ``METERS.enable_training_meter``), its nested values joined
        by ``/`` (``train_accuracy_list_meter/top_1/res5``), to the loggers at the line's ``train_phase_idx``; and
        (not for the loggers) to ``callback_metrics``, for callbacks that monitor them."""
        phase = "train" if task.train else "test"
        if task.train and not self.config.METERS.get("enable_training_meter", True):
            return
        values: dict[str, float] = {}
        for meter in task.meters:
            values.update(_flat(f"{phase}_{meter.name}", meter.value))
        if not values:
            return
        self.log_dict(values, on_step=False, on_epoch=True, batch_size=1, logger=False)
        for logger in self.trainer.loggers:
            logger.log_metrics(values, step=int(task.train_phase_idx))

    @override
    def configure_optimizers(self) -> torch.optim.Optimizer:
        """VISSL's optimizer and param groups (``get_optimizer_param_groups``); the adapter applies its schedulers
        through ``self.classy_optimizer``."""
        import vissl.optimizers  # noqa: F401  (registers VISSL's optimizers)
        from classy_vision.optim import build_optimizer, build_optimizer_schedulers
        from vissl.optimizers import get_optimizer_param_groups

        optimizer_config = self.config.OPTIMIZER
        if optimizer_config.get("use_larc") and optimizer_config.name != "sgd_fsdp":
            _check_apex("OPTIMIZER.use_larc")
        self.classy_optimizer = build_optimizer(optimizer_config)
        schedulers = build_optimizer_schedulers(optimizer_config)
        groups = get_optimizer_param_groups(self.model, self.config.MODEL, optimizer_config, schedulers)
        self.classy_optimizer.set_param_groups(groups)
        return closure_step(self.classy_optimizer.optimizer)


def closure_step(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """``optimizer``, whose ``step`` takes Lightning's ``closure``: VISSL's LARS (``OPTIMIZER.name=lars``, Barlow
    Twins) steps without one (``step(self)``), as VISSL's train step calls it after the backward; Lightning calls
    ``optimizer.step(closure=...)``, which then runs the forward and backward before the optimizer's own step. An
    optimizer that takes a closure is returned as it is."""
    import inspect

    own_step = optimizer.step
    if "closure" in inspect.signature(own_step).parameters:
        return optimizer

    def step(closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        own_step()
        return loss

    optimizer.step = step  # type: ignore[method-assign]  # the optimizer this module built
    return optimizer


def _logging_iteration(iteration: int, log_freq: int) -> bool:
    """LogLossLrEtaHook's logging iterations: the first, every ``log_freq``, and every 5 up to 100."""
    return iteration == 1 or iteration % log_freq == 0 or (iteration <= 100 and iteration % 5 == 0)


def _flat(name: str, value: Any) -> dict[str, float]:
    """A meter's value (a number, or dicts of numbers as VISSL's list meters give) as ``{name[/key...]: float}``;
    what is not a number (a list, a tensor of several values) is left out."""
    if isinstance(value, dict):
        return {key: number for k, v in value.items() for key, number in _flat(f"{name}/{k}", v).items()}
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    return {name: float(value)} if isinstance(value, (int, float)) and not isinstance(value, bool) else {}


def check_test_phases(config: Any) -> None:
    """VISSL's ``TEST_ONLY`` is refused naming the option and the way out; ``TEST_MODEL``'s test phases are
    Lightning validations, after the train phases VISSL's ``_build_phases`` tests
    (:meth:`VisslConfigModule.on_train_epoch_start`)."""
    if config.TEST_ONLY:
        raise ConfigError(
            "config.TEST_ONLY=true: VISSL's test-only run (OPTIMIZER.num_epochs test phases of the loaded weights, no "
            "training) is not a lightning-hooks train run; evaluate with VISSL's own launcher, or train with "
            "config.TEST_ONLY=false (test phases after each epoch with config.TEST_MODEL=true)."
        )


def init_weights(model: torch.nn.Module, config: Any) -> None:
    """What VISSL's ``_build_model`` does after it builds the model: with ``FEATURE_EVAL_SETTINGS.EVAL_MODE_ON``,
    the trunk frozen (``FREEZE_TRUNK_ONLY``) or the trunk and heads (``FREEZE_TRUNK_AND_HEAD``); then the weights
    of ``MODEL.WEIGHTS_INIT.PARAMS_FILE`` (:func:`check_params_file`) loaded by the model's own
    ``init_model_from_weights_params_file`` (its ``APPEND_PREFIX``, ``REMOVE_PREFIX``, ``SKIP_LAYERS``,
    ``STATE_DICT_KEY_NAME``); a resumed run's checkpoint then replaces them, as VISSL's does."""
    settings = config.MODEL.FEATURE_EVAL_SETTINGS
    if settings.EVAL_MODE_ON and settings.FREEZE_TRUNK_ONLY:
        model.freeze_trunk()  # type: ignore[operator]  # VISSL's BaseSSLMultiInputOutputModel
    elif settings.EVAL_MODE_ON and settings.FREEZE_TRUNK_AND_HEAD:
        model.freeze_head_and_trunk()  # type: ignore[operator]  # VISSL model method
    path = config.MODEL.WEIGHTS_INIT.PARAMS_FILE
    if path:
        from vissl.utils.checkpoint import CheckpointLoader

        checkpoint = CheckpointLoader.load_and_broadcast_init_weights(checkpoint_path=path, device=torch.device("cpu"))
        model.init_model_from_weights_params_file(config, checkpoint)  # type: ignore[operator]  # VISSL model method


def check_trainable(model: torch.nn.Module, config: Any) -> None:
    """A model left with no parameter to train (``FEATURE_EVAL_SETTINGS`` freezing all of it, as VISSL's
    ``quick_knn*`` configs for its nearest-neighbour and feature-extraction tools do) is refused naming the options:
    VISSL's trainer fails at its first backward."""
    if any(parameter.requires_grad for parameter in model.parameters()):
        return
    settings = config.MODEL.FEATURE_EVAL_SETTINGS
    flags = ", ".join(f"{name}={settings.get(name)}" for name in ("EVAL_MODE_ON", "FREEZE_TRUNK_ONLY",
                      "FREEZE_TRUNK_AND_HEAD", "EXTRACT_TRUNK_FEATURES_ONLY"))  # fmt: skip  # the four flags
    raise ConfigError(
        f"config.MODEL.FEATURE_EVAL_SETTINGS ({flags}) leaves no parameter of the model to train: a config for "
        "VISSL's feature extraction or nearest-neighbour evaluation (tools/nearest_neighbor_test.py), not for "
        "training (VISSL's trainer fails at its first backward); run it with VISSL's tools, or unfreeze the heads "
        "(config.MODEL.FEATURE_EVAL_SETTINGS.FREEZE_TRUNK_AND_HEAD=false)."
    )


def check_amp_type(config: Any) -> None:
    """``MODEL.AMP_PARAMS.USE_AMP`` with an ``AMP_TYPE`` other than ``pytorch`` (VISSL's default is ``apex``) is
    refused, naming the option, why and the way out: VISSL hands Apex's ``amp.initialize`` the config's ``AMP_ARGS``
    (``opt_level`` O1 casts per torch function, O2 / O3 cast the model itself to fp16, O2 with fp32 master weights);
    Lightning 2 has no Apex plugin, and its ``precision="16-mixed"`` (autocast and a ``GradScaler``) is what VISSL
    runs for ``AMP_TYPE: pytorch`` only, so mapping Apex onto it would train with other numerics without a word."""
    amp = config.MODEL.get("AMP_PARAMS", {})
    amp_type = amp.get("AMP_TYPE", "apex")
    if not amp.get("USE_AMP") or str(amp_type).lower() == "pytorch":
        return
    args = dict(amp.get("AMP_ARGS") or {})
    raise ConfigError(
        f"config.MODEL.AMP_PARAMS.AMP_TYPE={amp_type} with USE_AMP=true: VISSL trains AMP_TYPE apex (its default) "
        f"with NVIDIA Apex's amp.initialize (AMP_ARGS {args}), which Lightning 2 has no precision plugin for, and "
        "Lightning's mixed precision (autocast and a GradScaler, precision=16-mixed) differs in numerics from "
        "Apex's O1 / O2 / O3; it is VISSL's AMP_TYPE=pytorch: set config.MODEL.AMP_PARAMS.AMP_TYPE=pytorch (or "
        "config.MODEL.AMP_PARAMS.USE_AMP=false)."
    )


def check_amp_device(config: Any) -> None:
    """``MODEL.AMP_PARAMS.USE_AMP`` off a GPU is refused, naming the options, as VISSL's task asserts (its mixed
    precision is CUDA's); Lightning would train in CPU mixed precision instead (``quick_simclr_pytorch_amp`` with
    ``config.MACHINE.DEVICE=cpu``)."""
    if config.MODEL.get("AMP_PARAMS", {}).get("USE_AMP") and config.MACHINE.DEVICE != "gpu":
        raise ConfigError(
            f"config.MODEL.AMP_PARAMS.USE_AMP=true with config.MACHINE.DEVICE={config.MACHINE.DEVICE}: VISSL's mixed "
            "precision runs on CUDA only (its trainer refuses it elsewhere); set config.MODEL.AMP_PARAMS.USE_AMP=false, "
            "or train on a GPU (config.MACHINE.DEVICE=gpu)."
        )


def check_params_file(config: Any) -> None:
    """A ``MODEL.WEIGHTS_INIT.PARAMS_FILE`` that does not exist is refused, naming the option, as VISSL's trainer
    asserts before it trains (and not a silent random initialization)."""
    from iopath.common.file_io import g_pathmgr

    path = config.MODEL.WEIGHTS_INIT.PARAMS_FILE
    if path and not g_pathmgr.exists(path):
        raise ConfigError(
            f"config.MODEL.WEIGHTS_INIT.PARAMS_FILE={path!r} does not exist: VISSL initializes the model from it (and "
            "its trainer refuses a missing one); give the path of the weights to start from, or "
            "config.MODEL.WEIGHTS_INIT.PARAMS_FILE='' to train from a random initialization."
        )


def check_fsdp(config: Any) -> None:
    """VISSL's FSDP is refused, naming the option: its ``*_fsdp`` trunks and heads wrap themselves in fairscale's
    ``FullyShardedDataParallel`` as they are built, for its ``self_supervision_fsdp_task`` and ``sgd_fsdp``."""
    heads = config.MODEL.HEAD.PARAMS or []
    names = {"TRAINER.TASK_NAME": config.TRAINER.TASK_NAME, "MODEL.TRUNK.NAME": config.MODEL.TRUNK.NAME,
             "OPTIMIZER.name": config.OPTIMIZER.name,
             **{f"MODEL.HEAD.PARAMS[{i}]": head[0] for i, head in enumerate(heads) if head}}  # fmt: skip  # the dict's last key under its first
    for option, name in names.items():
        if "fsdp" in str(name):
            raise ConfigError(
                f"config.{option}={name}: VISSL's FSDP wraps the trunk and heads in fairscale's "
                "FullyShardedDataParallel as it builds them, for its own FSDP task; Lightning shards with torch's FSDP "
                "around the whole LightningModule and cannot take a model fairscale already wrapped. Use the names "
                "without _fsdp (regnet, swav_head, self_supervision_task, sgd) and --devices N (DDP), or train this "
                "config with VISSL's own launcher."
            )


def _check_apex(option: str) -> None:
    import importlib.util

    if importlib.util.find_spec("apex") is None:
        raise ConfigError(
            f"config.{option}: VISSL needs NVIDIA Apex for it (its trainer asserts the same); set "
            f"config.{option}=false, or install Apex."
        )
