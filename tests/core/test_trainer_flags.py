"""``core/trainer_flags.py``: the command-line side of the Lightning options, which a family's parser reads before
anything imports Lightning (``split_argv`` and ``add_arguments`` are tested with ``TrainerRequest`` in
``test_trainer_options.py``; the whole ``lightning-hooks train CONFIG --bad-option`` in ``tests/test_cli.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_a_parser_with_the_lightning_flags_imports_neither_torch_nor_lightning():
    code = ("import argparse, sys\n"
            "from lightning_hooks.core.family import add_lightning_arguments\n"
            "from lightning_hooks.core.trainer_flags import split_argv\n"
            "argv, trainer_argv = split_argv(['cfg.py', '--logger', 'csv', '--trainer.max_epochs', '2'])\n"
            "parser = argparse.ArgumentParser()\n"
            "parser.add_argument('config')\n"
            "add_lightning_arguments(parser)\n"
            "args = parser.parse_args(argv)\n"
            "print(args.logger, trainer_argv, sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'lightning', 'pytorch_lightning', 'jsonargparse'}))\n")  # fmt: skip  # the child's code, a line each
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "['csv'] ['--trainer.max_epochs', '2'] []"
