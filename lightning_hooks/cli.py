"""The ``lightning-hooks`` console script: ``demo``, ``lifecycle``, and LightningCLI's ``fit``/``validate``/``test``."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from jsonargparse import Namespace
from lightning_hooks.core.lightning_api import submodule

LightningArgumentParser, LightningCLI = submodule("cli").LightningArgumentParser, submodule("cli").LightningCLI

USAGE = """usage: lightning-hooks {demo,lifecycle,fit,validate,test} ...

  demo       train a small BatchNorm CNN on synthetic data with legacy hooks and report what each did
  lifecycle  print which Lightning event fires which legacy mount point, per family
  fit, validate, test
             LightningCLI: lightning-hooks fit --config configs/mmengine.yaml
             (adapters and native callbacks go in trainer.callbacks as class_path/init_args;
             --model/--data take any LightningModule/LightningDataModule, default the demo's)"""

DEMO_MODEL, DEMO_DATA = "lightning_hooks.demo.DemoNet", "lightning_hooks.demo.SyntheticData"


class LightningHooksCLI(LightningCLI):
    """LightningCLI whose model and data are any LightningModule and LightningDataModule named by ``class_path``.

    ``model`` defaults to the demo's ``DemoNet``; ``data`` is optional (a model may bring its own loaders) and
    defaults to the demo's ``SyntheticData`` when the model is ``DemoNet``.
    """

    def __init__(self, args: list[str] | None = None) -> None:
        super().__init__(args=args, save_config_kwargs={"overwrite": True})

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.set_defaults({"model": {"class_path": DEMO_MODEL}})

    def before_instantiate_classes(self) -> None:
        config = self.config[self.subcommand] if self.subcommand else self.config
        if config.get("data") is None and config.model.class_path == DEMO_MODEL:
            config.data = Namespace(class_path=DEMO_DATA)


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
    elif command in ("fit", "validate", "test"):
        LightningHooksCLI(argv)  # None: LightningCLI reads sys.argv itself
    elif command in ("-h", "--help"):
        print(USAGE)
    else:
        usage_error(f"unknown command {command!r}")
