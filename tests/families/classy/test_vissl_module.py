"""``VisslConfigModule`` (families/classy/vissl_module.py) under ``lightning-hooks train config=... --logger csv
--logger tensorboard`` against VISSL's own launcher on VISSL's linear-evaluation integration-test config
(``quick_eval_in1k_linear``, small: vissl_eval_runs.py), without VISSL's TensorBoard hook: the values VISSL writes to
stdout.json (loss, LR at ``iter``) and metrics.json (its meters at ``train_phase_idx``) reach each Lightning logger
under VISSL's names at VISSL's steps; with the config's ``TEST_MODEL``, its test phases run as under VISSL (bitwise),
in one process and in two (rank by rank), after the train phases VISSL's ``TEST_EVERY_NUM_EPOCH`` schedule tests.
One subprocess (the real torchvision). What cannot map (``TEST_ONLY``) is refused naming the option; the command's
refusals before training (Apex's amp, VISSL's FSDP task) are its ``main`` called in that subprocess."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import real_torchvision

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.families.classy.vissl_module import (
    check_amp_device,
    check_amp_type,
    check_params_file,
    check_test_phases,
    check_trainable,
)

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("vissl_eval_runs", tmp_path_factory.mktemp("vissl_eval"), timeout=900)


def _run(runs, name):
    result = real_torchvision.scenario_result(runs, name)
    return result["vissl"], result["lightning"]


#: stdout.json fields that hold times, which differ between any two runs.
TIMES = ("btime", "eta", "rolling_eta", "peak_mem")


def _untimed(rows):
    return [{k: v for k, v in row.items() if not k.startswith(TIMES)} for row in rows]


def _assert_same_checkpoints(theirs, ours, last_phase=1):
    """The same checkpoint files, the last one final; each file's counters, loss state, task state (meters, losses),
    weights and optimizer state, bitwise (digests)."""
    assert ours["files"] == theirs["files"] and theirs["final"] == f"model_final_checkpoint_phase{last_phase}.torch"
    for file, ref in theirs["checkpoints"].items():
        mine = ours["checkpoints"][file]
        assert sorted(mine) == sorted(ref), file
        for key in ("iteration", "iteration_num", "phase_idx", "train_phase_idx", "type", "loss"):
            assert mine[key] == ref[key], (file, key)
        task, ref_task = mine["classy_state_dict"], ref["classy_state_dict"]
        assert sorted(task) == sorted(ref_task), file
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates", "losses", "meters", "base_model"):
            assert task[key] == ref_task[key], (file, key)
        assert task["optimizer"]["optim"]["state"] == ref_task["optimizer"]["optim"]["state"], file


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


def test_meters_write_metrics_json_as_vissl(runs):
    """VISSL's linear evaluation (``quick_eval_in1k_linear``: frozen trunk, two heads): its ``accuracy_list_meter``,
    built from ``METERS`` and updated at each train step with both heads' outputs, and each phase's values in
    ``metrics.json`` (LogLossMetricsCheckpointHook) as under VISSL's launcher, bitwise; the same stdout.json rows
    (LOG_FREQUENCY=4: iterations 0, 1, 4, 5), checkpoint files, weights and optimizer state. Both start from a
    pretrained trunk (``MODEL.WEIGHTS_INIT.PARAMS_FILE``, loaded by VISSL's ``_build_model``; #33)."""
    theirs, ours = _run(runs, "train_only")
    values = [row["train_accuracy_list_meter"] for row in theirs["metrics"]]
    assert [row["train_phase_idx"] for row in theirs["metrics"]] == [0, 1]
    assert all(sorted(value["top_5"]) == ["res4", "res5"] for value in values) and values[0] != values[1]
    assert ours["metrics"] == theirs["metrics"]
    assert [row["iter"] for row in theirs["stdout"]] == [0, 1, 4, 5]
    assert _untimed(ours["stdout"]) == _untimed(theirs["stdout"])
    _assert_same_checkpoints(theirs, ours)


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


def test_test_model_runs_vissl_s_test_phases_as_vissl(runs):
    """``TEST_MODEL: True`` (the config's own, ``TEST_EVERY_NUM_EPOCH: 2``) over 3 epochs: VISSL tests after train
    phases 0 and 2, not 1. The same stdout.json rows, the same metrics.json lines (train and test meters at each
    phase, bitwise), the same checkpoint files, counters, weights and optimizer state as VISSL's launcher; the loggers
    get the test meters too."""
    theirs, ours = _run(runs, "test_model")
    assert [(row["phase_idx"], row["train_phase_idx"]) for row in theirs["metrics"]] == [
        (0, 0), (1, 0), (2, 1), (3, 2), (4, 2)]  # fmt: skip
    tests = ["iteration", "phase_idx", "test_accuracy_list_meter", "train_phase_idx"]
    assert [sorted(row) == tests for row in theirs["metrics"]] == [False, True, False, False, True]
    assert ours["metrics"] == theirs["metrics"]
    assert _untimed(ours["stdout"]) == _untimed(theirs["stdout"]) and theirs["stdout"]
    _assert_same_checkpoints(theirs, ours, last_phase=2)
    [points] = ours["points"]["csv"]
    expected = _meter_points(theirs["metrics"])
    logged = _logged(points, ("train_", "test_"))
    assert [(step, name) for step, name, _ in logged] == [(step, name) for step, name, _ in expected]
    assert [value for *_, value in logged] == pytest.approx([value for *_, value in expected], rel=1e-6)


@pytest.mark.parametrize(("name", "metrics", "iterations"), [
    ("resumed_after_untested_phase", [(3, 2), (4, 2)], [6, 7, 8]),
    ("resumed_inside_tested_phase", [(3, 2), (4, 2)], [7, 8])])  # fmt: skip
def test_a_rerun_trains_on_and_tests_as_vissl(runs, name, metrics, iterations):
    """Auto-resumed from VISSL's ``model_phase1.torch`` of that run (the end of train phase 1, which VISSL does not
    test: no test phase first) or its ``model_iteration7.torch`` (inside train phase 2: its last 2 batches, then its
    test phase); metrics.json, stdout.json and the checkpoints as VISSL's rerun, and metrics.json's meters in the CSV
    logger at the resumed phase's end (its last batch, the sampler's skipped batch early) and its test phase's. Each
    loader iterator is made with the sampler where VISSL's is (what a loader worker takes its indices from): the
    resumed train phase's at VISSL's epoch, the phase's index counting the test phase before (Lightning's count of
    train epochs is 2; the fit starts its epoch with ``on_train_epoch_start`` on Lightning 2.6 too, the converted
    checkpoint being an epoch boundary for Lightning), past the skipped batch; the test phase's at its index. VISSL
    makes one more at the checkpoint's load, for the same phase, and discards it."""
    theirs, ours = _run(runs, name)
    discarded, *made = theirs["iterators"]
    assert ours["iterators"] == made and discarded == made[0]
    assert [epoch for _, epoch, _ in made] == [3, 4]
    assert [(row["phase_idx"], row["train_phase_idx"]) for row in theirs["metrics"]] == metrics
    assert ours["metrics"] == theirs["metrics"]
    assert _untimed(ours["stdout"]) == _untimed(theirs["stdout"])
    assert [row["iter"] for row in theirs["stdout"]] == iterations
    _assert_same_checkpoints(theirs, ours, last_phase=2)
    [points] = ours["points"]["csv"]
    expected = _meter_points(theirs["metrics"])
    assert {name.split("_")[0] for _, name, _ in expected} == {"train", "test"}
    logged = _logged(points, ("train_", "test_"))
    assert [(step, name) for step, name, _ in logged] == [(step, name) for step, name, _ in expected]
    assert [value for *_, value in logged] == pytest.approx([value for *_, value in expected], rel=1e-6)


def test_test_model_in_two_processes_runs_vissl_s_test_phases_rank_by_rank(runs):
    """``TEST_MODEL: True`` in two processes (gloo; ``--devices 2`` against VISSL's launcher with
    ``NUM_PROC_PER_NODE=2``), a loader worker a rank: each rank trains and tests on its shard of VISSL's samplers
    (inputs, targets, the loss averaged over ranks, at every train and test step: a test phase's batches in VISSL's
    order, the worker taking its indices when the phase's iterator is made, at the phase's epoch) and ends each phase
    with the same meter values (synced over the ranks); rank 0's stdout.json, metrics.json lines (train and test meters
    at each phase) and checkpoints as VISSL's."""
    theirs, ours = _run(runs, "test_model_two_processes")
    for rank in (0, 1):
        rows = theirs["ranks"][rank]
        assert [row.get("test_phase") for row in rows if "iteration" in row] == [None, None, 1, 1, None, None, 3, 3]
        assert [(row["phase_end"], row["train"]) for row in rows if "phase_end" in row] == [
            (0, True), (1, False), (2, True), (3, False)]  # fmt: skip
        assert ours["ranks"][rank] == rows, rank
    inputs = [[row["input"] for row in theirs["ranks"][rank] if "input" in row] for rank in (0, 1)]
    assert inputs[0] != inputs[1] and len(inputs[0]) == 8  # 2 shards
    assert [(row["phase_idx"], row["train_phase_idx"]) for row in theirs["metrics"]] == [(0, 0), (1, 0), (2, 1), (3, 1)]
    assert ours["metrics"] == theirs["metrics"]
    assert [row["iter"] for row in theirs["stdout"]] == [0, 1, 2, 3]
    assert _untimed(ours["stdout"]) == _untimed(theirs["stdout"])
    _assert_same_checkpoints(theirs, ours)


def _schedule(epochs, every, test_only=False, test_model=True):
    """The config keys :func:`check_test_phases` reads, as VISSL's defaults.yaml names them."""
    return SimpleNamespace(TEST_MODEL=test_model, TEST_ONLY=test_only, TEST_EVERY_NUM_EPOCH=every,
                           OPTIMIZER=SimpleNamespace(num_epochs=epochs))  # fmt: skip


def test_the_validations_are_vissl_s_test_phases_of_its_test_every_num_epoch_schedule(runs):
    """``TEST_EVERY_NUM_EPOCH`` N over E epochs (VISSL tests after train phases 0, N, 2N, ... and the last): the train
    and test phases VISSL's ``_build_phases`` builds are the epochs and validations ``lightning-hooks train`` runs
    (``tests_after``), and the config is accepted."""
    result = real_torchvision.scenario_result(runs, "schedules")
    assert len(result) == 8 and result["3 epochs, every 2"]["vissl"] == [True, False, True, True, False]
    for schedule, phases in result.items():
        assert phases["lightning"] == phases["vissl"], schedule
        epochs, every = (int(word.strip(",")) for word in schedule.split()[::3])
        check_test_phases(_schedule(epochs, every))


@pytest.mark.parametrize("test_model", [True, False])
def test_test_only_is_refused_naming_the_option_and_the_way_out(test_model):
    with pytest.raises(ConfigError, match=r"config.TEST_ONLY=true: .*VISSL's own launcher.*config.TEST_ONLY=false"):
        check_test_phases(_schedule(2, 1, test_only=True, test_model=test_model))


def test_classy_adapter_vissl_builds_the_config_s_meters_as_vissl_s_task(runs):
    """``ClassyAdapter([], vissl=...)`` built directly (not through the train command) has the config's
    ``METERS.names`` meters, as VISSL's ``SelfSupervisionTask`` builds them (class, name, state) and as
    ``VisslConfigModule.adapter()`` has them; ``meters=`` given wins."""
    result = real_torchvision.scenario_result(runs, "direct_adapter")
    assert [(kind, name) for kind, name, _ in result["vissl"]] == [("AccuracyListMeter", "accuracy_list_meter")]
    assert result["adapter"] == result["vissl"] == result["module"]
    assert result["given"] == []


def test_pirl_s_memory_bank_holds_the_dataset_as_under_vissl(runs):
    """``quick_pirl``'s ``nce_loss_with_memory`` (``num_train_samples: -1`` in the config): VISSL's ``_build_loss``
    sizes its memory bank by the train dataset (12 samples); so does ``VisslConfigModule.setup`` (#33)."""
    result = real_torchvision.scenario_result(runs, "memory_bank")
    assert result["lightning"] == result["vissl"] and result["vissl"]["nce_average.memory"] == (12, 128)


def test_lars_steps_under_lightning_s_closure_as_under_vissl(runs):
    """VISSL's LARS (Barlow Twins' ``OPTIMIZER.name: lars``) has a ``step()`` without a closure; stepped as Lightning
    steps (``step(closure=...)``) it trains as under VISSL's train step, bitwise (#33)."""
    result = real_torchvision.scenario_result(runs, "lars_step")
    assert result["lightning"] == result["vissl"]


def test_a_params_file_that_does_not_exist_is_refused_naming_the_option(tmp_path):
    """``quick_eval_finetune_in1k`` ships ``PARAMS_FILE: "specify model weights"``: refused as VISSL's trainer refuses
    it, not trained from a random initialization (#33); no file or an existing one passes."""
    def config(path):
        return SimpleNamespace(MODEL=SimpleNamespace(WEIGHTS_INIT=SimpleNamespace(PARAMS_FILE=path)))

    with pytest.raises(ConfigError, match=r"config.MODEL.WEIGHTS_INIT.PARAMS_FILE='specify model weights' does not "
                                          r"exist: .*or config.MODEL.WEIGHTS_INIT.PARAMS_FILE='' to train"):  # fmt: skip
        check_params_file(config("specify model weights"))
    (tmp_path / "weights.torch").write_bytes(b"")
    check_params_file(config(""))
    check_params_file(config(str(tmp_path / "weights.torch")))


def test_a_model_with_nothing_to_train_is_refused_naming_the_options():
    """VISSL's ``quick_knn`` (``EVAL_MODE_ON`` and ``FREEZE_TRUNK_AND_HEAD``: every parameter frozen, a config for its
    nearest-neighbour tool) fails at VISSL's first backward; refused before training, naming the options (#33). A
    model with one trainable parameter passes."""
    import torch

    flags = {"EVAL_MODE_ON": True, "FREEZE_TRUNK_ONLY": False, "FREEZE_TRUNK_AND_HEAD": True,
             "EXTRACT_TRUNK_FEATURES_ONLY": False}  # fmt: skip  # quick_knn's
    config = SimpleNamespace(MODEL=SimpleNamespace(FEATURE_EVAL_SETTINGS=flags))
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)).requires_grad_(False)
    with pytest.raises(ConfigError, match=r"config.MODEL.FEATURE_EVAL_SETTINGS \(EVAL_MODE_ON=True, .*"
                                          r"FREEZE_TRUNK_AND_HEAD=True.*\) leaves no parameter .*nearest_neighbor_test"):  # fmt: skip
        check_trainable(model, config)
    model[1].bias.requires_grad_(True)
    check_trainable(model, config)


def test_mixed_precision_off_a_gpu_is_refused_naming_the_options():
    """VISSL's ``quick_simclr_pytorch_amp`` (``USE_AMP: True``) on ``config.MACHINE.DEVICE=cpu``: VISSL's task asserts
    mixed precision is CUDA's; refused naming both options, not trained in CPU mixed precision (#33). On a GPU, or
    without AMP, it passes."""
    def config(use_amp, device):
        return SimpleNamespace(MODEL={"AMP_PARAMS": {"USE_AMP": use_amp}}, MACHINE=SimpleNamespace(DEVICE=device))

    with pytest.raises(ConfigError, match=r"config.MODEL.AMP_PARAMS.USE_AMP=true with config.MACHINE.DEVICE=cpu: "
                                          r".*USE_AMP=false, or train on a GPU \(config.MACHINE.DEVICE=gpu\)"):  # fmt: skip
        check_amp_device(config(True, "cpu"))
    check_amp_device(config(True, "gpu"))
    check_amp_device(config(False, "cpu"))


def test_apex_mixed_precision_is_refused_in_one_line_naming_the_option_and_the_way_out(runs):
    """VISSL's shipped ``pretrain/swav/swav_8node_resnet`` (``USE_AMP: True``, ``AMP_ARGS: {opt_level: O1}``, VISSL's
    default ``AMP_TYPE: apex``): ``lightning-hooks train`` refuses it in one line (no traceback) naming
    ``MODEL.AMP_PARAMS.AMP_TYPE``, why (Apex's amp, which Lightning 2 has not and its native mixed precision does not
    reproduce) and the way out, ``AMP_TYPE=pytorch`` (#33); it no longer trains in Lightning's native mixed precision
    without a word. ``AMP_TYPE: pytorch``, or no AMP, passes the check. (The command's ``main``, in the subprocess:
    vissl_eval_runs.refusals.)"""
    result = real_torchvision.scenario_result(runs, "refusals")["apex"]
    assert result["code"] == 1, result["stderr"][-3000:]
    assert "Traceback" not in result["stderr"], result["stderr"][-3000:]
    assert result["stderr"].strip().splitlines()[-1].startswith(
        "lightning-hooks train: error: config.MODEL.AMP_PARAMS.AMP_TYPE=apex with USE_AMP=true: VISSL trains AMP_TYPE "
        "apex (its default) with NVIDIA Apex's amp.initialize (AMP_ARGS {'opt_level': 'O1'}), which Lightning 2 has no "
        "precision plugin for"), result["stderr"][-3000:]  # fmt: skip
    assert result["stderr"].rstrip().endswith("set config.MODEL.AMP_PARAMS.AMP_TYPE=pytorch (or config.MODEL.AMP_PARAMS."
                                              "USE_AMP=false).")  # fmt: skip
    for amp in ({"USE_AMP": True, "AMP_TYPE": "pytorch"}, {"USE_AMP": False, "AMP_TYPE": "apex"}):
        check_amp_type(SimpleNamespace(MODEL={"AMP_PARAMS": amp}))


def test_lightning_hooks_train_refuses_vissls_fsdp_task_before_training(runs):
    """The ``swav`` config with ``config.TRAINER.TASK_NAME=self_supervision_fsdp_task``: ``lightning-hooks train``
    exits 1 before training with one line (no traceback: a config we refuse is the user's to fix) naming the option
    (test_sharded.py: each FSDP name)."""
    result = real_torchvision.scenario_result(runs, "refusals")["fsdp"]
    assert result["code"] == 1, result["stderr"][-3000:]
    assert "Traceback" not in result["stderr"], result["stderr"][-3000:]
    assert result["stderr"].strip().splitlines()[-1].startswith(
        "lightning-hooks train: error: config.TRAINER.TASK_NAME=self_supervision_fsdp_task: VISSL's FSDP"
    ), result["stderr"][-3000:]
    assert not result["json"]  # no training: no stdout.json / metrics.json
