"""``lightning-hooks train TASK.json --logger csv --logger tensorboard --trainer.KEY ...`` on Classy's shrunk
ResNet-50 config (issue #34): the values the module logs under Classy's names (``train/loss``, ``train/lr``, and
TensorboardPlotHook's ``Losses/{phase}``, ``Meters/{phase}/...``) reach both loggers as they reach the default
CSVLogger; CheckpointHook's files and the weights are as without the flags; ``--trainer.KEY`` reaches the Trainer and
an option the config decides is refused naming both sides. One subprocess (the real torchvision)."""

from __future__ import annotations

import numpy as np
import pytest
import real_torchvision
from classy_train_runs import same

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    results = real_torchvision.run_child("classy_logger_runs", tmp_path_factory.mktemp("classy_loggers"), timeout=900)
    names = ("plain", "logged", "vissl_plain", "vissl_logged")
    return {name: real_torchvision.scenario_result(results, name) for name in names}, results["errors"]


def test_the_loggers_get_classys_values_and_the_legacy_files_stay(runs):
    plain, logged = runs[0]["plain"], runs[0]["logged"]
    [expected] = plain["csv"]
    assert {"train/loss", "train/lr", "Losses/train", "Losses/test", "Meters/test/accuracy/top_1"} <= {
        name for _, name, _ in expected}
    assert logged["csv"] == [expected]
    [tensorboard] = logged["tensorboard"]
    assert tensorboard == sorted((s, n, float(np.float32(v))) for s, n, v in expected)
    assert logged["files"] == sorted([*plain["files"], "tensorboard"])
    assert logged["losses"] == plain["losses"]
    assert same(logged["weights"], plain["weights"])


def test_trainer_options_reach_the_trainer(runs):
    plain, logged = runs[0]["plain"], runs[0]["logged"]
    assert logged["trainer"]["max_time"] == 3600 and plain["trainer"]["max_time"] is None
    assert "LambdaCallback" in logged["trainer"]["callbacks"]


@pytest.mark.parametrize(("flags", "both_sides"), [
    ("--trainer.max_epochs 9", ["--trainer.max_epochs 9", "max_epochs=3", "num_epochs"]),
    ("--trainer.enable_checkpointing true", ["--trainer.enable_checkpointing true", "CheckpointHook"]),
    ("--trainer.log_every_n_steps 5", ["--trainer.log_every_n_steps 5", "--log_freq"]),
    ("--trainer.logger false --logger csv", ["--trainer.logger false", "--logger csv"]),
    ("--trainer.gradient_clip_val 0.5", ["--trainer.gradient_clip_val 0.5", "clip_grad_norm=1.0"]),
])  # fmt: skip
def test_an_option_the_config_decides_is_refused_naming_both_sides(runs, flags, both_sides):
    error = runs[1][flags]
    assert error is not None and error.startswith("TrainerOptionError")
    for side in both_sides:
        assert side in error


def test_vissl_s_values_reach_the_loggers_and_its_files_stay(runs):
    """VISSL's SimCLR integration-test config: ``train/loss`` and ``train/lr`` every ``LOG_FREQUENCY`` step in CSV
    and TensorBoard as in the default CSVLogger; VISSL's stdout.json and metrics.json, its checkpoints and the
    weights as without the flags."""
    plain, logged = runs[0]["vissl_plain"], runs[0]["vissl_logged"]
    [expected] = plain["points"]["csv"]
    assert {"train/loss", "train/lr"} <= {name for _, name, _ in expected}
    assert logged["points"]["csv"] == [expected]
    assert logged["points"]["tensorboard"] == [sorted((s, n, float(np.float32(v))) for s, n, v in expected)]
    untimed = [[{k: v for k, v in row.items() if "time" not in k and k != "eta"} for row in run["stdout"]]
               for run in (plain, logged)]  # fmt: skip
    assert untimed[0] == untimed[1] and untimed[0]
    for key in ("metrics", "files", "final", "checkpoints"):
        assert logged[key] == plain[key], key
    assert logged["all_files"] == sorted([*plain["all_files"], "tensorboard"])
