"""Small models and data shared by the test suite (importable: pytest puts tests/helpers on sys.path)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

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


#: the child of :func:`commands_in_one_process`: ``json [prelude, [[cwd, argv], ...]]`` on stdin
_COMMANDS_DRIVER = """
import json, os, runpy, sys, tempfile, traceback
prelude, commands = json.load(sys.stdin)
exec(prelude)
results = []
for cwd, argv in commands:
    os.chdir(cwd)
    sys.argv = ["lightning-hooks", *argv]
    saved = os.dup(2)
    with tempfile.TemporaryFile("w+") as err:
        os.dup2(err.fileno(), 2)
        try:
            runpy.run_module("lightning_hooks", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exit:  # as the interpreter ends on it: a message goes to stderr with status 1
            code = exit.code
            if not (code is None or isinstance(code, int)):
                print(code, file=sys.stderr)
                code = 1
        except Exception:  # as the interpreter ends on it: the traceback, status 1
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        results.append([code or 0, err.read()])
print("\\n" + json.dumps(results))  # after anything the commands printed
"""


def commands_in_one_process(
    commands: Iterable[tuple[str | os.PathLike, list[str]]], env: dict[str, str], prelude: str = ""
) -> list[tuple[int, str]]:
    """Each ``python -m lightning_hooks ARGV`` of ``commands`` (``(cwd, argv)`` pairs) one after the other in one
    child process, which imports torch, Lightning and the families once: each command's exit status and what it
    wrote to stderr (file descriptor 2), as a process of its own would end. ``prelude``: code the child runs first.
    For commands that end before training (usage and config errors), whose process state does not carry over."""
    payload = json.dumps([prelude, [[str(cwd), argv] for cwd, argv in commands]])
    proc = subprocess.run([sys.executable, "-c", _COMMANDS_DRIVER], input=payload, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [(code, err) for code, err in json.loads(proc.stdout.splitlines()[-1])]
