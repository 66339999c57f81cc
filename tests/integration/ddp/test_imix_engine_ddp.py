"""iMIX in two processes (gloo, CPU) against iMIX's own engine, rank by rank (issue #33): one torchrun launch whose
ranks start as iMIX's ``launch`` starts them and run ``imixEngine(cfg).train()`` and the same config under Lightning
DDP (``strategy="ddp"``, ``devices=2``, IMIXAdapter with the Organizer's hooks and loader), fresh, and stopped inside
epoch 1 then resumed (iMIX from its CheckPointHook's epoch file with ``resume_from``, Lightning from its checkpoint):
``tests/helpers/imix_engine_ddp.py``. The config loads through iMIX's own loader builder with the sampler of iMIX's
shipped OSCAR configs (``sampler='DistributedSampler'``), without loader workers (they ship 4): both loops fork an
epoch's workers anew in processes that run gloo's threads, and with 2 workers a rank 2 runs in 201 hung, a worker
deadlocked since its fork (docs/migration-imix.md, "Loader workers"; 2 workers would cost 3 s CPU more); the workers'
seed and data drawn where iMIX makes the epoch's iterator are checked in one process (test_engine.py)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import write_audit
from imix_reference import RESUME_OR_LOAD, assert_same, checkpoints, status_rows, tensorboard
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with the gloo backend"
)


def _without_resume_or_load(log: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(name, line) for name, line in log if not line.startswith(RESUME_OR_LOAD)]


def _writes(found: dict[int, set[str]]) -> dict[int, set[str]]:
    """A run's writes by rank, TensorBoard's event file named without its time, host and process counter."""
    return {rank: {re.sub(r"tfevents\.[^/]+$", "tfevents", e) for e in entries} for rank, entries in found.items()}


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_two_processes_train_and_resume_as_imix_engine_rank_by_rank(tmp_path):
    """On each rank: the same events and counters at every mount point, scalars, learning rates, log buffer history,
    final weights and log lines, fresh and resumed; the same checkpoint files, JSON rows and TensorBoard scalars, and
    each rank writes what its iMIX rank writes (rank 0 alone its work dir's files)."""
    records, work = tmp_path / "writes", tmp_path / "work"
    env = subprocess_env(write_audit.SITE, drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1",
                         **write_audit.env(records, work))  # fmt: skip
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", _free_port(),
               str(HELPERS / "imix_engine_ddp.py"), str(tmp_path)]  # fmt: skip
    try:
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as timeout:  # say where the ranks were
        pytest.fail(f"the ranks ran past 300 s: {str(timeout.stdout)[-3000:]} {str(timeout.stderr)[-6000:]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    for rank in (0, 1):
        runs = torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        for run in ("fresh", "resumed"):
            ref, mine = runs[f"imix_{run}"], runs[f"lightning_{run}"]
            for key in ("events", "scalars", "lrs", "history"):
                assert mine[key] == ref[key], (rank, run, key)
            assert mine["log"] == _without_resume_or_load(ref["log"]), (rank, run)
            assert_same(mine["weights"], ref["weights"], f"rank {rank} {run} weights")
        assert runs["imix_resumed"]["events"][1][:4] == ("before_train_epoch", 4, None, 1)  # epoch 1's start
    for run in ("fresh", "stopped", "resumed"):
        ref, mine = work / f"imix-{run}", work / f"lightning-{run}"
        assert list(checkpoints(mine)) == list(checkpoints(ref)), run
        assert_same(checkpoints(mine), checkpoints(ref), run)
        assert status_rows(mine) == status_rows(ref), run
        assert tensorboard(mine) == tensorboard(ref), run
    sides = write_audit.by_side(write_audit.writes(records))
    for run in ("fresh", "stopped", "resumed"):
        host, ours = _writes(sides[f"imix-{run}"]), _writes(sides[f"lightning-{run}"])
        assert write_audit.differences(host, ours, stores=False) == {}, run
        assert any("_model.pth" in entry for entry in sides[f"imix-{run}"][0])
        assert not any("_model.pth" in entry for entry in sides[f"imix-{run}"].get(1, ())), run
