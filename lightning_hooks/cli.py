"""The ``lightning-hooks`` console script."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command, rest = (argv[0], argv[1:]) if argv else ("--help", [])
    if command == "demo":
        from lightning_hooks.demo import main as demo

        demo(rest)
    elif command == "lifecycle":
        from lightning_hooks.lifecycle import render

        print(render(), end="")
    else:
        print(
            "usage: lightning-hooks {demo,lifecycle} ...\n\n"
            "  demo       train a small BatchNorm CNN on synthetic data with legacy hooks and report what each did\n"
            "  lifecycle  print which Lightning event fires which legacy mount point, per family"
        )
        if command not in ("-h", "--help"):
            sys.exit(f"lightning-hooks: unknown command {command!r}")
