"""iMIX's ``LightningLoggerHook`` under Lightning DDP on two processes (gloo, CPU), with every Lightning logger
(``tests/helpers/imix_logger_ddp.py``, launched by torchrun as iMIX launches its ranks): each store holds the scalars
iMIX's own ``TensorboardLoggerHook`` writes in the same run (names, steps, float32 values), rank 0 alone writes the
stores, and rank 1 writes nothing (issue #34)."""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
import torch.distributed as dist
import write_audit
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from tracker_stores import csv_points, local_stores, mlflow_points, tensorboard_points, wandb_points

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with the gloo backend"
)


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_imix_lightning_logger_hook_on_two_ranks_writes_imixs_scalars_from_rank_0(monkeypatch, tmp_path):
    local_stores(tmp_path, monkeypatch)
    records, run = tmp_path / "writes", tmp_path / "run"
    env = subprocess_env(write_audit.SITE, drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1",
                         **write_audit.env(records, run))  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", _free_port(),
               str(HELPERS / "imix_logger_ddp.py"), str(run)]  # fmt: skip
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    reference = tensorboard_points(run / "runs")  # iMIX's TensorboardLoggerHook, on rank 0 (PeriodicLogger's period)
    assert {"total_loss", "mse_loss", "lr"} <= {name for _, name, _ in reference}
    assert sorted({step for step, _, _ in reference}) == [1, 3, 4, 5, 7, 8]  # 2nd and 4th iteration, epoch's end

    def float32(points: list) -> list:
        return [(step, name, float(np.float32(value))) for step, name, value in points]

    assert tensorboard_points(run / "tensorboard" / "version_0") == reference
    assert float32(csv_points(run / "lightning_logs" / "version_0" / "metrics.csv")) == reference
    assert float32(mlflow_points(run / "mlruns", "imix")) == reference
    assert float32(wandb_points(run)) == reference

    found = write_audit.writes(records)
    assert found.get(1, set()) == set(), sorted(found[1])  # rank 1: no store, no iMIX writer, nothing
    for store in write_audit.LOGGER_STORES.values():
        assert any(entry.startswith(f"write {store}/") for entry in found[0]), store
