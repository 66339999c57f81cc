"""VISSL's real ``SelfSupervisionTrainer`` and ``ClassyAdapter`` under Lightning, on the same VISSL config.

Runs in a subprocess (``real_torchvision.activate()`` first; see tests/families/classy/test_vissl_trainer.py). A scenario composes
one of VISSL's own test configs with VISSL's hydra plugin, shrunk for CPU (a one-block ViT on 32x32 synthetic images,
deterministic transforms, a constant LR), runs it under Lightning and under VISSL's trainer, and returns what the
hooks saw and wrote in each: :class:`Recorder`'s per-mount values, ``stdout.json``, ``metrics.json``, the checkpoint
files, and the final model and loss state. Both runs build the model, the loss and the data with VISSL's own
builders from the same seed, so the values agree bitwise when the adapter drives the hooks as VISSL does.

The Lightning side is the LightningModule a VISSL user writes (:class:`VisslModule`): ``self.model`` is VISSL's
model (the adapter finds it by its trunk and heads), the loss is built in ``setup`` and named by ``loss=``.
"""

from __future__ import annotations

import json
import os
import types
from pathlib import Path
from typing import Any

import lightning as L
import torch
from classy_vision.hooks import ClassyHook

from lightning_hooks import ClassyAdapter
from lightning_hooks.families.classy.vissl import compose as compose_vissl

#: VISSL's CPU test config, which every scenario starts from.
BASE = "config=test/cpu_test/test_cpu_regnet_moco"
TINY = [
    "config.DATA.TRAIN.DATA_LIMIT=8",
    "config.DATA.TRAIN.RANDOM_SYNTHETIC_IMAGES=true",
    "config.DATA.TRAIN.DEFAULT_GRAY_IMG_SIZE=32",
    "config.DATA.TRAIN.TRANSFORMS=[{name: ImgReplicatePil, num_times: 2}, {name: ToTensor}]",
    "config.OPTIMIZER.num_epochs=2",
    "config.OPTIMIZER.param_schedulers.lr.auto_lr_scaling.auto_scale=false",
    "config.OPTIMIZER.param_schedulers.lr.name=constant",
    "config.OPTIMIZER.param_schedulers.lr.value=0.03",
    "config.MODEL.TRUNK.NAME=vision_transformer",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.IMAGE_SIZE=32",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.PATCH_SIZE=16",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.NUM_LAYERS=1",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.NUM_HEADS=2",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.HIDDEN_DIM=32",
    "config.MODEL.TRUNK.VISION_TRANSFORMERS.MLP_DIM=64",
    "config.CHECKPOINT.CHECKPOINT_FREQUENCY=1",
    "config.CHECKPOINT.CHECKPOINT_ITER_FREQUENCY=3",
    "config.HOOKS.PERF_STATS.ROLLING_BTIME_FREQ=2",
    "config.LOG_FREQUENCY=1",
    "config.DISTRIBUTED.INIT_METHOD=file",
]
#: TINY with VISSL's schedules instead of its constant LR: the trunk's LR a linear warmup then a cosine, per step; the
#: head's its own multistep LR per epoch (``use_different_lr``); the weight decay a cosine per step.
SCHEDULED = [x for x in TINY if not x.startswith(("config.OPTIMIZER.param_schedulers.lr.name",
                                                  "config.OPTIMIZER.param_schedulers.lr.value"))] + [
    "config.OPTIMIZER.param_schedulers.lr.name=composite",
    "config.OPTIMIZER.param_schedulers.lr.schedulers=[{name: linear, start_value: 0.01, end_value: 0.1},"
    " {name: cosine, start_value: 0.1, end_value: 0.001}]",
    "config.OPTIMIZER.param_schedulers.lr.interval_scaling=[rescaled, fixed]",
    "config.OPTIMIZER.param_schedulers.lr.lengths=[0.25, 0.75]",
    "config.OPTIMIZER.param_schedulers.lr.update_interval=step",
    "config.OPTIMIZER.head_optimizer_params.use_different_lr=true",
    "config.OPTIMIZER.param_schedulers.lr_head.name=multistep",
    "config.OPTIMIZER.param_schedulers.lr_head.values=[0.2, 0.02]",
    "config.OPTIMIZER.param_schedulers.lr_head.milestones=[1]",
    "config.OPTIMIZER.param_schedulers.lr_head.update_interval=epoch",
    "+config.OPTIMIZER.param_schedulers.weight_decay={name: cosine, start_value: 0.0001, end_value: 0.001,"
    " update_interval: step}",
]  # fmt: skip
SWAV_HEAD = "config.MODEL.HEAD.PARAMS=[[swav_head, {dims: [32, 32, 16], use_bn: false, num_clusters: [10]}]]"
LOSSES: dict[str, list[str]] = {
    "moco": [
        "config.MODEL.HEAD.PARAMS=[[mlp, {dims: [32, 16]}]]",
        "config.LOSS.moco_loss.embedding_dim=16",
        "config.LOSS.moco_loss.queue_size=32",
    ],
    "swav": [
        SWAV_HEAD,
        "config.DATA.TRAIN.COLLATE_FUNCTION=multicrop_collator",
        "config.LOSS.name=swav_loss",
        "config.LOSS.swav_loss.queue.queue_length=0",
        "config.LOSS.swav_loss.num_crops=2",
        "config.LOSS.swav_loss.crops_for_assign=[0,1]",
        "config.MODEL.TEMP_FROZEN_PARAMS_ITER_MAP=[[module.heads.0.prototypes0.weight, 3]]",
    ],
    "swav_momentum": [
        SWAV_HEAD,
        "config.DATA.TRAIN.COLLATE_FUNCTION=multicrop_collator",
        "config.LOSS.name=swav_momentum_loss",
        "config.LOSS.swav_momentum_loss.num_crops=2",
        "config.LOSS.swav_momentum_loss.crops_for_assign=[0,1]",
    ],
    "dino": [
        "config.MODEL.HEAD.PARAMS=[[swav_head, {use_weight_norm_prototypes: false, dims: [32, 32, 16], use_bn: false,"
        " return_embeddings: false, activation_name: GELU, num_clusters: [12]}]]",
        "config.DATA.TRAIN.COLLATE_FUNCTION=multicrop_collator",
        # DINO's config takes its crop count from ImgPilToMultiCrop, whose crops draw random numbers: one batch per
        # phase keeps the draws in VISSL's order (Lightning fetches a phase's next batch before the step runs)
        "config.DATA.TRAIN.DATA_LIMIT=4",
        "config.DATA.TRAIN.TRANSFORMS=[{name: ImgPilToMultiCrop, total_num_crops: 2, size_crops: [32], num_crops: [2],"
        " crop_scales: [[0.5, 1]]}, {name: ToTensor}]",
        "config.LOSS.name=dino_loss",
        "config.LOSS.dino_loss.teacher_temp_warmup_iters=2",
        "config.MODEL.TRUNK.VISION_TRANSFORMERS.DROP_PATH_RATE=0.0",
    ],
}


def compose(out: Path, overrides: list[str]) -> Any:
    """VISSL's config composed as its command line does, writing into ``out``."""
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict

    out.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(out)  # convert_to_attrdict saves train_config.yaml into the working directory
    try:
        _, config = convert_to_attrdict(compose_hydra_configuration([BASE, f"config.CHECKPOINT.DIR={out}", *overrides]))
    finally:
        os.chdir(cwd)
    return config


class Recorder(ClassyHook):
    """What a VISSL hook can read from ``task`` at each mount point (no times: they differ between runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, ...]] = []

    def on_start(self, task: Any) -> None:
        self.seen.append(("on_start", task.iteration, task.batches, task.local_iteration_num, task.phase_idx,
                          task.train_phase_idx, len(task.batch_time), task.perf_stats is None))  # fmt: skip

    def on_phase_start(self, task: Any) -> None:
        self.seen.append(("on_phase_start", task.phase_idx, task.train_phase_idx, task.batches,
                          task.local_iteration_num, task.train, len(task.batch_time), options(task)))  # fmt: skip

    def on_forward(self, task: Any) -> None:
        output = task.last_batch.model_output
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else [tuple(o.shape) for o in output]
        self.seen.append(("on_forward", type(output).__name__, shape, sorted(task.last_batch.sample)))

    def on_loss_and_meter(self, task: Any) -> None:
        self.seen.append(("on_loss_and_meter", task.last_batch.loss.item(), list(task.losses), task.iteration))

    def on_backward(self, task: Any) -> None:
        grads = [p.grad.norm().item() for p in task.base_model.parameters() if p.grad is not None]
        self.seen.append(("on_backward", len(grads), sum(grads)))

    def on_update(self, task: Any) -> None:
        self.seen.append(("on_update", task.iteration, task.num_updates, task.where, options(task)))

    def on_step(self, task: Any) -> None:
        self.seen.append(("on_step", task.iteration, task.batches, task.local_iteration_num, len(task.batch_time),
                          task.num_updates, task.max_iteration))  # fmt: skip

    def on_phase_end(self, task: Any) -> None:
        stats = task.perf_stats
        timers = None if stats is None else {name: m.num_updates for name, m in stats._host_stats.items()}
        self.seen.append(("on_phase_end", task.phase_idx, list(task.losses), timers, len(task.batch_time)))

    def on_end(self, task: Any) -> None:
        self.seen.append(("on_end", task.iteration, task.phase_idx, task.train_phase_idx))


def options(task: Any) -> tuple[Any, ...]:
    """Every param group's scheduled options (exact floats) and ``options_view.lr``, as hooks read them."""
    groups = [(group["lr"], group["weight_decay"]) for group in task.optimizer.param_groups]
    return (groups, task.optimizer.options_view.lr)


def vissl_loader(config: Any, split: str) -> Any:
    """The ``split`` (``"TRAIN"``, ``"TEST"``) loader VISSL's builders make from ``config``, in this process, on CPU."""
    from vissl.data import build_dataloader, build_dataset

    return build_dataloader(
        dataset=build_dataset(config, split),
        dataset_config=config.DATA[split],
        num_dataloader_workers=0,
        pin_memory=False,
        multi_processing_method=config.MULTI_PROCESSING_METHOD,
        device=torch.device("cpu"),
        sampler_seed=config.SEED_VALUE,
        split=split.lower(),
    )


class VisslModule(L.LightningModule):
    """A VISSL model, loss and data in a LightningModule, built with VISSL's own builders from its config (a composed
    ``AttrDict`` or VISSL's command-line overrides)."""

    def __init__(self, config: Any) -> None:
        from vissl.models import build_model

        super().__init__()
        self.config = config = compose_vissl(config)
        self.model = build_model(config.MODEL, config.OPTIMIZER)

    def setup(self, stage: str) -> None:
        import vissl.losses  # noqa: F401  (registers VISSL's losses)
        from classy_vision.losses import build_loss

        name = self.config.LOSS.name
        self.config.LOSS[name]["name"] = name
        self.criterion = build_loss(self.config.LOSS[name])  # after the adapter set Classy's device, as VISSL does

    def train_dataloader(self) -> Any:
        return vissl_loader(self.config, "TRAIN")

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        from vissl.trainer.train_steps.standard_train_step import construct_sample_for_model

        keys = {"input": self.config.DATA.TRAIN.INPUT_KEY_NAMES, "target": self.config.DATA.TRAIN.TARGET_KEY_NAMES}
        return construct_sample_for_model(batch, types.SimpleNamespace(data_and_label_keys=keys))

    def training_step(self, sample: dict[str, Any], batch_idx: int) -> torch.Tensor:
        output = self.model(sample["input"])
        return self.criterion(output[0] if len(output) == 1 else output, sample["target"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        import vissl.optimizers  # noqa: F401  (registers VISSL's optimizers)
        from classy_vision.optim import build_optimizer, build_optimizer_schedulers
        from vissl.optimizers import get_optimizer_param_groups

        # the adapter finds the ClassyOptimizer here and applies VISSL's param schedulers as VISSL's trainer does
        self.classy_optimizer = build_optimizer(self.config.OPTIMIZER)
        schedulers = build_optimizer_schedulers(self.config.OPTIMIZER)
        groups = get_optimizer_param_groups(self.model, self.config.MODEL, self.config.OPTIMIZER, schedulers)
        self.classy_optimizer.set_param_groups(groups)
        return self.classy_optimizer.optimizer


class TestedModule(VisslModule):
    """A :class:`VisslModule` that validates (VISSL's ``TEST_MODEL`` test phases): ``DATA.TEST`` through VISSL's
    builders, the loss of each batch as the validation step's."""

    def val_dataloader(self) -> Any:
        return vissl_loader(self.config, "TEST")

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        from vissl.trainer.train_steps.standard_train_step import construct_sample_for_model

        split = self.config.DATA.TRAIN if self.trainer.training else self.config.DATA.TEST
        keys = {"input": split.INPUT_KEY_NAMES, "target": split.TARGET_KEY_NAMES}
        return construct_sample_for_model(batch, types.SimpleNamespace(data_and_label_keys=keys))

    def validation_step(self, sample: dict[str, Any], batch_idx: int) -> torch.Tensor:
        output = self.model(sample["input"])  # not through training_step: the adapter's step rows fire once a step
        return self.criterion(output[0] if len(output) == 1 else output, sample["target"])


class ForgetfulModule(VisslModule):
    """Returns the ClassyOptimizer's torch optimizer but keeps no ClassyOptimizer (the docs' example before)."""

    def configure_optimizers(self) -> torch.optim.Optimizer:
        optimizer = super().configure_optimizers()
        del self.classy_optimizer
        return optimizer


class TwoSchedulesModule(VisslModule):
    """Adds a Lightning LR scheduler to VISSL's param schedulers."""

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = super().configure_optimizers()
        return {"optimizer": optimizer, "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1)}


class Poison(ClassyHook):
    """Puts a NaN into the model's first parameter (``model``) or the loss's ``queue`` after the second update."""

    on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = ClassyHook._noop
    on_step = on_phase_end = on_end = ClassyHook._noop

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    @torch.no_grad()
    def on_update(self, task: Any) -> None:
        if task.iteration == 1:
            tensor = next(task.base_model.parameters()) if self.target == "model" else task.loss.queue
            tensor.view(-1)[0] = float("nan")


def run_lightning(
    config: Any, extra: list[Any] = (), module: type[VisslModule] = VisslModule, callbacks: list[Any] = (),
    ckpt_path: str | None = None, **adapter: Any,
) -> dict[str, Any]:
    """Fit ``module`` (:class:`VisslModule`) with VISSL's hooks for ``config`` (and a Recorder) under Lightning, from
    ``ckpt_path`` when given; ``callbacks`` go to the Trainer. The result also has the Lightning epochs that ran and the
    final ``global_step``."""
    from vissl.utils.misc import set_seeds

    set_seeds(config, 0)
    recorder, module = Recorder(), module(config)
    callback = ClassyAdapter([*extra, recorder], vissl=config, loss="criterion", **adapter)
    trainer = L.Trainer(
        max_epochs=config.OPTIMIZER.num_epochs, callbacks=[callback, *callbacks], accelerator="cpu", logger=False,
        enable_checkpointing=bool(callbacks), enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0,
    )  # fmt: skip
    epochs_run: list[int] = []
    module.on_train_epoch_start = lambda: epochs_run.append(module.current_epoch)
    error = _run(lambda: trainer.fit(module, ckpt_path=ckpt_path))
    result = _result(config, recorder, callback.hooks, module.model, module.criterion, error)
    return {**result, "epochs": epochs_run, "global_step": trainer.global_step}


def run_vissl(config: Any, checkpoint: str | None = None, extra: list[Any] = ()) -> dict[str, Any]:
    """VISSL's own trainer, as ``tools/run_distributed_engines.py`` runs it on one CPU process."""
    import classy_vision.generic.distributed_util as classy_dist
    from vissl.hooks import default_hook_generator
    from vissl.trainer import SelfSupervisionTrainer
    from vissl.utils.env import set_env_vars
    from vissl.utils.misc import set_seeds

    environ = dict(os.environ)
    set_env_vars(0, 0, config)  # VISSL's train engine sets WORLD_SIZE, RANK and LOCAL_RANK before its trainer
    set_seeds(config, 0)
    recorder = Recorder()
    hooks = [*default_hook_generator(config), *extra, recorder]
    rendezvous = Path(config.CHECKPOINT.DIR) / "rendezvous"
    try:
        trainer = SelfSupervisionTrainer(config, str(rendezvous), checkpoint, config.CHECKPOINT.DIR, hooks)
        try:
            error = _run(trainer.train)
            return _result(config, recorder, hooks, trainer.task.base_model, trainer.task.loss, error)
        finally:  # leave the process as it was, for the next run
            torch.distributed.destroy_process_group()
            classy_dist._cuda_device_index = 0
    finally:
        os.environ.clear()
        os.environ.update(environ)


def _run(fn: Any) -> str | None:
    try:
        fn()
    except Exception as error:  # noqa: BLE001  (compared between the runs)
        return f"{type(error).__name__}: {error}"
    return None


def _result(config: Any, recorder: Recorder, hooks: list[Any], model: Any, loss: Any, error: str | None) -> dict:
    folder = Path(config.CHECKPOINT.DIR)
    for hook in hooks:  # LogLossLrEtaHook writes stdout.json through a buffered file
        if getattr(hook, "json_stdout_logger", None) is not None:
            hook.json_stdout_logger.flush()
    dumps = {p.name: torch.load(p, weights_only=False) for p in folder.glob("rank0_*.pth")}
    return {
        "error": error,
        "dumps": dumps,
        "hooks": [type(hook).__name__ for hook in hooks if hook is not recorder],
        "seen": recorder.seen,
        "stdout": _json_lines(folder / "stdout.json"),
        "metrics": _json_lines(folder / "metrics.json"),
        "files": sorted(p.name for p in folder.glob("*.torch")),
        "checkpoints": {p.name: torch.load(p, weights_only=False) for p in folder.glob("model_*.torch")},
        "model": {k: v.clone() for k, v in model.state_dict().items()},
        "loss": {k: v.clone() for k, v in loss.state_dict().items()},
        "group_left": torch.distributed.is_initialized(),
        "folder": str(folder),
    }


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
