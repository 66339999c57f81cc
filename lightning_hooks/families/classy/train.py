"""``lightning-hooks train``'s two Classy-family entry points.

- ``lightning-hooks train my_task.json [classy_train.py's flags] [--devices N ...]``: Classy's ``classy_train.py``:
  Classy's own flags (``classy_vision.generic.opts``), the hooks it adds from them (``LossLrMeterLoggingHook``,
  ``ModelComplexityHook``, ``TensorboardPlotHook``, ``CheckpointHook``, ``ProfilerHook``, ``ProgressBarHook``,
  ``VisdomHook``) before the config's, ``torch.manual_seed(0)``, resume from ``--checkpoint_load_path``.
- ``lightning-hooks train config=<VISSL config> [overrides ...] [--devices N ...]``: VISSL's
  ``tools/run_distributed_engines.py``: the config composed by VISSL's hydra plugin, its seeds, logging to
  ``CHECKPOINT.DIR``, ``default_hook_generator``'s hooks, auto-resume from the checkpoint folder.

Both then train with ``lightning.Trainer`` + ``ClassyAdapter``; Lightning's ``--devices``, ``--num-nodes``,
``--strategy``, ``--precision`` and ``--accelerator`` pick the hardware, and a ``CSVLogger`` in the checkpoint folder
(or the ``--logger`` ones) receives the losses, learning rates and meters, and every scalar of a TensorBoard hook at
the hook's own step (:mod:`lightning_hooks.families.classy.tracker`).
"""

from __future__ import annotations

import argparse
import logging
import os
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

from lightning_hooks.core.config_kind import CLASSY, VISSL
from lightning_hooks.core.family import TrainCommand
from lightning_hooks.families.classy import names


def lightning_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Lightning's hardware flags, shared by both commands (None: the config's / Lightning's default)."""
    from lightning_hooks.core import trainer_flags

    group = parser.add_argument_group("Lightning")
    group.add_argument("--accelerator", default=None, help="cpu, gpu, ... (default: the config's device, else auto)")
    group.add_argument("--devices", default=None, help="devices per node (int, list or auto)")
    group.add_argument("--num-nodes", "--num_nodes", dest="num_nodes", type=int, default=None, help="nodes")
    group.add_argument("--strategy", default=None, help="Lightning strategy (ddp, fsdp, ...)")
    group.add_argument("--precision", default=None, help="Lightning precision (32, 16-mixed, bf16-mixed, ...)")
    trainer_flags.add_arguments(group)
    return parser


def _devices(value: str | None) -> Any:
    if value is None or value == "auto":
        return value
    return int(value) if value.lstrip("-").isdigit() else value


#: where a Classy task config / VISSL config decides each ``Trainer`` option the module asks for, for errors
_SOURCES = {"max_epochs": "num_epochs (VISSL: OPTIMIZER.num_epochs)", "check_val_every_n_epoch": "test_phase_period (VISSL: TEST_MODEL)",
            "precision": "amp_args (VISSL: MODEL.AMP_PARAMS)", "log_every_n_steps": "--log_freq (VISSL: LOG_FREQUENCY)",
            "accumulate_grad_batches": "simulated_global_batchsize", "sync_batchnorm": "batch_norm_sync_mode",
            "use_distributed_sampler": "the datasets' own samplers", "limit_val_batches": "VISSL's train-only loop: TEST_MODEL false",
            "num_sanity_val_steps": "no validation before training, as in Classy / VISSL",
            "devices": "the world size (VISSL: config.DISTRIBUTED.NUM_PROC_PER_NODE, or --devices)",
            "num_nodes": "the world size (VISSL: config.DISTRIBUTED.NUM_NODES, or --num-nodes)",
            "accelerator": "the device (Classy: --device, use_gpu; VISSL: config.MACHINE.DEVICE; or --accelerator)"}  # fmt: skip  # one entry per Trainer option, a few to a line


def _owned(options: dict[str, Any], defaults: dict[str, Any], folder: str) -> dict[str, Any]:
    """The ``Trainer`` options the config decides (``options``: the module's, ``defaults``: the world size), which a
    ``--trainer.KEY`` must not contradict; the checkpoint folder and the legacy checkpoint hook."""
    from lightning_hooks.core.trainer_options import ANY, Owned

    owned = {key: Owned(value, f"Trainer({key}={value!r}), which the config decides ({_SOURCES.get(key, 'the task')})")
             for key, value in options.items()}  # fmt: skip  # the comprehension's for clause under its first half
    owned.update({key: Owned(ANY, f"{_SOURCES[key]}", "use the flag") for key in ("devices", "num_nodes", "accelerator")
                  if defaults.get(key) is not None})  # fmt: skip  # the comprehension's condition under its first half
    owned["default_root_dir"] = Owned(folder, f"the checkpoint folder {folder!r}", "set the checkpoint folder")
    owned["enable_checkpointing"] = Owned(False, "the task's CheckpointHook, which writes the checkpoints", "for "
                                          "Lightning's own, add --trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint")  # fmt: skip  # the message continues under its first half
    return owned


def _trainer(
    args: argparse.Namespace, options: dict[str, Any], callbacks: list[Any], folder: str,
    request: Any = None, name: str = "classy", clip: str | None = None, scalars: bool = True, **defaults: Any
) -> Any:
    """A ``lightning.Trainer`` with the config's options, the flags over the defaults, and a CSVLogger in ``folder``
    (``request``: the ``--logger`` loggers instead, and ``--trainer.KEY`` options, checked against the config's);
    with ``scalars``, the scalars of the hooks' TensorBoard writers reach the loggers at the hooks' steps
    (``tracker.HookScalars``; without a writer to tee, leave it out: Lightning calls each of a callback's hooks at
    every step, about 110 Python calls a step, whether it overrides them or not)."""
    from lightning_hooks.core.lightning_api import pl, submodule
    from lightning_hooks.core.trainer_options import ANY, Owned
    from lightning_hooks.families.classy.tracker import HookScalars

    callbacks = [*callbacks, HookScalars()] if scalars else list(callbacks)

    owned = _owned(options, defaults, folder)
    if clip is not None:  # the config's clipping (``clip``: it in words), which Lightning's would clip again
        for key in ("gradient_clip_val", "gradient_clip_algorithm"):
            owned[key] = Owned(None, clip, "drop one")

    hardware = {"accelerator": args.accelerator, "devices": _devices(args.devices), "num_nodes": args.num_nodes,
                "strategy": args.strategy, "precision": args.precision}  # fmt: skip  # the five hardware flags on two lines
    for key, value in hardware.items():
        if value is not None:
            options[key] = value
        elif key in defaults and defaults[key] is not None:
            options.setdefault(key, defaults[key])
    owned = {key: own for key, own in owned.items() if options.get(key, own.value) in (own.value,) or own.value is ANY}
    base = dict(logger=submodule("loggers").CSVLogger(folder, name="lightning_logs"), default_root_dir=folder,
                enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, **options)  # fmt: skip  # arguments aligned under the call
    if request is None:
        return pl.Trainer(callbacks=callbacks, **base)
    if request.has_loggers:
        base["logger"] = False
    return pl.Trainer(**request.resolve(base, owned, save_dir=folder, name=name, callbacks=callbacks))


# --------------------------------------------------------------------------------------------------------- Classy
class _ConfigFirst(argparse.ArgumentParser):
    """A parser on which Classy's required ``--config_file`` option is the positional ``TASK.json``."""

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        if names == ("--config_file",):
            return super().add_argument("config_file", metavar="TASK.json", help=kwargs.get("help"))
        return super().add_argument(*names, **kwargs)


def classy_parser() -> argparse.ArgumentParser:
    """``classy_train.py``'s parser (Classy's own ``add_generic_args``) with the config as the first argument."""
    from classy_vision.generic.opts import add_generic_args

    parser = _ConfigFirst(
        prog="lightning-hooks train",
        description="Train a Classy Vision task config under Lightning, as classy_train.py does.",
    )
    add_generic_args(parser)
    parser.add_argument("--device", choices=("cpu", "gpu"), default=None,
                        help="older classy_train.py's device flag: Lightning's accelerator")  # fmt: skip  # help text aligned under its first line
    parser.add_argument("--project_folder", default=".",
                        help="the Classy project (classy-project's layout) whose packages register the config's names, "
                        "imported as classy_train.py imports those of its own folder (default: the current folder)")  # fmt: skip  # help text aligned under its first line
    return lightning_arguments(parser)


def classy_hooks(args: argparse.Namespace, config: dict[str, Any]) -> list[Any]:
    """The hooks ``classy_train.py``'s ``configure_hooks`` adds from its flags, in its order; creates the folders it
    creates (``output_<time>/`` in the working directory: checkpoints unless ``--checkpoint_folder``, TensorBoard)."""
    from classy_vision.hooks import (
        CheckpointHook,
        LossLrMeterLoggingHook,
        ModelComplexityHook,
        ProfilerHook,
        ProgressBarHook,
        TensorboardPlotHook,
        VisdomHook,
    )

    hooks: list[Any] = [LossLrMeterLoggingHook(args.log_freq), ModelComplexityHook()]
    base_folder = Path.cwd() / f"output_{datetime.now().isoformat()}"
    if args.checkpoint_folder == "":
        args.checkpoint_folder = str(base_folder / "checkpoints")
        os.makedirs(args.checkpoint_folder, exist_ok=True)
    logging.info(f"Logging outputs to {base_folder}")
    logging.info(f"Logging checkpoints to {args.checkpoint_folder}")
    if not args.skip_tensorboard:
        try:
            from torch.utils.tensorboard import SummaryWriter

            os.makedirs(base_folder / "tensorboard", exist_ok=True)
            hooks.append(TensorboardPlotHook(SummaryWriter(log_dir=base_folder / "tensorboard")))
        except ImportError:
            logging.warning("tensorboard not installed, skipping tensorboard hooks")
    args_dict = vars(args)
    args_dict["config"] = config
    hooks.append(CheckpointHook(args.checkpoint_folder, args_dict, checkpoint_period=args.checkpoint_period))
    if args.profiler:
        hooks.append(ProfilerHook())
    if args.show_progress:
        hooks.append(ProgressBarHook())
    if args.visdom_server != "":
        hooks.append(VisdomHook(args.visdom_server, args.visdom_port))
    return hooks


def classy_main(argv: list[str]) -> None:
    """``classy_train.py --config_file argv[0] argv[1:]`` under Lightning, after importing the project's packages
    (``--project_folder``, default: the current folder) as ``classy_train.py`` imports those of its folder."""
    from classy_vision.generic.opts import check_generic_args

    from lightning_hooks.core.trainer_flags import split_argv

    parser = classy_parser()
    argv, trainer_argv = split_argv(argv)
    args = check_generic_args(parser.parse_args(argv))
    import torch  # with Lightning below: after the command line parsed (a usage error imports only Classy's parser)

    from lightning_hooks.core import trainer_options
    from lightning_hooks.families.classy.data import load_task_config
    from lightning_hooks.families.classy.module import ClassyTaskModule
    from lightning_hooks.families.classy.project import import_project
    from lightning_hooks.families.classy.tracker import hook_writers

    request = trainer_options.TrainerRequest.from_args(args, trainer_argv, parser=parser)
    if args.pretrained_checkpoint_path:
        parser.error("--pretrained_checkpoint_path is for Classy's fine_tuning task, not built under Lightning")
    if args.distributed_backend not in ("none", "ddp"):
        parser.error(f"--distributed_backend {args.distributed_backend}: none or ddp")
    logging.getLogger().setLevel(logging.INFO)
    _set_backends(args)
    import_project(args.project_folder)
    config = load_task_config(args.config_file)
    torch.manual_seed(0)
    module = ClassyTaskModule(config)
    hooks = classy_hooks(args, module.config)  # as Classy's build_task completed it
    options = {**module.trainer_options(), "log_every_n_steps": args.log_freq}
    accelerator = {"cpu": "cpu", "gpu": "gpu", None: None}[args.device]
    if accelerator is None and config.get("use_gpu") is not None:
        accelerator = "gpu" if config["use_gpu"] else "cpu"
    norm = module.task.clip_grad_norm  # ClassyTaskModule.configure_gradient_clipping clips with it
    clip = None if norm is None else f"clip_grad_norm={norm} in the task config (Classy's clipping)"
    trainer = _trainer(args, options, [module.adapter(hooks)], args.checkpoint_folder, request=request,
                       name=Path(args.config_file).stem, clip=clip, scalars=bool(hook_writers(hooks)),
                       accelerator=accelerator, **_classy_distributed(args))  # fmt: skip  # arguments aligned under the call
    if trainer.world_size > 1:
        args.distributed_backend = "ddp"  # as CheckpointHook stores the flags of a distributed classy_train.py run
    logging.info(f"Starting training on rank {trainer.global_rank} worker. World size is {trainer.world_size}")
    checkpoint = classy_checkpoint(args.checkpoint_load_path)
    trainer.fit(module, datamodule=module.datamodule(), ckpt_path=checkpoint)
    logging.info("Training successful!")
    logging.info(f'Results of this training run are available at: "{Path(args.checkpoint_folder).resolve()}"')


def _classy_distributed(args: argparse.Namespace) -> dict[str, Any]:
    """The Trainer defaults for ``--distributed_backend ddp``: Lightning's DDP strategy, and under ``torchrun`` (or
    ``torch.distributed.launch --use_env``), as classy_train.py is launched, its processes per node and nodes."""
    if args.distributed_backend != "ddp":
        return {}
    defaults: dict[str, Any] = {"strategy": "ddp"}
    world, local = os.environ.get("WORLD_SIZE"), os.environ.get("LOCAL_WORLD_SIZE")
    if world and local:
        defaults.update(devices=int(local), num_nodes=int(world) // int(local))
    return defaults


def classy_checkpoint(path: str) -> str | None:
    """``--checkpoint_load_path`` as Classy's ``load_checkpoint`` reads it: a file, or a folder holding
    ``checkpoint.torch``. As in Classy, a path that does not exist, or a folder without that file, is logged as a
    warning and the run starts from scratch (a job that always passes its checkpoint folder starts fresh the first
    time); a Lightning checkpoint file resumes as ``trainer.fit(ckpt_path=...)`` does."""
    from classy_vision.generic.util import CHECKPOINT_FILE

    if not path:
        return None
    if not os.path.exists(path):
        logging.warning(f"Checkpoint path {path} not found")
        return None
    file = f"{path.rstrip('/')}/{CHECKPOINT_FILE}" if os.path.isdir(path) else path
    if not os.path.exists(file):
        logging.warning(f"Checkpoint file {file} not found.")
        return None
    return file


def _set_backends(args: argparse.Namespace) -> None:
    """``classy_train.py``'s torchvision image and video backends (when torchvision is installed)."""
    try:
        from torchvision import set_image_backend, set_video_backend
    except ImportError:
        return
    set_image_backend(args.image_backend)
    set_video_backend(args.video_backend)


# ---------------------------------------------------------------------------------------------------------- VISSL
def vissl_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightning-hooks train config=<VISSL config> [overrides ...]",
        description="Train a VISSL config under Lightning, as VISSL's tools/run_distributed_engines.py does. The "
        "arguments without a leading '-' are VISSL's hydra overrides (config.OPTIMIZER.num_epochs=2 ...).",
    )
    group = parser.add_argument_group("your own modules (what your launcher script would import)")
    group.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                       help="a module to import before the config is composed, by its dotted name, from the current "
                       "folder or PYTHONPATH: its register_model_trunk / register_model_head / register_loss / ... "
                       "decorators register the names your config uses (repeatable)")  # fmt: skip  # help text aligned under its first line
    group.add_argument("--hook-generator", "--hook_generator", dest="hook_generator", metavar="MODULE:FUNCTION",
                       help="the function that builds the run's hooks from the config, in place of VISSL's "
                       "default_hook_generator: the hook_generator your script gives VISSL's launch_distributed")  # fmt: skip  # help text aligned under its first line
    return lightning_arguments(parser)


def vissl_world_overrides(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """``--devices N`` / ``--num-nodes N`` as VISSL's ``config.DISTRIBUTED.NUM_PROC_PER_NODE`` / ``NUM_NODES``, applied
    after the user's overrides: VISSL sizes the world from them when it composes the config (the LR's
    ``auto_lr_scaling``, the losses' ``buffer_params.world_size``) and its hooks read them. Without the flags, the
    config's values choose Lightning's devices and nodes."""
    world = []
    if args.devices is not None:
        devices = _devices(args.devices)
        if not isinstance(devices, int) or devices < 1:
            parser.error(f"--devices {args.devices}: a VISSL config needs a number of processes per node (its "
                         "config.DISTRIBUTED.NUM_PROC_PER_NODE), e.g. --devices 2")  # fmt: skip  # the message continues under its first half
        world.append(f"config.DISTRIBUTED.NUM_PROC_PER_NODE={devices}")
    if args.num_nodes is not None:
        world.append(f"config.DISTRIBUTED.NUM_NODES={args.num_nodes}")
    return world


def vissl_main(argv: list[str]) -> None:
    """``run_distributed_engines.py config=... overrides...`` under Lightning, after importing the user's modules
    (``--import``); ``--hook-generator`` builds the hooks, as a launcher script's ``hook_generator``."""
    from lightning_hooks.core.trainer_flags import split_argv

    parser = vissl_parser()
    argv, trainer_argv = split_argv(argv)
    args, overrides = parser.parse_known_args(argv)
    flags = [item for item in overrides if item.startswith("-")]
    if flags:
        parser.error(f"unrecognized arguments: {' '.join(flags)}")
    # VISSL and Lightning (torch) after the command line parsed: a usage error imports neither
    from vissl.utils.checkpoint import get_checkpoint_folder, get_resume_checkpoint, is_training_finished
    from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict
    from vissl.utils.logger import setup_logging, shutdown_logging
    from vissl.utils.misc import set_seeds

    from lightning_hooks.core import trainer_options
    from lightning_hooks.families.classy.project import import_user_modules, user_function
    from lightning_hooks.families.classy.vissl_module import VisslConfigModule

    request = trainer_options.TrainerRequest.from_args(args, trainer_argv, parser=parser)
    import_user_modules(args.imports)
    hook_generator = user_function(args.hook_generator, "--hook-generator") if args.hook_generator else None
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", 0)))
    # train_config.yaml in the checkpoint folder: VISSL's launcher dumps it once, before it starts the ranks
    world = vissl_world_overrides(args, parser)
    _, config = convert_to_attrdict(compose_hydra_configuration([*overrides, *world]), dump_config=rank == 0)
    folder = get_checkpoint_folder(config)
    if is_training_finished(config, checkpoint_folder=folder):
        # VISSL logs this before its logging is set up, so a user saw nothing: printed, the run's only output
        print(f"Training already succeeded in {folder} (its final checkpoint is there), exiting.", flush=True)
        return
    symlink = f"{folder}/checkpoint.torch"
    if config.CHECKPOINT.USE_SYMLINK_CHECKPOINT_FOR_RESUME and os.path.exists(symlink):
        checkpoint = symlink
    else:
        checkpoint = get_resume_checkpoint(config, checkpoint_folder=folder)
    setup_logging(__name__, output_dir=folder, rank=rank)
    try:
        set_seeds(config, rank)
        module = VisslConfigModule(config)
        distributed = config.DISTRIBUTED
        adapter = module.adapter(hook_generator=hook_generator)
        grad_clip = config.MODEL.GRAD_CLIP  # VISSL's GradClipHook (default_hook_generator) clips in on_backward
        clip = (f"config.MODEL.GRAD_CLIP.USE_GRAD_CLIP=True (MAX_NORM={grad_clip.MAX_NORM}, NORM_TYPE="
                f"{grad_clip.NORM_TYPE}: VISSL's GradClipHook clips)") if grad_clip.USE_GRAD_CLIP else None  # fmt: skip  # the text continued under its first half
        trainer = _trainer(
            args, {**module.trainer_options(), "log_every_n_steps": config.LOG_FREQUENCY}, [adapter], folder, request,
            "vissl", clip,
            accelerator="gpu" if config.MACHINE.DEVICE == "gpu" else "cpu",
            devices=distributed.NUM_PROC_PER_NODE, num_nodes=distributed.NUM_NODES,
        )  # fmt: skip  # the keywords grouped by what they hand over, a few to a line
        with warnings.catch_warnings():
            # Lightning warns that the module's on_after_batch_transfer runs beside a datamodule: it is meant to
            # (VISSL's construct_sample_for_model), nothing the user wrote or can change
            warnings.filterwarnings("ignore", message="You have overridden `on_after_batch_transfer` in `LightningModule`")
            trainer.fit(module, datamodule=module.datamodule(), ckpt_path=checkpoint)
        logging.getLogger().info("All Done!")
    finally:
        shutdown_logging()


COMMANDS = (
    TrainCommand(
        legacy="Classy Vision classy_train.py",
        usage="TASK.json [--checkpoint_folder DIR] [--checkpoint_load_path PATH] [--log_freq N] [--device cpu] "
        "[--project_folder DIR] [--devices N] [--num-nodes N] [--strategy S] [--precision P] ...",
        kind=CLASSY,
        explain=names.explain_classy,
        main=classy_main,
    ),
    TrainCommand(
        legacy="VISSL tools/run_distributed_engines.py",
        usage="config=<VISSL config> [config.KEY=VALUE ...] [--import MODULE] [--hook-generator MODULE:FUNCTION] "
        "[--devices N] [--num-nodes N] [--strategy S] [--precision P]",
        kind=VISSL,
        explain=names.explain_vissl,
        main=vissl_main,
    ),
)
