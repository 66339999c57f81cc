"""A VISSL run interrupted inside a train phase, then rerun with the same command (auto-resume from its
``model_iteration{N}.torch``): ``lightning-hooks train config=...`` against VISSL's own launcher doing the same, on
VISSL's ``quick_swav``, ``quick_dino``, ``test_cpu_resnet_simclr`` and ``test_cpu_regnet_moco`` (CPU, bitwise;
vissl_resume_runs.py runs both in one subprocess; SwAV's and SimCLR's ResNet-50 at 8 channels a group). DINO loads
its data with a loader worker on both sides, as VISSL's shipped configs do (``DATA.NUM_DATALOADER_WORKERS`` > 0): the
rerun's worker must take its indices after the stateful sampler's skip and its seed from torch's generator where
VISSL's does.

Each side is interrupted after iteration 5 (train phase 1 has trained 2 of its 3 batches) with a checkpoint every 2
iterations, and resumes from ``model_iteration4.torch``: the batch of phase 1 trained before the checkpoint is skipped
(VISSL's ``StatefulDistributedSampler``), so the resumed phase trains 2 batches (phase 2 all 3 again) and the schedules (SwAV's frozen
prototypes and queue, DINO's teacher temperature and momentum, MoCo's queue and key encoder) go on from iteration 4.
Compared: ``stdout.json`` (losses and LRs per iteration, run A's rows then run B's), ``metrics.json``, the checkpoint
files and their contents (weights, optimizer state, the loss's state), run by run. SwAV in two processes (gloo) is
killed with SIGKILL instead (run A as the commands a user runs; VISSL's rerun is its launcher called in the
subprocess: vissl_resume_runs.py), and compared the same way rank by rank.
"""

from __future__ import annotations

import pytest
import real_torchvision
from vissl_resume_runs import NAMES

pytestmark = pytest.mark.skipif(
    not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)"
)

TIMES = ("btime", "eta", "rolling_eta", "peak_mem")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("vissl_resume_runs", tmp_path_factory.mktemp("vissl_resume"), timeout=900)


def _run(runs, name):
    result = real_torchvision.scenario_result(runs, name)
    return result["vissl"], result["lightning"]


def _first_parting(theirs: list, ours: list) -> int | None:
    """The index of the first row where the two lists part (None when they do not)."""
    for i, (a, b) in enumerate(zip(theirs, ours)):
        if a != b:
            return i
    return None if len(theirs) == len(ours) else min(len(theirs), len(ours))


@pytest.mark.parametrize("name", NAMES)
def test_vissl_resume_mid_phase_stdout_json_and_metrics_json(runs, name):
    theirs, ours = _run(runs, name)
    assert theirs["interrupted_files"] == ours["interrupted_files"] == [
        "checkpoint.torch", "model_iteration2.torch", "model_iteration4.torch", "model_phase0.torch"]  # fmt: skip
    rows = [
        [{k: v for k, v in row.items() if not k.startswith(TIMES)} for row in run["stdout"]] for run in (theirs, ours)
    ]
    iters = [row["iter"] for row in rows[0]]  # run A: iterations 1 to 5; run B: 5 to 9 (phase 1's batch 1 skipped)
    start = iters[0]  # (counted from 0 where VISSL logs iteration 0)
    assert iters == [*range(start, start + 5), *range(start + 4, start + 9)], iters  # run B resumed, not restarted
    at = _first_parting(*rows)
    assert at is None, (f"{name}: stdout.json parts at row {at} ({'run A' if at < 5 else 'run B'}): "
                        f"VISSL {rows[0][at:at + 1]}, Lightning {rows[1][at:at + 1]}")  # fmt: skip
    assert ours["metrics"] == theirs["metrics"], name
    assert [row["iteration"] for row in theirs["metrics"]] == [3, 6, 9]


@pytest.mark.parametrize("name", NAMES)
def test_vissl_resume_mid_phase_checkpoint_files_and_contents(runs, name):
    theirs, ours = _run(runs, name)
    assert ours["files"] == theirs["files"] and theirs["final"] == "model_final_checkpoint_phase2.torch"
    assert {"model_iteration6.torch", "model_iteration8.torch"} <= set(theirs["files"])  # run B's
    for file, ref in theirs["checkpoints"].items():
        mine = ours["checkpoints"][file]
        assert sorted(mine) == sorted(ref), (name, file)
        for key in ("iteration", "iteration_num", "phase_idx", "train_phase_idx", "type", "loss"):
            assert mine[key] == ref[key], (name, file, key)
        task, ref_task = mine["classy_state_dict"], ref["classy_state_dict"]
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "base_model"):
            assert task[key] == ref_task[key], (name, file, key)
        assert task["optimizer"]["optim"]["state"] == ref_task["optimizer"]["optim"]["state"], (name, file)


def test_vissl_killed_in_two_processes_and_rerun_matches_vissl(runs):
    """SwAV in two processes (gloo; its ResNet-50 at a width of 8 per group): each side's process group killed with
    SIGKILL once ``model_iteration4.torch`` was written (mid phase 1; the kill lands in iteration 5 or before), then
    the same command again: the rerun's ``stdout.json`` rows and each rank's inputs and losses (iterations 5 to 9),
    ``metrics.json``, and every checkpoint file's contents (SwAV's queues from rank 0, as VISSL saves them), as
    VISSL's launcher. The rerun starts with the prototypes frozen (``TEMP_FROZEN_PARAMS_ITER_MAP``: 6 iterations) and
    the per-rank queues in use (from iteration 2): both go on from VISSL's checkpoint as under VISSL."""
    theirs, ours = _run(runs, "two_processes")
    assert theirs["interrupted_files"] == ours["interrupted_files"] == [
        "checkpoint.torch", "model_iteration2.torch", "model_iteration4.torch", "model_phase0.torch"]  # fmt: skip
    for rank in (0, 1):  # the killed run's rows end where the kill landed: the rerun's are the last 5
        rows = [run["ranks"][rank][-5:] for run in (theirs, ours)]
        assert [row["iteration"] for row in rows[0]] == [5, 6, 7, 8, 9], theirs["ranks"][rank]
        for run in (theirs, ours):  # the rerun resumed: iteration 1 only in the killed run's rows
            assert [row["iteration"] for row in run["ranks"][rank]].count(1) == 1, run["ranks"][rank]
        at = _first_parting(*rows)
        assert at is None, (rank, rows[0][at], rows[1][at])
    assert theirs["ranks"][0][-1]["input"] != theirs["ranks"][1][-1]["input"]  # each rank its shard
    rows = [[{k: v for k, v in row.items() if not k.startswith(TIMES)} for row in run["stdout"][-5:]]
            for run in (theirs, ours)]  # fmt: skip
    assert [row["iter"] for row in rows[0]] == [row["iter"] for row in rows[1]] and len(rows[0]) == 5
    at = _first_parting(*rows)
    assert at is None, (rows[0][at], rows[1][at])
    assert ours["metrics"] == theirs["metrics"] and [row["iteration"] for row in theirs["metrics"]] == [3, 6, 9]
    assert ours["files"] == theirs["files"] and sorted(ours["checkpoints"]) == sorted(theirs["checkpoints"])
    for file, ref in theirs["checkpoints"].items():
        mine = ours["checkpoints"][file]
        for key in ("iteration", "iteration_num", "phase_idx", "train_phase_idx", "type", "loss"):
            assert mine[key] == ref[key], (file, key)
        task, ref_task = mine["classy_state_dict"], ref["classy_state_dict"]
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "base_model"):
            assert task[key] == ref_task[key], (file, key)
        assert task["optimizer"]["optim"]["state"] == ref_task["optimizer"]["optim"]["state"], file
