"""``lightning-hooks train TASK.json`` against Classy's own ``classy_train.py`` on the same configs (CPU, bitwise).

One subprocess (the real torchvision: ``classy_vision.tasks`` imports it) runs Classy's shipped synthetic template
config and its ResNet-50 model-zoo config, both shrunk, through ``classy_train.py``'s ``main`` and through
``lightning-hooks train`` with the same flags (classy_train_runs.py). Compared: every phase's losses, LR and meter
values, the weights each test phase ran with, the final weights, LossLrMeterLoggingHook's lines, the checkpoint
files CheckpointHook wrote, and the values Lightning's CSVLogger received; states as SHA-1 digests (bitwise).
"""

from __future__ import annotations

import csv
import io

import pytest
import real_torchvision
import torch

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")

SCENARIOS = ("template", "resnet")
LOG_FREQ = {"template": 1, "resnet": 2}  # as classy_train_runs passes --log_freq


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("classy_train_runs", tmp_path_factory.mktemp("classy_train"), timeout=900)


def _run(runs, name):
    result = real_torchvision.scenario_result(runs, name)
    return result["classy"], result["lightning"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_classy_train_phases_losses_lr_meters_and_weights(runs, name):
    theirs, ours = _run(runs, name)
    assert [p["type"] for p in ours["phases"]] == [p["type"] for p in theirs["phases"]]
    assert len(theirs["phases"]) == 2 * (2 if name == "template" else 3)
    for mine, ref in zip(ours["phases"], theirs["phases"], strict=True):
        where = f"{name}: {ref['type']} phase {ref['phase_idx']}"
        for key in ("phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "lr"):
            assert mine.get(key) == ref.get(key), (where, key, mine.get(key), ref.get(key))
        for key, value in ref.get("weights", {}).items():  # classy_train_runs.digest s
            assert mine["weights"][key] == value, (where, key)
    for key, value in theirs["final"].items():
        assert ours["final"][key] == value, (name, key)


@pytest.mark.parametrize("name", SCENARIOS)
def test_classy_train_log_lines(runs, name):
    theirs, ours = _run(runs, name)
    lines = [[line for line in run["log"] if "meters: [" in line] for run in (theirs, ours)]
    assert lines[0] and lines[1] == lines[0]


@pytest.mark.parametrize("name", SCENARIOS)
def test_classy_train_checkpoint_files(runs, name):
    theirs, ours = _run(runs, name)
    assert sorted(ours["checkpoints"]) == sorted(theirs["checkpoints"])
    for file, ref in theirs["checkpoints"].items():
        mine = ours["checkpoints"][file]
        # classy_train.py's flags and config, as CheckpointHook stores them (the Lightning flags added)
        assert {k: v for k, v in mine["input_args"].items() if k in ref["input_args"]}.keys() == ref["input_args"].keys()
        for key in ("log_freq", "checkpoint_period", "distributed_backend"):
            assert mine["input_args"][key] == ref["input_args"][key]
        assert mine["input_args"]["config"]["model"] == ref["input_args"]["config"]["model"]
        mine, ref = mine["classy_state_dict"], ref["classy_state_dict"]
        assert set(mine) - {"iteration"} == set(ref), file
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters"):
            assert _equal(mine[key], ref[key]), (file, key)
        assert _equal(mine["base_model"], ref["base_model"]), file
        assert _equal(mine["optimizer"]["optim"]["state"], ref["optimizer"]["optim"]["state"]), file
        for group, ref_group in zip(mine["optimizer"]["optim"]["param_groups"], ref["optimizer"]["optim"]["param_groups"],
                                    strict=True):  # fmt: skip
            assert {k: group[k] for k in ref_group} == ref_group, file  # (the epoch scheduler adds initial_lr)


@pytest.mark.parametrize("name", SCENARIOS)
def test_classy_train_values_reach_the_lightning_loggers(runs, name):
    """Losses and LRs per step (every --log_freq steps, Lightning's log_every_n_steps), and each phase's mean loss and
    meter values (TensorboardPlotHook's tags), in the CSVLogger's metrics.csv."""
    theirs, ours = _run(runs, name)
    freq = LOG_FREQ[name]
    [text] = ours["csv"]
    rows = list(csv.DictReader(io.StringIO(text)))
    steps = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    losses = [loss for p in theirs["phases"] if p["type"] == "train" for loss in p["losses"]][freq - 1 :: freq]
    assert steps == pytest.approx(losses, rel=1e-6)
    lrs = [float(r["train/lr"]) for r in rows if r.get("train/lr")]
    # the LR of step freq - 1: the template's 0.1; the resnet config's linear per-step 0.1 -> 0.01 over 12 steps at 1/12
    assert len(lrs) == len(losses) and lrs[0] == pytest.approx({"template": 0.1, "resnet": 0.0925}[name])
    for phase in ("train", "test"):
        logged = [float(r[f"Meters/{phase}/accuracy/top_1"]) for r in rows if r.get(f"Meters/{phase}/accuracy/top_1")]
        expected = [p["meters"][0]["top_1"] for p in theirs["phases"] if p["type"] == phase]
        assert logged == pytest.approx(expected), phase
        means = [float(r[f"Losses/{phase}"]) for r in rows if r.get(f"Losses/{phase}")]
        expected = [sum(p["losses"]) / len(p["losses"]) for p in theirs["phases"] if p["type"] == phase]
        assert means == pytest.approx(expected, rel=1e-6, abs=1e-30), phase


def _equal(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    return a == b
