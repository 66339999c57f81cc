"""The ``lightning-hooks`` console script: ``demo``, ``lifecycle``, and LightningCLI's ``fit``/``validate``/``test``.

Commands import what they need when they run, so that ``lightning-hooks --help`` answers at once.
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

USAGE = """usage: lightning-hooks {demo,lifecycle,train,fit,validate,test} ...

  demo       train a small BatchNorm CNN on synthetic data with legacy hooks and report what each did
  lifecycle  print which Lightning event fires which legacy mount point, per family
  train      train a whole legacy config under Lightning, as the legacy entry point did
             (lightning-hooks train --help lists the config kinds)
  fit, validate, test
             LightningCLI: lightning-hooks fit --config configs/mmengine.yaml
             (adapters and native callbacks go in trainer.callbacks as class_path/init_args;
             --model/--data take any LightningModule/LightningDataModule, default the demo's)"""


def usage_error(message: str) -> NoReturn:
    """Print the usage and ``message`` to stderr and exit with status 2, as argparse does."""
    print(f"{USAGE}\nlightning-hooks: error: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        usage_error("a command is required")
    command, rest = args[0], args[1:]
    if command == "demo":
        from lightning_hooks.demo import main as demo

        demo(rest)
    elif command == "lifecycle":
        from lightning_hooks.lifecycle import render

        description = "Print which Lightning event fires which legacy mount point, per family, as Markdown."
        argparse.ArgumentParser(prog="lightning-hooks lifecycle", description=description).parse_args(rest)
        print(render(), end="")
    elif command == "train":
        from lightning_hooks.train import main as train

        train(rest)  # quiets the upstream notices once it has a config to train
    elif command in ("fit", "validate", "test"):
        from lightning_hooks.console import quiet_upstream_notices
        from lightning_hooks.lightning_cli import LightningHooksCLI
        from lightning_hooks.train import end_process_group, process_group_started

        quiet_upstream_notices()
        started_before = process_group_started()
        LightningHooksCLI(argv)  # None: LightningCLI reads sys.argv itself
        end_process_group(started_before)  # as lightning-hooks train does
    elif command in ("-h", "--help"):
        print(USAGE)
    else:
        usage_error(f"unknown command {command!r}")
