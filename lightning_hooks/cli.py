"""The ``lightning-hooks`` console script: ``demo``, ``lifecycle``, and LightningCLI's ``fit``/``validate``/``test``."""

from __future__ import annotations

import sys

from lightning.pytorch.cli import LightningCLI

USAGE = """usage: lightning-hooks {demo,lifecycle,fit,validate,test} ...

  demo       train a small BatchNorm CNN on synthetic data with legacy hooks and report what each did
  lifecycle  print which Lightning event fires which legacy mount point, per family
  fit, validate, test
             LightningCLI: lightning-hooks fit --config configs/mmengine.yaml
             (adapters and native callbacks go in trainer.callbacks as class_path/init_args)"""


class LightningHooksCLI(LightningCLI):
    """LightningCLI whose model and data are any classes named by ``class_path`` (defaults: the demo's)."""

    def __init__(self, args: list[str] | None = None) -> None:
        from lightning_hooks.demo import DemoNet, SyntheticData

        super().__init__(
            DemoNet, SyntheticData, subclass_mode_model=True, subclass_mode_data=True, args=args,
            save_config_kwargs={"overwrite": True},
        )  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    command, rest = (args[0], args[1:]) if args else ("--help", [])
    if command == "demo":
        from lightning_hooks.demo import main as demo

        demo(rest)
    elif command == "lifecycle":
        from lightning_hooks.lifecycle import render

        print(render(), end="")
    elif command in ("fit", "validate", "test"):
        LightningHooksCLI(argv)  # None: LightningCLI reads sys.argv itself
    else:
        print(USAGE)
        if command not in ("-h", "--help"):
            sys.exit(f"lightning-hooks: unknown command {command!r}")
