"""``VisslConfigModule`` (families/classy/vissl_module.py) under ``lightning-hooks train config=... --logger csv
--logger tensorboard`` against VISSL's own launcher on VISSL's linear-evaluation integration-test config
(``quick_eval_in1k_linear``, small: vissl_eval_runs.py), without VISSL's TensorBoard hook: the values VISSL writes to
stdout.json (loss, LR at ``iter``) and metrics.json (its meters at ``train_phase_idx``) reach each Lightning logger
under VISSL's names at VISSL's steps. One subprocess (the real torchvision)."""

from __future__ import annotations

import pytest
import real_torchvision

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("vissl_eval_runs", tmp_path_factory.mktemp("vissl_eval"), timeout=900)


def _run(runs, name):
    result = real_torchvision.scenario_result(runs, name)
    return result["vissl"], result["lightning"]


def _meter_points(metrics):
    """metrics.json's meter values as ``(train_phase_idx, name, value)``, nested keys joined by ``/``."""
    points = []

    def walk(step, name, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(step, f"{name}/{key}", item)
        else:
            points.append((step, name, float(value)))

    for row in metrics:
        for key, value in row.items():
            if key not in ("iteration", "phase_idx", "train_phase_idx"):
                walk(row["train_phase_idx"], key, value)
    return sorted(points)


def _logged(points, prefix):
    return [point for point in points if point[1].startswith(prefix)]


@pytest.mark.parametrize("logger", ["csv", "tensorboard"])
def test_the_loggers_get_metrics_json_s_meters_at_vissl_s_phase_index(runs, logger):
    theirs, ours = _run(runs, "train_only")
    assert ours["metrics"] == theirs["metrics"]
    expected = _meter_points(theirs["metrics"])
    assert {name for _, name, _ in expected} >= {"train_accuracy_list_meter/top_1/res4",
                                                  "train_accuracy_list_meter/top_5/res5"}  # fmt: skip
    assert {step for step, _, _ in expected} == {0, 1}
    [points] = ours["points"][logger]
    logged = _logged(points, ("train_", "test_"))
    assert [(step, name) for step, name, _ in logged] == [(step, name) for step, name, _ in expected]
    assert [value for *_, value in logged] == pytest.approx([value for *_, value in expected], rel=1e-6)


@pytest.mark.parametrize("logger", ["csv", "tensorboard"])
def test_the_loggers_get_stdout_json_s_loss_and_lr_at_vissl_s_iteration(runs, logger):
    """stdout.json's rows (LogLossLrEtaHook: rounded to 5 decimals there) at their ``iter`` (the iterations done
    before the step, from 0; ``LOG_FREQUENCY=4``: the first, every 4 and every 5), as ``train/loss`` and
    ``train/lr``."""
    theirs, ours = _run(runs, "train_only")
    [points] = ours["points"][logger]
    for key, name in (("loss", "train/loss"), ("lr", "train/lr")):
        logged = _logged(points, name)
        assert [step for step, _, _ in logged] == [row["iter"] for row in theirs["stdout"]] == [0, 1, 4, 5]
        assert [value for *_, value in logged] == pytest.approx([row[key] for row in theirs["stdout"]], abs=5.1e-6)
