"""Small models and data shared by the test suite (importable: pytest puts tests/helpers on sys.path)."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

HELPERS = Path(__file__).resolve().parent  # tests/helpers: the kits and the scripts test subprocesses run
ROOT = HELPERS.parents[1]  # the checkout under test
#: what a DDP launch sets in its ranks: a test that launches DDP itself starts its subprocess without them
DDP_LAUNCH_VARIABLES = ("LOCAL_RANK", "RANK", "WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


class TinyModule(pl.LightningModule):
    """Linear regression: the smallest LightningModule a hook can observe."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("val_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def tiny_loader(n: int = 8, batch_size: int = 2, seed: int = 0) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


def load_options(weights_only: bool | None) -> dict[str, Any]:
    """``weights_only=`` for ``Trainer.fit``/``validate``/``test``: Lightning 2.6 takes it; 2.4 and 2.5 have no such
    argument and load checkpoints with ``weights_only=False``."""
    if "weights_only" in inspect.signature(pl.Trainer.fit).parameters:
        return {"weights_only": weights_only}
    assert not weights_only, "this Lightning cannot load checkpoints with weights_only=True"
    return {}


def python_path(*paths: str | os.PathLike, inherit: bool = True) -> str:
    """``PYTHONPATH`` for a test's subprocess: this checkout and ``tests/helpers``, then ``paths``, then (``inherit``)
    the suite's own."""
    parts = [str(ROOT), str(HELPERS), *map(str, paths), os.environ.get("PYTHONPATH", "") if inherit else ""]
    return os.pathsep.join(filter(None, parts))


def subprocess_env(
    *paths: str | os.PathLike, inherit: bool = True, drop: Iterable[str] = (), **variables: str
) -> dict[str, str]:
    """The environment of a test's subprocess: ``os.environ`` with :func:`python_path` (``paths``, ``inherit``) as
    ``PYTHONPATH``, without the variables in ``drop``, plus ``variables``.

    Example::

        subprocess.run([sys.executable, "ddp_scenarios.py"], env=subprocess_env(HERE, drop=DDP_LAUNCH_VARIABLES))
    """
    drop = set(drop)
    env = {key: value for key, value in os.environ.items() if key not in drop}
    env.update(PYTHONPATH=python_path(*paths, inherit=inherit), **variables)
    return env


def run_console_script(argv: list[str], cwd: str | os.PathLike | None = None) -> tuple[int, str, str]:
    """``lightning-hooks ARGV`` run in this process as its console script runs it (``sys.argv`` set, then
    ``lightning_hooks.cli.main()``), ended as the interpreter ends that process: its exit status and what it wrote to
    file descriptors 1 and 2 (stdout, stderr; this process's ``sys.stdout`` / ``sys.stderr`` must write there, as in
    a test's child process). ``SystemExit``'s code is the status (``None``: 0); a code that is no int
    (``SystemExit("text")``) is written to stderr with status 1; any other exception's traceback goes to stderr with
    status 1. In ``cwd`` when given; the working folder and ``sys.argv`` are restored after it. For commands whose
    process state does not carry over (those that end before training, or a test child's last).

    Example::

        code, out, err = run_console_script(["train", "config=test/integration_test/quick_simclr_synthetc"])
    """
    from lightning_hooks.cli import main

    saved_argv, saved_cwd = sys.argv, os.getcwd()
    with _written_to(1, sys.stdout) as out, _written_to(2, sys.stderr) as err:
        sys.argv = ["lightning-hooks", *argv]
        try:
            if cwd is not None:
                os.chdir(cwd)
            main()
            code = 0
        except SystemExit as exit:
            code = _exit_status(exit.code)
        except Exception:  # as the interpreter ends the process: the traceback, status 1
            traceback.print_exc()
            code = 1
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
    return code, out[0], err[0]


def _exit_status(code: object) -> int:
    """The exit status the interpreter gives ``SystemExit(code)``, writing a code that is no int to stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _written_to(fd: int, stream: TextIO) -> Iterator[list[str]]:
    """What is written to file descriptor ``fd`` while the block runs (``stream``, the Python file on it, flushed at
    both ends): the list the block gets holds that text once the block ends."""
    text: list[str] = []
    stream.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile("w+") as file:
        os.dup2(file.fileno(), fd)
        try:
            yield text
        finally:
            stream.flush()
            os.dup2(saved, fd)
            os.close(saved)
            file.seek(0)
            text.append(file.read())


#: the child of :func:`commands_in_one_process`: ``json [prelude, helpers, [[cwd, argv], ...]]`` on stdin
_COMMANDS_DRIVER = """
import json, sys
prelude, helpers, commands = json.load(sys.stdin)
exec(prelude)
sys.path.insert(0, helpers)
from lh_testing import run_console_script
results = [run_console_script(argv, cwd)[::2] for cwd, argv in commands]
print(json.dumps(results))
"""


def commands_in_one_process(
    commands: Iterable[tuple[str | os.PathLike, list[str]]], env: dict[str, str], prelude: str = ""
) -> list[tuple[int, str]]:
    """Each ``lightning-hooks ARGV`` of ``commands`` (``(cwd, argv)`` pairs) one after the other in one child process,
    which imports torch, Lightning and the families once (:func:`run_console_script`): each command's exit status and
    what it wrote to stderr, as a process of its own would end. ``prelude``: code the child runs first. For commands
    that end before training (usage and config errors), whose process state does not carry over."""
    payload = json.dumps([prelude, str(HELPERS), [[str(cwd), argv] for cwd, argv in commands]])
    proc = subprocess.run([sys.executable, "-c", _COMMANDS_DRIVER], input=payload, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [(code, err) for code, err in json.loads(proc.stdout.splitlines()[-1])]
