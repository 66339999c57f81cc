"""``lightning-hooks train CONFIG.py`` for OpenMMLab 1.x configs: mmcls 0.x / mmdet 2.x / mmseg 0.x ``tools/train.py``
under Lightning.

The command does what those scripts do (config, ``--cfg-options``, work dir, seed, model from ``cfg.model`` with its
``init_weights``, datasets from ``cfg.data.train``, ``meta``) and then calls the library's own ``train_model`` /
``train_detector`` / ``train_segmentor``, so the data loaders, the optimizer (``build_optimizer``), the hooks
(``register_training_hooks(cfg.lr_config, cfg.optimizer_config, ...)``, the eval hook from ``cfg.evaluation``) and
``load_from`` are built by the library's code. Only the runner differs: the ``build_runner`` that function calls
returns a :class:`LightningRunner`, which collects what the function registers on it and, at ``runner.run(loaders,
workflow)``, trains with ``lightning.Trainer`` and an :class:`MMCVAdapter` holding those hooks.

This module imports no mmcv until a command runs (:mod:`lightning_hooks.core.config_kind` tells its configs).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import os
import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lightning_hooks.core.errors import ConfigError, unknown_name

USAGE = ("CONFIG.py [--work-dir DIR] [--cfg-options KEY=VALUE ...] [--no-validate] [--seed N] [--diff-seed] "
         "[--deterministic] [--load-from CKPT] [--resume-from CKPT] [--auto-resume] [--accelerator A]")  # fmt: skip

@dataclass(frozen=True)
class Library:
    """One OpenMMLab 1.x library whose ``tools/train.py`` the command stands in for.

    Args:
        package: its import name (``"mmcls"``).
        builder: ``module:function`` that builds ``cfg.model`` (``"mmcls.models:build_classifier"``).
        train: ``module:function`` of its training API (``"mmcls.apis.train:train_model"``), whose module's
            ``build_runner`` is replaced while it runs.
        classes: the dataset attributes its ``tools/train.py`` records (``CLASSES``, ``PALETTE``).
        in_checkpoint_config: whether that script records them (with its version) in ``checkpoint_config.meta``
            (mmdet, mmseg) rather than in ``meta`` (mmcls, which also records the config there).
        auto_resume: where that script sets ``cfg.auto_resume`` (to its ``--auto-resume`` flag, always) relative to
            ``cfg.gpu_ids``: ``"before"`` (mmdet), ``"after"`` (mmseg), or ``""`` where it has no such flag (mmcls).
        version_separator: between the version and the git hash in the recorded version (mmdet: none).
        ddp: the name its training API wraps a distributed model with (in ``train``'s module).
    """

    package: str
    builder: str
    train: str
    classes: tuple[str, ...] = ("CLASSES",)
    in_checkpoint_config: bool = True
    auto_resume: str = "after"
    version_separator: str = "+"
    ddp: str = "build_ddp"

    def function(self, path: str) -> Any:
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)

    def owns(self, model_type: str) -> bool:
        """Whether ``model_type`` is in this library's own model registry (installed libraries only)."""
        if importlib.util.find_spec(self.package) is None:
            return False
        try:
            importlib.import_module(f"{self.package}.models")  # registers its models
        except ImportError:  # e.g. mmdet's models without mmcv's compiled ops (mmcv._ext)
            return False
        registry = importlib.import_module(f"{self.package}.models.builder").MODELS
        return model_type in registry.module_dict


#: the libraries, in the order a model type is looked up
LIBRARIES = (
    Library("mmcls", "mmcls.models:build_classifier", "mmcls.apis.train:train_model", in_checkpoint_config=False,
            auto_resume="", ddp="wrap_distributed_model"),
    Library("mmdet", "mmdet.models:build_detector", "mmdet.apis.train:train_detector", auto_resume="before",
            version_separator=""),
    Library("mmseg", "mmseg.models:build_segmentor", "mmseg.apis.train:train_segmentor", classes=("CLASSES", "PALETTE")),
)


def parser() -> argparse.ArgumentParser:
    """The arguments of mmcls / mmdet / mmseg ``tools/train.py``, with Lightning's instead of ``--launcher`` and the
    GPU selection."""
    from lightning_hooks.core.family import add_lightning_arguments

    try:
        from mmcv import DictAction
        from mmcv.runner import BaseRunner  # noqa: F401  mmcv 2.x (and mmcv-lite) has no runner
    except ImportError as err:
        raise RuntimeError(
            "lightning-hooks train: this is an OpenMMLab 1.x config (runner=, lr_config=, optimizer_config=, ...), "
            f"which needs mmcv 1.x with mmcv.runner and its library (mmcls 0.x, mmdet 2.x, mmseg 0.x): {err}"
        ) from err

    p = argparse.ArgumentParser(prog="lightning-hooks train",
                                description="Train an OpenMMLab 1.x config under Lightning, as tools/train.py does.")  # fmt: skip
    p.add_argument("config", help="train config file path")
    p.add_argument("--work-dir", help="the dir to save logs and models (default: work_dirs/<config name>)")
    p.add_argument("--load-from", help="the checkpoint file to load weights from")
    p.add_argument("--resume-from", help="the checkpoint file to resume from")
    p.add_argument("--auto-resume", action="store_true",
                   help="resume from the latest checkpoint in the work dir (latest.pth, else the highest numbered)")
    p.add_argument("--no-validate", action="store_true", help="do not evaluate checkpoints during training")
    p.add_argument("--seed", type=int, default=None, help="random seed")
    p.add_argument("--diff-seed", action="store_true", help="a different seed for each process (seed + rank)")
    p.add_argument("--deterministic", action="store_true", help="deterministic options for the CUDNN backend")
    p.add_argument("--cfg-options", nargs="+", action=DictAction,
                   help="override config settings, KEY=VALUE pairs merged into the config")  # fmt: skip
    add_lightning_arguments(p, precision=False)
    return p


def load_config(args: argparse.Namespace) -> Any:
    """The config as ``tools/train.py`` makes it: ``--cfg-options`` merged, then the work dir and checkpoint flags."""
    from mmcv import Config
    from mmcv.utils import import_modules_from_strings

    from lightning_hooks.core.family import apply_config_flags
    from lightning_hooks.core.project_imports import import_project

    cfg = Config.fromfile(args.config, import_custom_modules=False)
    import_project(cfg, args.config, import_modules_from_strings)  # the project's modules, from the current folder
    cfg = apply_config_flags(cfg, args)
    if args.load_from is not None:
        cfg.load_from = args.load_from
    if args.resume_from is not None:
        cfg.resume_from = args.resume_from
    records = library_of(cfg).auto_resume
    if records == "before" or (args.auto_resume and not records):
        cfg.auto_resume = args.auto_resume
    cfg.gpu_ids = [0]  # the scripts' --gpu-id default; Lightning's --devices picks the devices
    if records == "after":
        cfg.auto_resume = args.auto_resume
    return cfg


def library_of(cfg: Any) -> Library:
    """The installed library whose model registry has ``cfg.model.type``."""
    kind = cfg.model.get("type")
    for library in LIBRARIES:
        if library.owns(kind):
            return library
    installed = [lib.package for lib in LIBRARIES if importlib.util.find_spec(lib.package) is not None]
    raise ConfigError(
        f"model.type: {kind!r} is in the model registry of none of the installed OpenMMLab 1.x libraries "
        f"({', '.join(installed) or 'none installed'}; lightning-hooks train knows {', '.join(lib.package for lib in LIBRARIES)}). "
        "Install the library the config is written for (its models must import: mmdet's need mmcv-full's ops), "
        "or import the module that registers the model "
        "(custom_imports = dict(imports=[...]) in the config)."
    )


class LightningRunner:
    """What the library's training API sees as its runner: it collects the hooks registered on it (mmcv's own
    ``register_*`` methods), and its ``run(data_loaders, workflow)`` trains under Lightning (:func:`fit`).

    Built by the ``build_runner`` that :func:`train` hands the training API: ``cfg`` is mmcv's ``runner`` config
    (``type``, ``max_epochs`` / ``max_iters``); the other arguments are ``build_runner``'s ``default_args``.
    """

    def __init__(self, cfg: dict[str, Any], model: Any, optimizer: Any = None, work_dir: str | None = None,
                 logger: Any = None, meta: dict[str, Any] | None = None, batch_processor: Any = None,
                 trainer_options: dict[str, Any] | None = None) -> None:  # fmt: skip
        from lightning_hooks.families.mmcv.runner import RUNNERS

        self.runner_cfg = dict(cfg)
        if self.runner_cfg.get("type") not in RUNNERS:
            unknown = unknown_name("runner type", str(self.runner_cfg.get("type")), RUNNERS, listed="Accepted")
            raise ConfigError(f"runner.type: {unknown}")
        if batch_processor is not None:
            raise ConfigError("runner: a batch_processor is not supported; give the model a train_step")
        self.model, self.optimizer, self.logger, self.meta = model, optimizer, logger, meta
        self.work_dir = os.path.abspath(work_dir) if isinstance(work_dir, str) else work_dir  # as mmcv's BaseRunner
        self.timestamp: str | None = None
        self._hooks: list[Any] = []
        self.trainer_options = dict(trainer_options or {})
        self.trainer: Any = None
        #: ``(epoch, iter)`` of the mmcv checkpoint :meth:`resume` loaded, where the fit goes on
        self.resumed_at: tuple[int, int] | None = None

    # mmcv's BaseRunner registration methods, on this runner's hook queue
    def __getattr__(self, name: str) -> Any:
        from mmcv.runner import BaseRunner

        if name.startswith("register_") and hasattr(BaseRunner, name):
            return getattr(BaseRunner, name).__get__(self)
        raise AttributeError(
            f"lightning-hooks' LightningRunner (the runner `lightning-hooks train` hands the OpenMMLab training API) "
            f"has no attribute {name!r}; open an issue naming the training function that reads it."
        )

    @property
    def hooks(self) -> list[Any]:
        return self._hooks

    def load_checkpoint(self, filename: str, map_location: Any = "cpu", strict: bool = False,
                        revise_keys: list | None = None) -> dict[str, Any]:  # fmt: skip
        """``load_from``: mmcv's ``load_checkpoint`` into the model now, as mmcv's runner does; a local file that is
        not a checkpoint is a :class:`~lightning_hooks.core.errors.CheckpointFileError` naming it."""
        from mmcv.runner import load_checkpoint

        from lightning_hooks.core.checkpoint_files import check_checkpoint_file

        check_checkpoint_file(filename, owner="runner.load_checkpoint (load_from / resume_from)")
        return load_checkpoint(self.model, filename, map_location, strict, self.logger,
                               revise_keys=revise_keys if revise_keys is not None else [(r"^module.", "")])  # fmt: skip

    def resume(self, checkpoint: str, resume_optimizer: bool = True, map_location: Any = "default") -> None:
        """mmcv's ``runner.resume`` (``resume_from``) of the runner type: the checkpoint's weights into the model and
        its state into the optimizer now, and the fit goes on after ``meta['epoch']`` / ``meta['iter']``
        (:attr:`resumed_at`). ``EpochBasedRunner``'s also makes the checkpoint's ``meta`` the run's (``hook_msgs``:
        ``last_ckpt``, ``best_score``, ...) and rescales the iteration to the number of GPUs; ``IterBasedRunner``'s
        does neither."""
        import mmcv

        iter_based = self.runner_cfg.get("type") == "IterBasedRunner"
        location = "cpu" if map_location == "default" else map_location  # Lightning moves the module afterwards
        loaded = self.load_checkpoint(checkpoint, map_location=location)
        meta = loaded["meta"]
        epoch, iteration = meta["epoch"], meta["iter"]
        if not iter_based:
            previous_gpus = (mmcv.Config.fromstring(meta["config"], file_format=".py").get("gpu_ids") or []
                             if "config" in meta else [])  # fmt: skip
            if previous_gpus and len(previous_gpus) != 1:  # mmcv rescales the iteration count to this world size
                iteration = int(iteration * len(previous_gpus))
                self.logger.info("the iteration number is changed due to change of GPU number")
            self.meta = meta
        if "optimizer" in loaded and resume_optimizer:
            if isinstance(self.optimizer, dict):
                for key, optimizer in self.optimizer.items():
                    optimizer.load_state_dict(loaded["optimizer"][key])
            else:
                self.optimizer.load_state_dict(loaded["optimizer"])
        self.resumed_at = (epoch, iteration)
        if iter_based:
            self.logger.info(f"resumed from epoch: {epoch}, iter {iteration}")
        else:
            self.logger.info("resumed epoch %d, iter %d", epoch, iteration)

    def run(self, data_loaders: list[Any], workflow: list[tuple[str, int]], max_epochs: int | None = None,
            **kwargs: Any) -> None:  # fmt: skip
        """mmcv's ``runner.run``: train under Lightning with the registered hooks (:func:`fit`)."""
        self.trainer = fit(self, data_loaders, workflow)


def fit(runner: LightningRunner, data_loaders: list[Any], workflow: list[tuple[str, int]]) -> Any:
    """Train ``runner.model`` on ``data_loaders`` under ``lightning.Trainer`` with ``runner``'s hooks in an
    :class:`MMCVAdapter`; ``workflow`` ``[('train', 1)]`` or ``[('train', 1), ('val', 1)]`` (the val loader's
    ``val_step`` as Lightning's validation). Returns the trainer."""
    from lightning_hooks.core import lightning_api
    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.mmcv.adapter import MMCVAdapter
    from lightning_hooks.families.mmcv.distributed import ddp_strategy, distributed_view_class
    from lightning_hooks.families.mmcv.module import MMCVModule

    modes = [mode for mode, _ in workflow]
    if modes not in (["train"], ["train", "val"]) or any(n != 1 for _, n in workflow):
        raise ConfigError(
            f"workflow: {workflow!r} is not supported by lightning-hooks train; write workflow = [('train', 1)] "
            "(evaluation comes from the eval hook, cfg.evaluation) or [('train', 1), ('val', 1)]."
        )
    request = runner.trainer_options.pop("request", None)  # --logger, --trainer.KEY (core/trainer_options.py)
    bridge = None
    if request is not None and request.has_loggers:
        from lightning_hooks.families.mmcv.lightning_logger import LightningLoggerHook

        bridge = LightningLoggerHook.after(runner.hooks)  # the log buffer's scalars to the Trainer's loggers
        runner.register_hook(bridge, priority="VERY_LOW")
    adapter = MMCVAdapter(runner.hooks, runner=runner.runner_cfg, work_dir=runner.work_dir, meta=runner.meta,
                          logger=runner.logger, model="model")  # fmt: skip
    if runner.timestamp is not None:
        adapter.runner.timestamp = runner.timestamp
    if runner.resumed_at is not None:
        adapter.start_after(*runner.resumed_at)
    module = MMCVModule(runner.model, runner.optimizer)
    options: dict[str, Any] = dict(
        default_root_dir=runner.work_dir,
        enable_checkpointing=False,  # CheckpointHook writes the checkpoints
        logger=False,  # the logger hooks log
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,  # the library's build_dataloader shards by rank itself
        limit_val_batches=None if "val" in modes else 0,
    )
    options.update(runner.trainer_options)
    options.update(adapter.trainer_kwargs())
    callbacks = [adapter]
    if request is not None:
        name = os.path.splitext(runner.meta.get("exp_name") or os.path.basename(os.path.abspath(runner.work_dir)))[0]
        options = request.resolve(options, owned_options(runner, adapter), save_dir=runner.work_dir, name=name,
                                  callbacks=callbacks)  # fmt: skip
        callbacks = options.pop("callbacks")
    if isinstance(runner.model, distributed_view_class()):  # the training API wrapped it for several processes
        options["strategy"] = ddp_strategy(options.get("strategy"), runner.model, lightning_api.world_size(**options))
    trainer = pl.Trainer(callbacks=callbacks, **{k: v for k, v in options.items() if v is not None})
    if bridge is not None:
        bridge.trainer = trainer
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        trainer.fit(module, data_loaders[0], data_loaders[1] if "val" in modes else None)
    return trainer


def owned_options(runner: LightningRunner, adapter: Any) -> dict[str, Any]:
    """The ``Trainer`` options the config decides, for :meth:`TrainerRequest.resolve`: ``runner``'s epochs or
    iterations, the work dir, ``checkpoint_config``'s checkpoints, the library's samplers, the optimizer hook's step
    (accumulation, clipping, fp16), and the processes, which start before the Trainer (``--devices`` ...)."""
    from lightning_hooks.core.trainer_options import ANY, Owned

    loop = f"runner={runner.runner_cfg!r} (the config's runner, which Lightning runs as Trainer("
    owned = {key: Owned(value, f"{loop}{key}={value!r}))", "change it with --cfg-options runner.KEY=VALUE")
             for key, value in adapter.trainer_kwargs().items()}  # fmt: skip
    step = "the config's optimizer_config (its OptimizerHook steps the optimizer itself, under manual optimization)"
    owned.update(
        default_root_dir=Owned(runner.work_dir, f"the work dir {runner.work_dir!r}", "set it with --work-dir"),
        enable_checkpointing=Owned(False, "the config's checkpoint_config (CheckpointHook writes the checkpoints)",
                                   "for Lightning's own, add --trainer.callbacks+=lightning.pytorch.callbacks."
                                   "ModelCheckpoint"),  # fmt: skip
        use_distributed_sampler=Owned(False, "the library's build_dataloader, which shards by rank itself"),
        accumulate_grad_batches=Owned(1, step, "accumulate with optimizer_config=dict(type="
                                      "'GradientCumulativeOptimizerHook', cumulative_iters=N)"),  # fmt: skip
        gradient_clip_val=Owned(None, step, "clip with --cfg-options optimizer_config.grad_clip.max_norm=V"),
        gradient_clip_algorithm=Owned(None, step, "clip with --cfg-options optimizer_config.grad_clip.max_norm=V"),
        precision=Owned(None, f"{step}; fp16 = dict(loss_scale=...) in the config is mmcv's mixed precision"),
    )
    for key in ("devices", "num_nodes", "strategy", "accelerator"):
        flag = "--" + key.replace("_", "-")
        owned[key] = Owned(ANY, f"the processes, started before the Trainer is built ({flag})", f"use {flag}")
    return owned


@contextmanager
def lightning_runner(library: Library, trainer_options: dict[str, Any]) -> Iterator[list[LightningRunner]]:
    """Within: the library's training API builds a :class:`LightningRunner` where it calls ``build_runner``, and a
    :class:`~lightning_hooks.families.mmcv.distributed.DistributedView` where it wraps a distributed model; the
    runners it built are appended to the list yielded."""
    from lightning_hooks.families.mmcv.distributed import wrap_distributed

    module = importlib.import_module(library.train.partition(":")[0])
    built: list[LightningRunner] = []

    def build_runner(cfg: dict[str, Any], default_args: dict[str, Any] | None = None) -> LightningRunner:
        built.append(LightningRunner(copy.deepcopy(dict(cfg)), **(default_args or {}), trainer_options=trainer_options))
        return built[-1]

    originals = module.build_runner, getattr(module, library.ddp)
    module.build_runner = build_runner
    setattr(module, library.ddp, wrap_distributed)
    try:
        yield built
    finally:
        module.build_runner = originals[0]
        setattr(module, library.ddp, originals[1])


def train(cfg: Any, *, validate: bool = True, seed: int | None = None, diff_seed: bool = False,
          deterministic: bool = False, timestamp: str | None = None, **trainer_options: Any) -> Any:  # fmt: skip
    """``tools/train.py``'s ``main`` after parsing: the processes (``init_dist``), seed, model, datasets, ``meta``,
    then the library's training API with a :class:`LightningRunner`. Returns the Lightning trainer.
    ``trainer_options`` go to ``lightning.Trainer``; where they ask for several processes, Lightning's DDP launches
    them now (each runs the same command), as ``dist_train.sh`` does before its ``tools/train.py`` builds anything."""
    import mmcv
    import torch

    library = library_of(cfg)
    processes = _start_processes(trainer_options)
    distributed = processes > 1
    if distributed:  # as the scripts record it under their launcher (mmcv's resume rescales the iteration by it)
        cfg.gpu_ids = range(processes)
    apis = importlib.import_module(f"{library.package}.apis")
    datasets_module = importlib.import_module(f"{library.package}.datasets")
    if library.package == "mmcls" and cfg.get("auto_resume") and cfg.get("resume_from") is None:
        cfg.resume_from = latest_checkpoint(cfg.work_dir)  # mmdet's and mmseg's training APIs look it up themselves
    mmcv.mkdir_or_exist(os.path.abspath(cfg.work_dir))
    if cfg.filename:
        cfg.dump(os.path.join(cfg.work_dir, os.path.basename(cfg.filename)))
    timestamp = timestamp or time.strftime("%Y%m%d_%H%M%S", time.localtime())
    # the library's root logger, writing {work_dir}/{timestamp}.log: its training API hands it to the runner
    logger = importlib.import_module(f"{library.package}.utils").get_root_logger(
        log_file=os.path.join(cfg.work_dir, f"{timestamp}.log"), log_level=cfg.get("log_level", "INFO")
    )
    meta = _meta(library, cfg)  # (mmdet: the config before its device)
    device = "cuda" if torch.cuda.is_available() and trainer_options.get("accelerator") not in ("cpu",) else "cpu"
    cfg.device = device
    dash_line = "-" * 60 + "\n"
    logger.info(f"Environment info:\n{dash_line}{meta['env_info']}\n{dash_line}")
    logger.info(f"Distributed training: {distributed}")
    logger.info(f"Config:\n{cfg.pretty_text}")
    seed = apis.init_random_seed(seed, device=device)
    if diff_seed and torch.distributed.is_available() and torch.distributed.is_initialized():
        seed += torch.distributed.get_rank()
    logger.info(f"Set random seed to {seed}, deterministic: {deterministic}")
    apis.set_random_seed(seed, deterministic=deterministic)
    cfg.seed = meta["seed"] = seed
    if library.in_checkpoint_config:
        meta["exp_name"] = os.path.basename(cfg.filename)
    model = library.function(library.builder)(cfg.model, **_builder_cfgs(library, cfg))
    model.init_weights()
    if library.package == "mmseg":  # its script trains without DDP on BN (SyncBN needs a process group)
        from mmcv.cnn.utils import revert_sync_batchnorm

        if not distributed:
            model = revert_sync_batchnorm(model)
        logger.info(model)
    datasets = [datasets_module.build_dataset(cfg.data.train)]
    if len(cfg.workflow) == 2:
        val = copy.deepcopy(cfg.data.val)
        val.pipeline = cfg.data.train.pipeline
        datasets.append(datasets_module.build_dataset(val))
    _record_classes(library, cfg, meta, datasets[0])
    if library.in_checkpoint_config:
        model.CLASSES = datasets[0].CLASSES
    if library.package == "mmseg" and cfg.checkpoint_config is not None:
        meta.update(cfg.checkpoint_config.meta)
    if deterministic:
        trainer_options.setdefault("deterministic", True)
    with lightning_runner(library, trainer_options) as built:
        library.function(library.train)(model, datasets, cfg, distributed=distributed, validate=validate,
                                        timestamp=timestamp, meta=meta, **_device_kwargs(library, device))  # fmt: skip
    return built[-1].trainer


def _start_processes(trainer_options: dict[str, Any]) -> int:
    """The processes the Trainer options ask for, started now under Lightning's DDP launcher, this one joined to
    their process group (``init_dist``); their number. Several processes need ``--strategy ddp`` (or none)."""
    from lightning_hooks.core import lightning_api

    launch = {k: v for k, v in trainer_options.items() if k in ("accelerator", "devices", "num_nodes", "strategy")}
    launch = {k: v for k, v in launch.items() if v is not None}
    if lightning_api.world_size(**{**launch, "strategy": "ddp"}) == 1:
        return 1
    if launch.get("strategy", "auto") not in ("auto", "ddp"):
        from lightning_hooks.families.mmcv.distributed import ddp_strategy

        ddp_strategy(launch["strategy"], None, lightning_api.world_size(**launch))  # raises
    return lightning_api.launch_processes(**{**launch, "strategy": "ddp"})


def latest_checkpoint(work_dir: str) -> str | None:
    """What ``--auto-resume`` resumes from, as mmdet's and mmseg's ``find_latest_checkpoint``: ``latest.pth`` in
    ``work_dir``, else the ``*.pth`` whose name ends in the highest number (``epoch_3.pth``), else None."""
    if os.path.exists(os.path.join(work_dir, "latest.pth")):
        return os.path.join(work_dir, "latest.pth")
    numbered = {}
    for name in os.listdir(work_dir) if os.path.isdir(work_dir) else []:
        count = re.search(r"_(\d+)\.pth$", name)
        if count:
            numbered[int(count.group(1))] = os.path.join(work_dir, name)
    return numbered[max(numbered)] if numbered else None


def _meta(library: Library, cfg: Any) -> dict[str, Any]:
    """The ``meta`` its ``tools/train.py`` starts with: the environment (mmdet: and the config); the seed and (mmdet,
    mmseg) the experiment name follow."""
    env_info = "\n".join(f"{k}: {v}" for k, v in importlib.import_module(f"{library.package}.utils").collect_env().items())
    meta: dict[str, Any] = dict(env_info=env_info)
    if library.package == "mmdet":
        meta["config"] = cfg.pretty_text
    return meta


def _record_classes(library: Library, cfg: Any, meta: dict[str, Any], dataset: Any) -> None:
    """The library version and the dataset's ``CLASSES`` (``PALETTE``), where its ``tools/train.py`` records them."""
    from mmcv.utils import get_git_hash

    package = importlib.import_module(library.package)
    classes = {key: getattr(dataset, key) for key in library.classes}
    if not library.in_checkpoint_config:
        meta.update({f"{library.package}_version": package.__version__, "config": cfg.pretty_text, **classes})
    elif cfg.checkpoint_config is not None:
        extra = {"config": cfg.pretty_text} if library.package == "mmseg" else {}
        version = f"{package.__version__}{library.version_separator}{get_git_hash()[:7]}"
        cfg.checkpoint_config.meta = {f"{library.package}_version": version,
                                      **extra, **classes}  # fmt: skip


def _builder_cfgs(library: Library, cfg: Any) -> dict[str, Any]:
    """mmdet 2.x / mmseg 0.x builders take ``train_cfg`` / ``test_cfg`` (old configs give them at top level)."""
    if library.package == "mmcls":
        return {}
    return {key: cfg.get(key) for key in ("train_cfg", "test_cfg")}


def _device_kwargs(library: Library, device: str) -> dict[str, Any]:
    return {"device": device} if library.package == "mmcls" else {}


def main(argv: list[str]) -> None:
    """``lightning-hooks train CONFIG.py ...``: parse as OpenMMLab 1.x ``tools/train.py`` and train."""
    from lightning_hooks.core.trainer_options import TrainerRequest, split_argv

    argv, trainer_argv = split_argv(argv)
    p = parser()
    args = p.parse_args(argv)
    request = TrainerRequest.from_args(args, trainer_argv, parser=p)
    cfg = load_config(args)
    devices = int(args.devices) if str(args.devices).isdigit() else args.devices
    train(cfg, validate=not args.no_validate, seed=args.seed, diff_seed=args.diff_seed,
          deterministic=args.deterministic, devices=devices, num_nodes=args.num_nodes, strategy=args.strategy,
          accelerator=args.accelerator, request=request)  # fmt: skip
