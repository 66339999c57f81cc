"""``lightning-hooks train CONFIG.py``: OpenMMLab's ``tools/train.py`` under Lightning.

The command reads the config as ``tools/train.py`` does (``--work-dir``, ``--cfg-options``, ``--resume``, ``--amp``,
``--auto-scale-lr``), builds what ``Runner.from_cfg`` builds (:class:`MMEngineModule`, :class:`MMEngineData`, and an
:class:`MMEngineAdapter` for the hooks, visualizer, log processor, schedulers and loop) and trains with
``lightning.Trainer``, which adds Lightning's ``--devices``, ``--num-nodes``, ``--strategy`` and ``--precision``.

This module imports no MMEngine until a command runs (:mod:`lightning_hooks.core.config_kind` tells its configs).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any, Literal

from lightning_hooks.core.errors import InputError
from lightning_hooks.families.mmengine.names import type_name

USAGE = ("CONFIG.py [--work-dir DIR] [--cfg-options KEY=VALUE ...] [--resume [CKPT]] [--amp] [--auto-scale-lr] "
         "[--devices N] [--num-nodes N] [--strategy S] [--precision P]")  # fmt: skip  # the usage line continued under its first half

#: the config keys :meth:`MMEngineAdapter.from_config` takes: the hooks, loop, schedulers, visualizer, log processor,
#: scope, work dir and checkpoint to load or resume. The model, data, optimizer and evaluator keys are built into the
#: LightningModule and LightningDataModule; the config's own variables (``train_pipeline``, ...) are read by the keys
#: that name them and are not given to the adapter.
ADAPTER_KEYS = ("default_hooks", "custom_hooks", "param_scheduler", "train_cfg", "visualizer", "default_scope",
                "log_processor", "log_level", "work_dir", "load_from", "resume")  # fmt: skip  # names wrapped at 120


def parser() -> argparse.ArgumentParser:
    """``tools/train.py``'s arguments, with Lightning's instead of ``--launcher``."""
    from mmengine.config import DictAction

    from lightning_hooks.core.family import add_lightning_arguments

    p = argparse.ArgumentParser(
        prog="lightning-hooks train", description="Train an OpenMMLab config under Lightning, as tools/train.py does."
    )
    p.add_argument("config", help="train config file path")
    p.add_argument("--work-dir", help="the dir to save logs and models (default: work_dirs/<config name>)")
    p.add_argument("--amp", action="store_true", help="enable automatic-mixed-precision training (AmpOptimWrapper)")
    p.add_argument("--auto-scale-lr", action="store_true", help="scale the learning rate by the actual batch size")
    p.add_argument("--resume", nargs="?", type=str, const="auto",
                   help="resume from this checkpoint, or without one from the latest in the work dir")  # fmt: skip  # arguments aligned under the call
    p.add_argument("--cfg-options", nargs="+", action=DictAction,
                   help="override config settings, KEY=VALUE pairs merged into the config")  # fmt: skip  # arguments aligned under the call
    add_lightning_arguments(p)
    return p


def load_config(args: argparse.Namespace) -> Any:
    """The config as ``tools/train.py`` makes it: ``--cfg-options`` merged, then the work dir, AMP, resume and
    learning-rate scaling flags."""
    from mmengine.config import Config
    from mmengine.utils import import_modules_from_strings

    from lightning_hooks.core.family import apply_config_flags
    from lightning_hooks.core.project_imports import import_project

    cfg = Config.fromfile(args.config, import_custom_modules=False)
    import_project(cfg, args.config, import_modules_from_strings)  # the project's modules, from the current folder
    cfg = apply_config_flags(cfg, args)
    if args.amp:
        cfg.optim_wrapper.type = "AmpOptimWrapper"
        cfg.optim_wrapper.loss_scale = "dynamic"
    if args.auto_scale_lr:
        scale = cfg.get("auto_scale_lr")
        if not (scale and "base_batch_size" in scale):  # mmdet's script also wants "enable"; mmpretrain's sets it
            raise RuntimeError(
                "lightning-hooks train --auto-scale-lr: the config has no auto_scale_lr=dict(base_batch_size=...); "
                "add one (base_batch_size: the total batch size the learning rate is set for)."
            )
        cfg.auto_scale_lr.enable = True
    if args.resume == "auto":
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    return cfg


def build(cfg: Any, request: Any = None, **trainer_options: Any) -> tuple[Any, Any, Any, Any]:
    """``(trainer, module, data, adapter)`` for a loaded config, built in ``Runner.from_cfg``'s order: seed, model,
    hooks; ``trainer_options`` go to ``lightning.Trainer`` (``devices``, ``strategy``, ...), then ``request``'s
    (a :class:`~lightning_hooks.core.trainer_options.TrainerRequest`: ``--logger``, ``--trainer.KEY``), checked
    against what the config decides (:func:`owned_options`). With loggers, ``LoggerHook``'s scalars reach them
    through a ``LightningLoggerVisBackend`` (added to the visualizer where the config lists none)."""
    from lightning_hooks.core import lightning_api
    from lightning_hooks.core.checkpoint_files import check_checkpoint_file
    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.mmengine import strategy, vis_backend  # vis_backend: LightningLoggerVisBackend
    from lightning_hooks.families.mmengine.adapter import MMEngineAdapter
    from lightning_hooks.families.mmengine.data import MMEngineData
    from lightning_hooks.families.mmengine.iter_based import IterLoopConfig, parse_train_cfg
    from lightning_hooks.families.mmengine.module import (
        MMEngineModule,
        build_model,
        init_model_weights,
        seed_from_config,
    )

    loop_cfg = parse_train_cfg(cfg.train_cfg)  # a loop Lightning cannot run is refused before anything is built
    check_eval_loops(cfg)
    if cfg.get("resume") and cfg.get("load_from"):  # the file Runner.load_or_resume resumes from, named if unreadable
        check_checkpoint_file(cfg.load_from, owner="runner.resume")
    randomness = dict(cfg.get("randomness") or {})
    options: dict[str, Any] = dict(
        default_root_dir=cfg.work_dir,
        enable_checkpointing=False,  # CheckpointHook writes the checkpoints
        logger=False,  # LoggerHook logs; LightningLoggerVisBackend sends its scalars to Lightning loggers
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,  # the Runner runs no validation before training
        inference_mode=False,  # ValLoop runs under torch.no_grad
        use_distributed_sampler=False,  # DefaultSampler / InfiniteSampler shard by rank themselves
        deterministic=True if randomness.get("deterministic") else None,
        # Lightning's own logging (a callback's, e.g. LearningRateMonitor) at LoggerHook's interval, as the scalars
        log_every_n_steps=((cfg.get("default_hooks") or {}).get("logger") or {}).get("interval", 10),
    )
    options.update({k: v for k, v in trainer_options.items() if v is not None})
    if request is not None:
        name = os.path.splitext(os.path.basename(cfg.filename or "mmengine"))[0]
        options = request.resolve(options, owned_options(cfg, loop_cfg), save_dir=cfg.work_dir, name=name)
    callbacks = options.pop("callbacks", [])
    world_size = lightning_api.world_size(**options)  # the processes the run will have, before any starts
    sharded = strategy.from_config(cfg, options.get("strategy"))  # a FlexibleRunner config's FSDP / DeepSpeed
    options["strategy"] = sharded or wrapper_strategy(cfg, options.get("strategy", "auto"), world_size)
    strategy.prepare_config(cfg)
    _setup_env(cfg.get("env_cfg") or {}, distributed=world_size > 1)
    # Runner.from_cfg's order, which fixes what each draw from the seeded generators is: seed, model, the train
    # loop (an iteration-based loop starts iterating its loader), then the model's init_weights, which logs to this
    # run's logger (the Runner builds it first)
    seed = seed_from_config(cfg)
    model = build_model(cfg, init_weights=False)
    data = MMEngineData.from_config(cfg, seed=seed)
    iter_based = isinstance(loop_cfg, IterLoopConfig)
    # under DDP the samplers need the process group: the fit's setup starts the iterator, then initialises the weights
    at_setup = iter_based and world_size > 1
    if iter_based and not at_setup:
        data.start_train_iterator()
    data.start_iterator_at_setup = at_setup
    runtime = copy.deepcopy({key: cfg[key] for key in ADAPTER_KEYS if key in cfg})  # building changes configs
    runtime["work_dir"] = os.path.abspath(cfg.work_dir)  # as the Runner keeps it (log lines, last_checkpoint)
    adapter = MMEngineAdapter.from_config(**runtime, cfg=cfg, seed=seed, model="model")
    if not at_setup:
        with _run_logger(adapter.runner):
            init_model_weights(model, cfg)
    module = MMEngineModule.from_config(cfg, seed=False, model=model)
    module.init_weights_at_setup = cfg if at_setup else None
    options.update(callbacks=[adapter, *callbacks], **adapter.trainer_kwargs())
    if options.get("logger"):
        vis_backend.send_scalars_to_loggers(adapter.runner.visualizer)
    if not data.has("val"):
        options["limit_val_batches"] = 0
    return pl.Trainer(**options), module, data, adapter


#: the evaluation loops the command runs as the Runner does: MMEngine's, and mmagic's over several dataloaders
RUNNABLE_EVAL_LOOPS = {"val_cfg": ("ValLoop", "MultiValLoop"), "test_cfg": ("TestLoop", "MultiTestLoop")}


class EvalLoopError(InputError, ValueError):
    """A ``val_cfg`` / ``test_cfg`` naming an evaluation loop with a ``run()`` of its own, which the command cannot
    run as the Runner would."""


def check_eval_loops(cfg: Any) -> None:
    """Refuse a ``val_cfg`` / ``test_cfg`` whose loop has its own ``run()`` (mmdet's ``TeacherStudentValLoop``,
    mmpretrain's ``RetrievalValLoop``): the Runner would run it, while Lightning runs one evaluation loop over the
    stage's dataloaders, so the metrics would differ without a word. ``MMEngineAdapter.from_config`` (a Trainer the
    user builds) only warns: there the LightningModule's ``validation_step`` is the user's.

    Example: ``check_eval_loops(Config(dict(val_cfg=dict(type="ValLoop"))))`` returns; with
    ``type="TeacherStudentValLoop"`` it raises :class:`EvalLoopError`."""
    for key, loops in RUNNABLE_EVAL_LOOPS.items():
        kind = (cfg.get(key) or {}).get("type", loops[0])
        name = type_name(kind)
        if name not in loops:
            raise EvalLoopError(
                f"{key}=dict(type={name!r}) is an evaluation loop with its own run(), which "
                f"Lightning's {'validation' if key == 'val_cfg' else 'test'} loop cannot run as MMEngine's Runner "
                f"would (its metrics would differ). Evaluate with MMEngine's {loops[0]} instead: --cfg-options "
                f"{key}.type={loops[0]}; or train from Python with MMEngineAdapter.from_config and put what "
                f"{name}.run() does in the LightningModule's {'validation' if key == 'val_cfg' else 'test'}_step."
            )


@contextlib.contextmanager
def _run_logger(runner: Any) -> Iterator[None]:
    """``runner``'s MMLogger (its file opened) is MMEngine's current logger inside, for what the model logs while
    the run is built (``init_weights``' lines, its parameters' initialisation), as the Runner's own logger is then,
    not a previous run's. Only in the process that is, or will be, rank 0: another rank's logger needs the process
    group (rank 0's timestamp, its rank) and is built when the Trainer starts it; there a logger of errors only
    stands in, as a non-zero rank's MMLogger prints only errors and writes no file."""
    from mmengine.logging import MMLogger

    from lightning_hooks.families.mmengine.current import make_current

    rank = _launch_rank()
    logger = runner.logger if rank == 0 else MMLogger.get_instance(f"lightning-hooks:rank{rank}", log_level="ERROR")
    restore = make_current([logger])
    try:
        yield
    finally:
        restore()


def _launch_rank() -> int:
    """This process's rank as its launcher gave it before any process group exists: torchrun's ``RANK``, Lightning's
    ``NODE_RANK`` / ``LOCAL_RANK`` in the processes it starts; 0 in a single process or the one that starts them."""
    ranks = (os.environ.get(name, "0") for name in ("RANK", "GLOBAL_RANK", "NODE_RANK", "LOCAL_RANK"))
    return max(int(rank) if rank.isdigit() else 0 for rank in ranks)


#: Lightning's DDP strategies by name, and the start method each launches processes with ("auto": Lightning picks
#: "ddp" for several processes outside a notebook)
_DDP_STRATEGIES: dict[str, Literal["popen", "spawn", "fork", "forkserver"]] = {
    "auto": "popen", "ddp": "popen", "ddp_spawn": "spawn", "ddp_fork": "fork", "ddp_notebook": "fork"
}  # fmt: skip  # the five entries on one line
#: the ``model_wrapper_cfg`` types that are one ``DistributedDataParallel`` around the whole model, as Lightning's
#: ``DDPStrategy`` wraps the LightningModule: their options are ``DistributedDataParallel``'s
_ONE_DDP = ("MMDistributedDataParallel", "DistributedDataParallel")


def wrapper_strategy(cfg: Any, strategy: Any, world_size: int) -> Any:
    """The Trainer's ``strategy`` for a run of ``world_size`` processes, with the model wrapped as
    ``Runner.wrap_model`` wraps it: nothing in one process (``model_wrapper_cfg`` has no effect there, as under the
    Runner); in several, a ``DDPStrategy`` with the arguments of the config's ``model_wrapper_cfg`` (``type``
    ``MMDistributedDataParallel``, the default, or torch's ``DistributedDataParallel``: ``find_unused_parameters``,
    ``broadcast_buffers``, ...), or without one ``broadcast_buffers=False`` and the config's
    ``find_unused_parameters``. A wrapper Lightning cannot stand for (``MMSeparateDistributedDataParallel``, which
    wraps each submodule apart, or a custom one) raises an error that says what to do; a strategy the user names
    other than DDP is kept, with a warning that ``model_wrapper_cfg`` does not apply.

    Example: ``wrapper_strategy(Config(dict(model_wrapper_cfg=dict(find_unused_parameters=True))), "auto", 2)``
    is ``DDPStrategy(find_unused_parameters=True)``.
    """
    from lightning_hooks.core.lightning_api import pl

    wrapper = cfg.get("model_wrapper_cfg")
    if world_size == 1:
        return strategy
    if not (isinstance(strategy, str) and strategy in _DDP_STRATEGIES):
        if wrapper is not None:
            warnings.warn(
                f"lightning-hooks train: model_wrapper_cfg={dict(wrapper)!r} does not apply under the strategy you "
                f"chose ({strategy!r}); with --strategy ddp (or none) it configures Lightning's DDPStrategy.",
                stacklevel=2,
            )
        return strategy
    start_method = _DDP_STRATEGIES[strategy]
    if wrapper is None:  # Runner.wrap_model's MMDistributedDataParallel
        return pl.strategies.DDPStrategy(start_method=start_method, broadcast_buffers=False,
                                         find_unused_parameters=bool(cfg.get("find_unused_parameters", False)))  # fmt: skip  # arguments aligned under the call
    kwargs = dict(wrapper)
    kind = kwargs.pop("type", "MMDistributedDataParallel")
    name = type_name(kind)
    way_out = ("train on one device, or wrap the whole model in one DistributedDataParallel as Lightning's "
               "DDPStrategy does: --cfg-options model_wrapper_cfg.type=MMDistributedDataParallel")  # fmt: skip  # one sentence continued under its first half
    if name not in _ONE_DDP:
        raise ValueError(
            f"lightning-hooks train: model_wrapper_cfg=dict(type={name!r}) has no Lightning counterpart in a run of "
            f"{world_size} processes (Lightning's DDPStrategy wraps the whole LightningModule in one "
            f"DistributedDataParallel; {name} wraps the model its own way): {way_out}."
        )
    if kwargs.pop("detect_anomalous_params", False):
        raise ValueError(
            "lightning-hooks train: model_wrapper_cfg=dict(detect_anomalous_params=True) is MMDistributedDataParallel's "
            "own debugging aid, which Lightning's DDPStrategy does not have: drop it (find_unused_parameters=True "
            "lets DistributedDataParallel report parameters without gradients)."
        )
    return pl.strategies.DDPStrategy(start_method=start_method, **kwargs)


def _setup_env(env_cfg: dict, distributed: bool) -> None:
    """``env_cfg`` as ``Runner.setup_env`` applies it: ``cudnn_benchmark`` and ``mp_cfg`` (the multiprocessing start
    method, OpenCV and OpenMP threads); ``dist_cfg`` is Lightning's strategy here."""
    import torch
    from mmengine.utils.dl_utils import set_multi_processing

    if env_cfg.get("cudnn_benchmark"):
        torch.backends.cudnn.benchmark = True
    set_multi_processing(**env_cfg.get("mp_cfg", {}), distributed=distributed)
    if distributed and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        # MMEngine asks for one thread per process in a distributed run (torchrun, which launches the Runner, sets it
        # before the process starts); this process's torch already started, so the variable alone would not apply
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def owned_options(cfg: Any, loop_cfg: Any) -> dict[str, Any]:
    """The ``Trainer`` options the config decides, for :meth:`TrainerRequest.resolve`: ``train_cfg``'s loop, the
    work dir, ``CheckpointHook``'s checkpoints, the samplers, ``randomness.deterministic``, and the optimizer step,
    which MMEngine's ``OptimWrapper`` owns (accumulation, clipping, AMP)."""
    from lightning_hooks.core.trainer_options import ANY, Owned

    loop = f"train_cfg={dict(cfg.train_cfg)!r} (the config's loop, which Lightning runs as Trainer("
    owned = {key: Owned(value, f"{loop}{key}={value!r}))", "change the loop with --cfg-options train_cfg.KEY=VALUE")
             for key, value in loop_cfg.trainer_kwargs().items()}  # fmt: skip  # the comprehension's for clause under its first half
    wrapper = dict(cfg.get("optim_wrapper") or {})
    step = (f"optim_wrapper={wrapper!r} (MMEngine's OptimWrapper steps the optimizer itself, under Lightning's "
            "manual optimization)")  # fmt: skip  # one sentence continued under its first half
    owned.update(
        default_root_dir=Owned(cfg.work_dir, f"the work dir {cfg.work_dir!r}", "set it with --work-dir"),
        enable_checkpointing=Owned(False, "the config's CheckpointHook (default_hooks.checkpoint), which writes the "
                                   "checkpoints", "for Lightning's own, add --trainer.callbacks+=lightning.pytorch."
                                   "callbacks.ModelCheckpoint"),
        use_distributed_sampler=Owned(False, "the config's samplers (DefaultSampler / InfiniteSampler shard by "
                                      "rank themselves)"),
        accumulate_grad_batches=Owned(1, step, "accumulate with --cfg-options optim_wrapper.accumulative_counts=N"),
        gradient_clip_val=Owned(None, step, "clip with --cfg-options optim_wrapper.clip_grad.max_norm=V"),
        gradient_clip_algorithm=Owned(None, step, "clip with --cfg-options optim_wrapper.clip_grad.max_norm=V"),
    )  # fmt: skip  # each message continued under its first half
    if wrapper.get("type") == "AmpOptimWrapper":
        owned["precision"] = Owned(ANY, f"{step}: AmpOptimWrapper does the mixed precision (--amp)",
                                   "drop --amp (and the AmpOptimWrapper) for Lightning's precision, or the option")
    if (cfg.get("randomness") or {}).get("deterministic"):
        owned["deterministic"] = Owned(True, "randomness.deterministic=True in the config")
    return owned


def train(cfg: Any, request: Any = None, **trainer_options: Any) -> Any:
    """Build (:func:`build`) and fit; returns the trainer. ``resume`` continues from ``adapter.ckpt_path``."""
    from lightning_hooks.core import lightning_api

    trainer, module, data, adapter = build(cfg, request, **trainer_options)
    with warnings.catch_warnings():
        # MMEngineModule keeps batches as the loader gives them (its data preprocessor moves them), on purpose
        warnings.filterwarnings("ignore", message="You have overridden `transfer_batch_to_device`")
        # the host loop runs a resumed epoch again from its first batch, as the Runner: Lightning's caution is moot
        warnings.filterwarnings("ignore", message=re.escape(lightning_api.MID_EPOCH_RESUME_WARNING))
        trainer.fit(module, datamodule=data, ckpt_path=adapter.ckpt_path)
    return trainer


def main(argv: list[str]) -> None:
    """``lightning-hooks train CONFIG.py ...``: parse as ``tools/train.py`` and train."""
    from lightning_hooks.core.trainer_flags import split_argv

    argv, trainer_argv = split_argv(argv)
    p = parser()
    args = p.parse_args(argv)
    from lightning_hooks.core.trainer_options import TrainerRequest  # imports Lightning, which a usage error does not

    request = TrainerRequest.from_args(args, trainer_argv, parser=p)
    cfg = load_config(args)
    devices = int(args.devices) if str(args.devices).isdigit() else args.devices
    train(cfg, request, devices=devices, num_nodes=args.num_nodes, strategy=args.strategy,
          accelerator=args.accelerator, precision=args.precision)  # fmt: skip  # arguments aligned under the call
