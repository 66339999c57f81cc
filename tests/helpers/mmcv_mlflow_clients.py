"""Which rank of a ``lightning-hooks train --logger mlflow`` run made MLflow's client: the callback
(``--trainer.callbacks+=mmcv_mlflow_clients.MlflowClientsHeld --trainer.callbacks.folder DIR``) counts, on each rank
at the end of the fit, the ``mlflow.tracking.MlflowClient`` objects its process holds and writes ``rank{R}.json``
into ``DIR``. The write audit (tests/helpers/write_audit.py) cannot tell: a client on rank 1 makes the ``file:``
store's folders only where it reaches them before rank 0, and otherwise only reads whether they are there.

Example::

    lightning-hooks train CONFIG --devices 2 --logger mlflow \\
        --trainer.callbacks+=mmcv_mlflow_clients.MlflowClientsHeld --trainer.callbacks.folder counts
    clients_by_rank(Path("counts"))  # {0: 1, 1: 0}
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path
from typing import Any

from lightning.pytorch import Callback
from typing_extensions import override


class MlflowClientsHeld(Callback):
    """At the end of the fit, ``{folder}/rank{R}.json``: how many ``MlflowClient`` objects this rank's process holds
    (0 where it never imported MLflow's client; importing it here would import mlflow before the run's log file
    opens, which the command itself must do)."""

    def __init__(self, folder: str) -> None:
        self.folder = Path(folder)

    @override
    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        client = getattr(sys.modules.get("mlflow.tracking"), "MlflowClient", None)
        held = 0 if client is None else sum(issubclass(type(o), client) for o in gc.get_objects())
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"rank{trainer.global_rank}.json").write_text(json.dumps(held))


def clients_by_rank(folder: Path) -> dict[int, int]:
    """The counts :class:`MlflowClientsHeld` wrote into ``folder``, by rank."""
    return {int(p.stem.removeprefix("rank")): json.loads(p.read_text()) for p in sorted(folder.glob("rank*.json"))}
