"""Every family under Lightning DDP (CPU, gloo, 2 processes): ranks, primary-only files, collectives, checkpoints,
the model hooks see. ``ddp_scenarios.py`` runs all fits in one ``strategy="ddp"`` launch; these tests read what each
rank's hooks recorded (``{family}_rank{r}.json``) and the files they wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from lh_testing import DDP_LAUNCH_VARIABLES, subprocess_env

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with the gloo backend"
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp")
    env = subprocess_env(drop=DDP_LAUNCH_VARIABLES)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "ddp_scenarios.py"), str(out)],
        cwd=out, env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return out


def ranks(out: Path, family: str) -> list[dict[str, Any]]:
    return [json.loads((out / f"{family}_rank{r}.json").read_text()) for r in (0, 1)]


def test_ddp_mmengine(runs: Path) -> None:
    r0, r1 = ranks(runs, "mmengine")
    # mmengine.dist on Lightning's process group, and the runner's own view
    assert r0["dist"] == [0, 2, True] and r1["dist"] == [1, 2, False]
    assert r0["runner"] == [0, 2, True] and r1["runner"] == [1, 2, True]
    # the LightningModule holds no MMEngine model: runner.model is the DDP wrapper around it
    assert {tuple(m) for m in r0["model"] + r1["model"]} == {("DistributedDataParallel", True)}
    # SyncBuffersHook (built before the process group existed) all-reduces the BN buffers to their mean
    for before0, before1, after0, after1 in zip(r0["buffers"]["before"], r1["buffers"]["before"],
                                                r0["buffers"]["after"], r1["buffers"]["after"]):
        assert before0 != before1
        assert after0 == after1
        assert torch.allclose(torch.tensor(after0), (torch.tensor(before0) + torch.tensor(before1)) / 2)
    # one log_dir for both ranks (rank 0's timestamp); LoggerHook and CheckpointHook wrote once
    assert r0["log_dir"] == r1["log_dir"]
    run1 = runs / "mmengine" / "run1"
    (log_dir,) = [p for p in run1.iterdir() if p.is_dir()]
    assert [p.name for p in log_dir.glob("*.log")] == [f"{log_dir.name}.log"]
    assert len((log_dir / "vis_data" / "scalars.json").read_text().splitlines()) == 4  # 2 epochs x 2 iterations
    assert sorted(p.name for p in run1.glob("*.pth")) == ["epoch_1.pth", "epoch_2.pth"]
    assert (run1 / "last_checkpoint").read_text().endswith("epoch_2.pth")
    # before_save_checkpoint runs where the file is written, rank 0 only (Runner.save_checkpoint is master_only)
    assert r0["saved"] == [1, 2, 3] and "saved" not in r1
    # the checkpoint rank 0 wrote resumes on every rank: after_load_checkpoint ran, weights loaded, one more epoch
    assert r0["loaded"] == r1["loaded"] == [2, 2]
    assert r0["weights_at_start"][2] == r1["weights_at_start"][2] == r0["saved_weights"]
    assert (runs / "mmengine" / "run2" / "epoch_3.pth").is_file()
    assert r0["final"] == r1["final"]
    # a metric logged without sync_dist (rank 0: 0, rank 1: 1) reaches after_val_epoch as its mean on both ranks
    assert r0["val_metrics"] == r1["val_metrics"] == [{"rank_metric": 0.5}]


def test_ddp_mmpretrain_swav_hook(runs: Path) -> None:
    # SwAVHook takes the global batch (batch_size x world size) in __init__, before Lightning's process group exists:
    # [adapter's hook, the hook built in the process group as the Runner builds it]; the queue (cut to a multiple of
    # the global batch, split over the ranks) and one queue file per rank follow
    for rank, seen in enumerate(ranks(runs, "swav")):
        assert seen["batch_size"] == [8, 8] and seen["queue_length"] == [8, 8]
        assert seen["queue"] == [2, 4, 3] and seen["queue_file"] == f"queue{rank}.pth"
        assert (runs / "swav" / f"queue{rank}.pth").is_file()


def test_ddp_classy(runs: Path) -> None:
    r0, r1 = ranks(runs, "classy")
    # VISSL reads RANK / LOCAL_RANK / WORLD_SIZE from the environment; Classy's distributed_util the process group
    assert r0["env"] == ["0", "0", "2"] and r1["env"] == ["1", "1", "2"]
    assert r0["classy"] == [0, 2, True] and r1["classy"] == [1, 2, False]
    assert r0["models"] == r1["models"] == ["DistributedDataParallel", "DistributedDataParallel", "Net"]
    # on_step sees this rank's losses; on_phase_end the losses averaged over ranks (Classy's synchronize_losses)
    assert r0["local"] != r1["local"]
    synced = (torch.tensor(r0["local"]) + torch.tensor(r1["local"])) / 2
    assert r0["synced"] == r1["synced"]
    assert torch.allclose(torch.tensor(r0["synced"]).flatten(), synced)
    # Classy's AccuracyMeter, synced by its own sync_state at phase end: the accuracy over both ranks' samples
    correct = torch.tensor(r0["correct"]) + torch.tensor(r1["correct"])
    expected = [correct[:2].sum().item() / 16, correct[2:].sum().item() / 16]  # 2 batches of 4 per rank and epoch
    assert r0["accuracy"] == r1["accuracy"] == pytest.approx(expected)
    # TensorboardPlotHook ran its all_reduce on both ranks (no deadlock) and wrote on the primary only
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = [EventAccumulator(str(runs / "classy" / f"tb{r}")).Reload().Tags()["scalars"] for r in (0, 1)]
    assert "Losses/train" in tags[0] and tags[1] == []
    # CheckpointHook wrote on the primary; every rank loads it and finds its own (synchronised) weights
    assert sorted(p.name for p in (runs / "classy").glob("*.torch")) == [
        "checkpoint.torch", "model_phase-0_end.torch", "model_phase-2_end.torch"]
    assert r0["checkpoint_matches"] and r1["checkpoint_matches"]


def test_ddp_imix(runs: Path) -> None:
    r0, r1 = ranks(runs, "imix")
    assert r0["comm"] == [0, 2, True] and r1["comm"] == [1, 2, False]
    assert r0["model"] == r1["model"] == "DistributedDataParallel"
    # as iMIX's Organizer: PeriodicLogger and CheckPointHook run on the main process only
    assert r0["ran"]["CheckPointHook"] and r0["ran"]["PeriodicLogger"]
    assert r1["ran"]["CheckPointHook"] == r1["ran"]["PeriodicLogger"] == {}
    assert r0["ran"]["OptimizerHook"] == r1["ran"]["OptimizerHook"] == {"before_train_iter": 4, "after_train_iter": 4}
    assert len((runs / "imix" / "training_status.json").read_text().splitlines()) == 4
    # OptimizerHook's own backward is all-reduced by DDP: both ranks end with the same weights, which were saved
    assert r0["final"] == r1["final"]
    assert r0["checkpoint_matches"] and r1["checkpoint_matches"]


def test_ddp_native(runs: Path) -> None:
    r0, r1 = ranks(runs, "native")
    # PreciseBN all-reduces its sums: each rank gets the statistics of the whole dataset (both ranks' batches)
    assert r0["bn"] == r1["bn"]
    for (mean, var), (ref_mean, ref_var) in zip(r0["bn"], r0["reference"]):
        assert torch.allclose(torch.tensor(mean), torch.tensor(ref_mean), atol=1e-5)
        assert torch.allclose(torch.tensor(var), torch.tensor(ref_var), rtol=1e-5, atol=1e-5)
    assert r0["ema"] == r1["ema"]
    # AnomalyDetector(policy="skip"): only rank 0's loss is +inf at step 1; both ranks skip it, the replicas stay equal
    assert r0["skipped"] == r1["skipped"] == 1
    assert r0["final"] == r1["final"]
