"""``lightning-hooks train TASK.json --devices 2`` (Lightning DDP, CPU, gloo), and ``lightning-hooks train TASK.json
--distributed_backend ddp`` under ``torchrun --nproc_per_node 2``, against ``classy_train.py --distributed_backend ddp``
under ``torchrun --nproc_per_node 2`` (Classy's DistributedTrainer), bitwise.

classy_ddp_runs.py is the script both launches run (Classy's shrunk, narrow ResNet-50 config, 2 epochs). Compared
per rank: each step's loss (this rank's shard of the data, Classy's DistributedSampler), each phase's losses averaged over the
ranks and meters synced over them, the LR, the weights each test phase ran with (BatchNorm buffers broadcast from
rank 0 before it, Classy's default ``before_eval``), the final weights, LossLrMeterLoggingHook's lines; the checkpoint
files rank 0 wrote; and the values rank 0 logged to Lightning's CSVLogger.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import real_torchvision
import torch
import torch.distributed as dist
from classy_ddp_runs import SIDES, prepare, prepare_mid_phase
from classy_train_runs import same
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

pytestmark = pytest.mark.skipif(
    not (real_torchvision.available() and dist.is_available() and dist.is_gloo_available()),
    reason="needs the real torchvision (`bash scripts/setup.sh test`) and torch.distributed with gloo",
)

SCRIPT = HELPERS / "classy_ddp_runs.py"
STEM = "initial_block._module.1.running_mean"  # the ResNet's first BatchNorm


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("classy_ddp")
    prepare(out)
    env = subprocess_env(drop=(*DDP_LAUNCH_VARIABLES, "LOCAL_WORLD_SIZE"))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                str(_free_port())]  # fmt: skip
    for side in SIDES:
        launch = [sys.executable] if side == "lightning" else torchrun
        proc = subprocess.run([*launch, str(SCRIPT), str(out), side], cwd=out, env=env, capture_output=True, text=True,
                              timeout=600, check=False)  # fmt: skip
        assert proc.returncode == 0, (side, proc.stdout[-3000:] + proc.stderr[-6000:])
    return out


def _runs(out: Path, rank: int, side: str = "lightning") -> tuple[dict, dict]:
    """Classy's run and ``side``'s, as ``rank`` recorded them."""
    runs = []
    for side in ("classy", side):
        run = torch.load(out / side / f"recorded_rank{rank}.pt", weights_only=False)
        run["log"] = json.loads((out / side / f"log_rank{rank}.json").read_text())
        runs.append(run)
    return runs[0], runs[1]


@pytest.mark.parametrize("side", SIDES[1:])
@pytest.mark.parametrize("rank", [0, 1])
def test_classy_ddp_steps_phases_and_weights_per_rank(out, rank, side):
    theirs, ours = _runs(out, rank, side)
    assert [(p["type"], p["phase_idx"]) for p in theirs["phases"]] == [
        ("train", 0),
        ("test", 1),
        ("train", 2),
        ("test", 3),
    ]
    for mine, ref in zip(ours["phases"], theirs["phases"], strict=True):
        where = f"rank {rank}: {ref['type']} phase {ref['phase_idx']}"
        for key in ("type", "phase_idx", "train_phase_idx", "num_updates", "step_losses", "losses", "meters", "lr"):
            assert mine.get(key) == ref.get(key), (where, key, mine.get(key), ref.get(key))
        for kind in ("weights", "buffers"):  # the buffers at a train phase's end: this rank's own (no broadcast)
            for key, value in ref.get(kind, {}).items():
                assert mine[kind][key] == value, (where, kind, key)  # classy_train_runs.digest s
    for key, value in theirs["final"].items():
        assert ours["final"][key] == value, (rank, key)
    lines = [[line for line in run["log"] if "meters: [" in line] for run in (theirs, ours)]
    assert lines[0] and lines[1] == lines[0] and all(f"[{rank}]" in line for line in lines[0])


def test_classy_ddp_ranks_train_on_their_shards_and_sync_at_phase_end(out):
    """The check that the comparison above compares something: the ranks saw different batches (different step
    losses), and the phase-end losses and meters are the same on both (Classy's all-reduce)."""
    r0, r1 = (_runs(out, rank)[1] for rank in (0, 1))
    for p0, p1 in zip(r0["phases"], r1["phases"], strict=True):
        assert p0["step_losses"] != p1["step_losses"]
        if p0["type"] == "train":
            assert p0["buffers"][STEM] != p1["buffers"][STEM]
        assert p0["losses"] == p1["losses"] and p0["meters"] == p1["meters"]
    for key, value in r0["final"].items():
        assert r1["final"][key] == value, key  # the test phases ran with rank 0's BatchNorm buffers


@pytest.mark.parametrize("side", SIDES[1:])
def test_classy_ddp_checkpoint_files(out, side):
    files = [{p.name: torch.load(p, weights_only=False) for p in (out / run / "ckpt").glob("*.torch")}
             for run in ("classy", side)]  # fmt: skip
    theirs, ours = files
    assert sorted(theirs) == sorted(ours) == ["checkpoint.torch", "model_phase-0_end.torch", "model_phase-2_end.torch"]
    for file, ref in theirs.items():
        mine = ours[file]
        assert mine["input_args"]["distributed_backend"] == ref["input_args"]["distributed_backend"] == "ddp"
        mine, ref = mine["classy_state_dict"], ref["classy_state_dict"]
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "base_model"):
            assert same(mine[key], ref[key]), (file, key)
        assert same(mine["optimizer"]["optim"]["state"], ref["optimizer"]["optim"]["state"]), file


@pytest.mark.parametrize("side", SIDES[1:])
def test_classy_ddp_values_reach_the_lightning_loggers_from_rank_0(out, side):
    """Rank 0's CSVLogger (Lightning logs on rank 0): each step's loss and LR as rank 0 saw them (--log_freq 1), each
    phase's mean loss and accuracy as synced over the ranks."""
    theirs, _ = _runs(out, 0)
    [metrics] = (out / side / "ckpt" / "lightning_logs").glob("version_*/metrics.csv")
    rows = list(csv.DictReader(io.StringIO(metrics.read_text())))
    steps = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    assert steps == pytest.approx(
        [x for p in theirs["phases"] if p["type"] == "train" for x in p["step_losses"]], rel=1e-6
    )
    assert len([r for r in rows if r.get("train/lr")]) == len(steps)
    for phase in ("train", "test"):
        logged = [float(r[f"Meters/{phase}/accuracy/top_1"]) for r in rows if r.get(f"Meters/{phase}/accuracy/top_1")]
        assert logged == pytest.approx([p["meters"][0]["top_1"] for p in theirs["phases"] if p["type"] == phase]), phase
        means = [float(r[f"Losses/{phase}"]) for r in rows if r.get(f"Losses/{phase}")]
        expected = [sum(p["losses"]) / len(p["losses"]) for p in theirs["phases"] if p["type"] == phase]
        assert means == pytest.approx(expected, rel=1e-6), phase


@pytest.fixture(scope="module")
def resnext_out(tmp_path_factory) -> Path:
    """Classy's model-zoo ImageNet ResNeXt-50 config made small (classy_ddp_runs.resnext_config) in 2 processes:
    classy_train.py under torchrun, then lightning-hooks train --devices 2."""
    out = tmp_path_factory.mktemp("classy_ddp_resnext")
    prepare(out, "resnext")
    env = subprocess_env(drop=(*DDP_LAUNCH_VARIABLES, "LOCAL_WORLD_SIZE"))
    for side in SIDES[:2]:
        launch = [sys.executable] if side == "lightning" else [
            sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port())]
        proc = subprocess.run([*launch, str(SCRIPT), str(out), side, "resnext"], cwd=out, env=env, capture_output=True,
                              text=True, timeout=600, check=False)  # fmt: skip
        assert proc.returncode == 0, (side, proc.stdout[-3000:] + proc.stderr[-6000:])
    return out


@pytest.mark.parametrize("rank", [0, 1])
def test_classy_ddp_model_zoo_resnext_per_rank(resnext_out, rank):
    """The ImageNet ResNeXt-50 config (image_path data, step LR per epoch): each phase's step losses, synced losses
    and meters, LR, the weights and buffers at each phase's end, the final weights and the meter lines, rank by rank;
    the ranks trained on their own shards."""
    theirs, ours = _runs(resnext_out, rank)
    assert [(p["type"], p["phase_idx"]) for p in theirs["phases"]] == [("train", 0), ("test", 1), ("train", 2),
                                                                       ("test", 3)]  # fmt: skip
    lines = _assert_same_phases(theirs, ours, "resnext", rank)
    assert lines[0] and lines[1] == lines[0]
    other = _runs(resnext_out, 1 - rank)[0]
    assert theirs["phases"][0]["step_losses"] != other["phases"][0]["step_losses"]


def _assert_same_phases(theirs: dict, ours: dict, label: str, rank: int) -> list[list[str]]:
    """Each phase's counters, step losses, synced losses and meters, LR, weights and buffers, then the final weights,
    equal on both sides; returns both sides' meter log lines (Classy's, then ours)."""
    for mine, ref in zip(ours["phases"], theirs["phases"], strict=True):
        where = f"{label}, rank {rank}: {ref['type']} phase {ref['phase_idx']}"
        for key in ("type", "phase_idx", "train_phase_idx", "num_updates", "step_losses", "losses", "meters", "lr"):
            assert mine.get(key) == ref.get(key), (where, key, mine.get(key), ref.get(key))
        for kind in ("weights", "buffers"):
            for key, value in ref.get(kind, {}).items():
                assert mine[kind][key] == value, (where, kind, key)
    for key, value in theirs["final"].items():
        assert ours["final"][key] == value, (rank, key)
    return [[line for line in run["log"] if "meters: [" in line] for run in (theirs, ours)]


@pytest.fixture(scope="module")
def mid_phase_out(tmp_path_factory) -> Path:
    """Each side preempted inside train phase 2 (classy_ddp_runs.PREEMPT_AT), then the same command again with
    ``--checkpoint_load_path`` on its checkpoint folder, both in 2 processes: classy_train.py under torchrun, then
    lightning-hooks train --devices 2. The files the preempted run left are listed in ``OUT/<side>/left.json``. The
    ``torchrun`` side is only a rerun: ``lightning-hooks train --distributed_backend ddp`` under torchrun, as a Classy
    user relaunches a job, on a copy of the folder classy_train.py's preempted run left."""
    out = tmp_path_factory.mktemp("classy_ddp_mid_phase")
    env = subprocess_env(drop=(*DDP_LAUNCH_VARIABLES, "LOCAL_WORLD_SIZE"))
    for side in SIDES:
        for stage in ("rerun",) if side == "torchrun" else ("preempted", "rerun"):
            prepare_mid_phase(out, side, preempt=stage == "preempted")
            launch = [sys.executable] if side == "lightning" else [
                sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port())]
            proc = subprocess.run([*launch, str(SCRIPT), str(out), side, "resnet", stage], cwd=out, env=env,
                                  capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
            assert proc.returncode == 0, (side, stage, proc.stdout[-3000:] + proc.stderr[-6000:])
            if stage == "preempted":
                left = sorted(p.name for p in (out / side / "ckpt").iterdir() if p.name != "lightning_logs")
                (out / side / "left.json").write_text(json.dumps(left))
            if side == "classy" and stage == "preempted":
                shutil.copytree(out / side / "ckpt", out / "torchrun" / "ckpt")
    return out


@pytest.mark.parametrize("side", SIDES[1:])
@pytest.mark.parametrize("rank", [0, 1])
def test_classy_ddp_rerun_after_a_preemption_mid_phase_per_rank(mid_phase_out, rank, side):
    """Preempted after the first step of train phase 2 on both ranks, Classy's checkpoint.torch is the one of train
    phase 0's end; the rerun on the folder runs test phase 1 again, then train phase 2 from its first step and test
    phase 3: each phase's step losses, synced losses and meters, LR, weights and buffers, the final weights and the
    meter lines, rank by rank, as classy_train.py's DistributedTrainer rerun; and the checkpoint files rank 0 wrote.
    ``side`` ``torchrun``: our command under torchrun, rerun on classy_train.py's preempted folder."""
    out = mid_phase_out
    left = [json.loads((out / run / "left.json").read_text()) for run in SIDES[:2]]
    assert left[0] == left[1] == ["checkpoint.torch", "model_phase-0_end.torch"]
    theirs, ours = _runs(out, rank, side)
    assert [(p["type"], p["phase_idx"]) for p in theirs["phases"]] == [("test", 1), ("train", 2), ("test", 3)]
    lines = _assert_same_phases(theirs, ours, "mid-phase rerun", rank)
    assert lines[0] and lines[1] == lines[0] and all(f"[{rank}]" in line for line in lines[0])
    other = _runs(out, 1 - rank, side)[0]
    assert theirs["phases"][1]["step_losses"] != other["phases"][1]["step_losses"]  # each rank's own shard
    if rank == 0:  # the rerun's CSVLogger: Classy's train step count (from 1, 2 a phase) goes on from the checkpoint
        metrics = max((out / side / "ckpt" / "lightning_logs").glob("version_*/metrics.csv"))
        rows = list(csv.DictReader(io.StringIO(metrics.read_text())))
        logged = [(int(r["step"]), float(r["train/loss"])) for r in rows if r.get("train/loss")]
        assert [step for step, _ in logged] == [3, 4]
        assert [loss for _, loss in logged] == pytest.approx(theirs["phases"][1]["step_losses"], rel=1e-6)
        files = [{p.name: torch.load(p, weights_only=False) for p in (out / run / "ckpt").glob("*.torch")}
                 for run in ("classy", side)]  # fmt: skip
        assert sorted(files[0]) == sorted(files[1]) == ["checkpoint.torch", "model_phase-0_end.torch",
                                                        "model_phase-2_end.torch"]  # fmt: skip
        for file, ref in files[0].items():
            mine, ref = files[1][file]["classy_state_dict"], ref["classy_state_dict"]
            for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "base_model"):
                assert same(mine[key], ref[key]), (file, key)
            assert same(mine["optimizer"]["optim"]["state"], ref["optimizer"]["optim"]["state"]), file
