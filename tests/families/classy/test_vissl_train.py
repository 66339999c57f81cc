"""``lightning-hooks train config=...`` against VISSL's own launcher on VISSL's integration-test configs (CPU, bitwise).

One subprocess (the real torchvision and VISSL) runs ``quick_simclr_synthetic``, ``quick_moco``, ``quick_swav`` and
``quick_dino``, made small by overrides, through VISSL's ``launch_distributed`` (what ``tools/run_distributed_engines.py``
calls) and through ``lightning-hooks train`` (vissl_train_runs.py); then both auto-resume from VISSL's DINO
``model_phase0.torch`` (random transforms: the data's random stream must match too); then both train DINO and VISSL's
CPU-test MoCo (``test_cpu_regnet_moco``: MoCoHook's batch shuffle over ranks, its queue of keys gathered from both) and
SimCLR (``test_cpu_regnet_simclr``: ``simclr_info_nce_loss`` over both ranks' embeddings) on two CPU processes (gloo):
VISSL's launcher with ``NUM_PROC_PER_NODE=2`` (called in the subprocess, as its command calls it: it spawns both
ranks), ``lightning-hooks train --devices 2`` as the command a user runs (vissl_cli.py)
(SwAV in two processes: test_vissl_resume.py). Compared: ``stdout.json`` (losses and LRs per iteration), ``metrics.json``, the checkpoint files and
their contents, the final weights, the values Lightning's CSVLogger received, and per rank what each process trained on.
VISSL's meters (``quick_eval_in1k_linear``) are test_vissl_module.py's.
"""

from __future__ import annotations

import csv
import io

import pytest
import real_torchvision

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")

#: stdout.json fields that hold times, which differ between any two runs.
TIMES = ("btime", "eta", "rolling_eta", "peak_mem")
#: the scenarios and their iterations (resume: the second phase only; two processes: 16 samples in 2 shards of 8)
ITERATIONS = {"simclr": 6, "moco": 6, "swav": 6, "dino": 6, "resume": 3, "dino_two_processes": 4,
              "cpu_regnet_moco_two_processes": 4, "cpu_regnet_simclr_two_processes": 4}  # fmt: skip
SCENARIOS = tuple(ITERATIONS)
TWO_PROCESSES = tuple(name for name in SCENARIOS if name.endswith("_two_processes"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("vissl_train_runs", tmp_path_factory.mktemp("vissl_train"), timeout=1800)


def _run(runs, name):
    result = real_torchvision.scenario_result(runs, name)
    return result["vissl"], result["lightning"]


def _without_times(rows):
    return [{k: v for k, v in row.items() if not any(k.startswith(t) for t in TIMES)} for row in rows]


@pytest.mark.parametrize("name", SCENARIOS)
def test_vissl_train_stdout_json_and_metrics_json(runs, name):
    theirs, ours = _run(runs, name)
    assert len(theirs["stdout"]) == ITERATIONS[name]
    assert _without_times(ours["stdout"]) == _without_times(theirs["stdout"])
    assert ours["metrics"] == theirs["metrics"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_vissl_train_checkpoint_files_and_final_weights(runs, name):
    theirs, ours = _run(runs, name)
    assert ours["files"] == theirs["files"] and theirs["final"] == "model_final_checkpoint_phase1.torch"
    for file, ref in theirs["checkpoints"].items():
        mine = ours["checkpoints"][file]
        assert sorted(mine) == sorted(ref), file
        for key in ("iteration", "iteration_num", "phase_idx", "train_phase_idx", "type"):
            assert mine[key] == ref[key], (file, key)
        assert mine["loss"] == ref["loss"], file  # MoCo: the queue and the key encoder (digests, bitwise)
        task, ref_task = mine["classy_state_dict"], ref["classy_state_dict"]
        assert sorted(task) == sorted(ref_task), file
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters"):
            assert task[key] == ref_task[key], (file, key)
        assert task["base_model"] == ref_task["base_model"], file  # the weights, bitwise
        assert task["optimizer"]["optim"]["state"] == ref_task["optimizer"]["optim"]["state"], file


@pytest.mark.parametrize("name", ("simclr", "moco", "swav", "dino", *TWO_PROCESSES))
def test_vissl_train_values_reach_the_lightning_loggers(runs, name):
    """Every iteration's loss and LR (stdout.json's, rounded there) in the CSVLogger's metrics.csv."""
    theirs, ours = _run(runs, name)
    [text] = ours["csv"]
    rows = list(csv.DictReader(io.StringIO(text)))
    losses = [float(r["train/loss"]) for r in rows if r.get("train/loss")]
    lrs = [float(r["train/lr"]) for r in rows if r.get("train/lr")]
    assert losses == pytest.approx([row["loss"] for row in theirs["stdout"]], abs=1e-5)
    assert lrs == pytest.approx([row["lr"] for row in theirs["stdout"]], abs=5.1e-6)  # stdout.json: 5 decimals



@pytest.mark.parametrize("name", TWO_PROCESSES)
def test_vissl_train_two_processes_shard_and_step_as_vissl(runs, name):
    """Each rank trains on the samples VISSL's sampler gives it (its shard, in its order) with the same transforms,
    and sees the same loss averaged over both ranks, at every iteration (DINO: its teacher's momentum update and
    centering over ranks; MoCo: the keys' batch shuffled over ranks, the queue; SimCLR: the loss over both ranks'
    embeddings)."""
    theirs, ours = _run(runs, name)
    assert sorted(theirs["ranks"]) == [0, 1] and len(theirs["ranks"][0]) == ITERATIONS[name]
    assert [row["input"] for row in theirs["ranks"][0]] != [row["input"] for row in theirs["ranks"][1]]  # 2 shards
    assert ours["ranks"] == theirs["ranks"]
