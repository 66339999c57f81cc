"""``lightning-hooks train TASK.json --checkpoint_load_path PATH`` against ``classy_train.py``'s own resume (CPU,
bitwise; classy_resume_runs.py runs both in one subprocess).

A run of Classy's shrunk, narrow ResNet-50 config is preempted after its first train phase; each side resumes from
each side's ``checkpoint.torch`` (the folder or a file): the test phase of epoch 0 Classy runs first, then epochs 1 and 2,
with the same losses, LRs, meters, weights, log lines and checkpoint files as Classy resuming from its own. A run
preempted inside a train phase (Classy checkpoints at train phase ends only) and rerun on its own folder is compared
the same way, with a loader worker (forked) and random crops (seeded from the loader's iterator);
the recorder hook draws from torch's generator at each phase start, and what it drew is compared too.
"""

from __future__ import annotations

import pytest
import real_torchvision
from classy_resume_runs import RESUMES
from classy_train_runs import same

pytestmark = pytest.mark.skipif(
    not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)"
)

REFERENCE = "classy_from_classy"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("classy_resume_runs", tmp_path_factory.mktemp("classy_resume"), timeout=900)


def assert_same_run(ours: dict, theirs: dict, where: str) -> None:
    """Phases (counters, losses, LR, meters, the weights each test phase ran with, the buffers after each train phase),
    final weights, LossLrMeterLoggingHook's lines and CheckpointHook's files; states as classy_resume_runs.digest s."""
    assert [(p["type"], p["phase_idx"]) for p in ours["phases"]] == [
        (p["type"], p["phase_idx"]) for p in theirs["phases"]
    ]
    for mine, ref in zip(ours["phases"], theirs["phases"], strict=True):
        at = f"{where}: {ref['type']} phase {ref['phase_idx']}"
        for key in ("train_phase_idx", "num_updates", "losses", "meters", "lr", "drawn"):
            assert mine.get(key) == ref.get(key), (at, key, mine.get(key), ref.get(key))
        for key, value in ref.get("weights", {}).items():
            assert mine["weights"][key] == value, (at, key)
        assert mine.get("buffers") == ref.get("buffers"), (at, "buffers")
    parted = [key for key, value in theirs["final"].items() if ours["final"].get(key) != value]
    assert ours["final"].keys() == theirs["final"].keys() and not parted, (where, "final weights", parted[:5])
    lines = [[line for line in run["log"] if "meters: [" in line] for run in (theirs, ours)]
    assert lines[0] and lines[1] == lines[0], where
    assert sorted(ours["checkpoints"]) == sorted(theirs["checkpoints"]), where
    for file, ref in theirs["checkpoints"].items():
        mine, ref = ours["checkpoints"][file]["classy_state_dict"], ref["classy_state_dict"]
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "base_model"):
            assert same(mine[key], ref[key]), (where, file, key)
        assert same(mine["optimizer"]["optim"]["state"], ref["optimizer"]["optim"]["state"]), (where, file)


def test_classy_resume_reference_runs_the_pending_test_phase_first(runs):
    ref = real_torchvision.scenario_result(runs, REFERENCE)
    # checkpoint.torch was written at the end of train phase 0: Classy tests epoch 0, then trains epochs 1 and 2
    assert [(p["type"], p["phase_idx"], p["train_phase_idx"]) for p in ref["phases"]] == [
        ("test", 1, 0), ("train", 2, 1), ("test", 3, 1), ("train", 4, 2), ("test", 5, 2)]  # fmt: skip
    assert sorted(ref["checkpoints"]) == ["checkpoint.torch", "model_phase-2_end.torch", "model_phase-4_end.torch"]


@pytest.mark.parametrize("name", [name for name, *_ in RESUMES if name != REFERENCE])
def test_classy_resume_matches_classy_train(runs, name):
    """lightning-hooks train from Classy's checkpoint (folder, file) and from its own; classy_train.py from ours."""
    assert_same_run(
        real_torchvision.scenario_result(runs, name), real_torchvision.scenario_result(runs, REFERENCE), name
    )


def test_classy_resume_from_a_missing_path_starts_fresh_as_classy(runs):
    theirs = real_torchvision.scenario_result(runs, "classy_missing")
    ours = real_torchvision.scenario_result(runs, "lightning_missing")
    assert [p["phase_idx"] for p in theirs["phases"]] == list(range(6))
    assert_same_run(ours, theirs, "missing")
    warnings = [[line for line in run["log"] if "not found" in line] for run in (theirs, ours)]
    assert warnings[0] == warnings[1] and len(warnings[0]) == 1 and "no_such_folder" in warnings[0][0]


def test_classy_rerun_after_a_preemption_mid_phase_matches_classy_train(runs):
    """Preempted inside train phase 2 (after 2 of its 4 steps), then the same command again with
    ``--checkpoint_load_path`` on its own checkpoint folder: the files run A left, then the rerun (test phase 1 again,
    train phase 2 from its first step) and the folder's files, as classy_train.py's. One loader worker, random crops
    and flips: each train phase's batches depend on the worker's seed, drawn when its iterator is made (after test
    phase 1's, and before the recorder's own draw at each phase start, as in Classy's ``advance_phase``): train phase
    2's is the rerun's first iterator, train phase 4's a later one."""
    theirs = real_torchvision.scenario_result(runs, "classy_mid_phase")
    ours = real_torchvision.scenario_result(runs, "lightning_mid_phase")
    assert theirs["left"] == ["checkpoint.torch", "model_phase-0_end.torch"]
    assert sorted(p for p in ours["left"] if p != "lightning_logs") == theirs["left"]
    assert [(p["type"], p["phase_idx"]) for p in theirs["phases"]] == [
        ("test", 1), ("train", 2), ("test", 3), ("train", 4), ("test", 5)]  # fmt: skip
    assert_same_run(ours, theirs, "mid_phase")
