"""``lightning-hooks train CONFIG.py`` for OpenMMLab 1.x configs: the command line of mmcls 0.x / mmdet 2.x / mmseg 0.x
``tools/train.py`` (:func:`parser`, :func:`load_config`), then what that script does under Lightning
(:func:`~lightning_hooks.families.mmcv.tools_train.train`).

The job is split by module: this one is the command line; :mod:`~lightning_hooks.families.mmcv.library` holds what
the three libraries do differently, as data; :mod:`~lightning_hooks.families.mmcv.tools_train` is the run that
follows ``tools/train.py``; :mod:`~lightning_hooks.families.mmcv.lightning_runner` is the runner the library's
training API gets, which trains under ``lightning.Trainer``.

This module imports no mmcv until a command runs (:mod:`lightning_hooks.core.config_kind` tells its configs).
"""

from __future__ import annotations

import argparse
from typing import Any

from lightning_hooks.families.mmcv.library import library_of
from lightning_hooks.families.mmcv.tools_train import train

USAGE = ("CONFIG.py [--work-dir DIR] [--cfg-options KEY=VALUE ...] [--no-validate] [--seed N] [--diff-seed] "
         "[--deterministic] [--load-from CKPT] [--resume-from CKPT] [--auto-resume] [--accelerator A]")  # fmt: skip  # the usage line as printed


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
                                description="Train an OpenMMLab 1.x config under Lightning, as tools/train.py does.")  # fmt: skip  # arguments aligned under the call
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
                   help="override config settings, KEY=VALUE pairs merged into the config")  # fmt: skip  # arguments aligned under the call
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


def main(argv: list[str]) -> None:
    """``lightning-hooks train CONFIG.py ...``: parse as OpenMMLab 1.x ``tools/train.py`` and train."""
    from lightning_hooks.core.trainer_flags import split_argv

    argv, trainer_argv = split_argv(argv)
    p = parser()
    args = p.parse_args(argv)
    from lightning_hooks.core.trainer_options import TrainerRequest  # imports Lightning, which a usage error does not

    request = TrainerRequest.from_args(args, trainer_argv, parser=p)
    cfg = load_config(args)
    devices = int(args.devices) if str(args.devices).isdigit() else args.devices
    train(cfg, validate=not args.no_validate, seed=args.seed, diff_seed=args.diff_seed,
          deterministic=args.deterministic, devices=devices, num_nodes=args.num_nodes, strategy=args.strategy,
          accelerator=args.accelerator, request=request)  # fmt: skip  # arguments aligned under the call
