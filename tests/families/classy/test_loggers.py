"""``lightning-hooks train TASK.json --logger csv --logger tensorboard --trainer.KEY ...`` on Classy's shrunk,
narrow ResNet-50 config (issue #34): the per-step values the module logs (``train/loss``, ``train/lr``) reach both
loggers as they reach the default CSVLogger; with classy_train.py's TensorboardPlotHook on, the hook's event files equal those of
``classy_train.py`` itself (tags, steps, values) and the loggers get every scalar it writes at its own steps;
CheckpointHook's files and the weights are as without the flags; ``--trainer.KEY`` reaches the Trainer and an option
the config decides is refused naming both sides. VISSL's SimCLR config likewise, with SSLTensorboardHook against
VISSL's launcher. One subprocess (the real torchvision)."""

from __future__ import annotations

import numpy as np
import pytest
import real_torchvision
from classy_train_runs import same

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return real_torchvision.run_child("classy_logger_runs", tmp_path_factory.mktemp("classy_loggers"), timeout=900)


def _runs(results, *names):
    """The scenarios a test reads (one that failed in the subprocess fails that test only, with its traceback)."""
    return [real_torchvision.scenario_result(results, name) for name in names]


#: what the modules log at the host's steps (every --log_freq / LOG_FREQUENCY steps), besides the hooks' scalars
PER_STEP = ("train/loss", "train/lr")


def _per_step(points):
    return [point for point in points if point[1] in PER_STEP]


def _hook_tags(points):
    """The points that are not the module's (nor the ``epoch`` Lightning adds to what the module logs)."""
    return [point for point in points if point[1] not in (*PER_STEP, "epoch")]


def _float32(points):
    return sorted((step, name, float(np.float32(value))) for step, name, value in points)


def _same_plot(ours, theirs, timed=("Speed/",)):
    """The same tags at the same steps; the values within float tolerance, except the timings (``timed`` tags)."""
    assert [(s, n) for s, n, _ in ours] == [(s, n) for s, n, _ in theirs]
    for (step, name, mine), (_, _, ref) in zip(ours, theirs, strict=True):
        if not name.startswith(timed):
            assert mine == pytest.approx(ref, rel=1e-5, abs=1e-6), (name, step)


def _same_rest(ours, theirs):
    """The same text tags, and histograms of the same tags at the same steps with the same counts and sums."""
    assert ours["text"] == theirs["text"]
    assert [h[:3] for h in ours["histograms"]] == [h[:3] for h in theirs["histograms"]] and theirs["histograms"]
    for (step, tag, _, mine), (*_, ref) in zip(ours["histograms"], theirs["histograms"], strict=True):
        assert mine == pytest.approx(ref, rel=1e-5, abs=1e-5), (tag, step)


def test_the_loggers_get_classys_values_and_the_legacy_files_stay(runs):
    plain, logged = _runs(runs, "plain", "logged")
    [expected] = plain["csv"]
    assert {"train/loss", "train/lr", "Losses/train", "Losses/test", "Meters/test/accuracy/top_1"} <= {
        name for _, name, _ in expected}
    [csv], [tensorboard] = logged["csv"], logged["tensorboard"]
    assert _per_step(csv) == _per_step(expected) and _per_step(expected)
    assert _per_step(tensorboard) == _float32(_per_step(expected))
    assert logged["files"] == sorted([*plain["files"], "tensorboard"])
    assert logged["losses"] == plain["losses"]
    assert same(logged["weights"], plain["weights"])


def test_tensorboard_plot_hook_writes_as_under_classy_train(runs):
    """classy_train.py's TensorboardPlotHook under lightning-hooks train writes what it writes under classy_train.py:
    the same tags at the same steps (LR and sample-fetch times at the train step count, losses, meters and speed at
    the phase index), the same values but the timings; the same parameter histograms and text tags."""
    logged, classy = _runs(runs, "logged", "classy")
    [ours], [theirs] = logged["hook"], classy["hook"]
    tags = {name for _, name, _ in theirs}
    assert {"Learning Rate/train", "Losses/train", "Losses/test", "Meters/test/accuracy/top_2", "Speed/train/im_per_sec",
            "Speed/train/cumulative_sample_fetch_time"} <= tags  # fmt: skip
    _same_plot(ours, theirs)
    _same_rest(logged["hook_rest"][0], classy["hook_rest"][0])


def test_the_loggers_get_the_tensorboard_hook_s_scalars_at_its_steps(runs):
    """Every scalar the hook wrote reaches the Lightning loggers under its tag, at its step, with its value (the
    module's own phase values, at Lightning's steps, are not logged beside them)."""
    [logged] = _runs(runs, "logged")
    [hook], [csv], [tensorboard] = logged["hook"], logged["csv"], logged["tensorboard"]
    assert _hook_tags(tensorboard) == hook
    _same_plot(_float32(_hook_tags(csv)), hook, timed=())


def _phase_values(points):
    """The phase values: ``Losses/{phase}`` and ``Meters/{phase}/...``."""
    return [point for point in points if point[1].startswith(("Losses/", "Meters/"))]


def test_without_a_tensorboard_hook_the_loggers_get_the_phase_values_at_classys_steps(runs):
    """``--skip_tensorboard``: the module's own phase values reach the (default CSV) logger under the tags and at the
    steps (the train / test phase index) at which classy_train.py's TensorboardPlotHook plots them, with its values;
    so the curves line up with runs made under Classy."""
    plain, classy = _runs(runs, "plain", "classy")
    [csv], [theirs] = plain["csv"], classy["hook"]
    ours = _float32(_phase_values(csv))
    assert {name for _, name, _ in ours} >= {"Losses/train", "Losses/test", "Meters/test/accuracy/top_1"}
    assert {step for step, name, _ in ours if name == "Losses/train"} == {0, 1, 2}
    _same_plot(ours, _phase_values(theirs), timed=())


def test_callbacks_can_monitor_the_phase_values_with_or_without_the_hook(runs):
    plain, logged = _runs(runs, "plain", "logged")
    for run in (plain, logged):
        assert {"Losses/train", "Losses/test", "Meters/test/accuracy/top_1"} <= set(run["trainer"]["monitored"])


def test_the_hook_scalars_callback_is_there_only_to_tee_a_tensorboard_hooks_writer(runs):
    """Lightning calls every hook of every callback at each step (~110 Python calls a step for one that overrides
    none): ``HookScalars`` joins the Trainer only where a hook holds a writer whose scalars it sends on."""
    plain, logged = _runs(runs, "plain", "logged")
    assert "HookScalars" in logged["trainer"]["callbacks"] and "HookScalars" not in plain["trainer"]["callbacks"]


def test_trainer_options_reach_the_trainer(runs):
    plain, logged = _runs(runs, "plain", "logged")
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
    error = runs["errors"][flags]
    assert error is not None and error.startswith("TrainerOptionError")
    for side in both_sides:
        assert side in error


@pytest.mark.parametrize(("flags", "both_sides"), [
    # VISSL's GradClipHook clips in on_backward: Lightning would clip the same gradients a second time
    ("--trainer.gradient_clip_val 0.5", ["--trainer.gradient_clip_val 0.5", "config.MODEL.GRAD_CLIP.USE_GRAD_CLIP=True",
                                         "GradClipHook"]),
    # config.MACHINE.DEVICE=cpu: was Lightning's 'No supported gpu backend found!' traceback on a CPU machine
    ("--trainer.accelerator gpu", ["--trainer.accelerator gpu", "config.MACHINE.DEVICE"]),
])  # fmt: skip
def test_an_option_the_vissl_config_decides_is_refused_naming_both_sides(runs, flags, both_sides):
    error = runs["vissl_errors"][flags]
    assert error is not None and error.startswith("TrainerOptionError")
    for side in both_sides:
        assert side in error


def test_vissl_s_values_reach_the_loggers_and_its_files_stay(runs):
    """VISSL's SimCLR integration-test config: ``train/loss`` and ``train/lr`` every ``LOG_FREQUENCY`` step in CSV
    and TensorBoard as in the default CSVLogger; VISSL's stdout.json and metrics.json, its checkpoints and the
    weights as VISSL's launcher writes them with the same hooks (its checkpoints hold SSLTensorboardHook's state)."""
    plain, logged, reference = _runs(runs, "vissl_plain", "vissl_logged", "vissl_reference")
    [expected] = plain["points"]["csv"]
    assert {"train/loss", "train/lr"} <= {name for _, name, _ in expected}
    assert _per_step(logged["points"]["csv"][0]) == _per_step(expected) and _per_step(expected)
    assert _per_step(logged["points"]["tensorboard"][0]) == _float32(_per_step(expected))
    untimed = [[{k: v for k, v in row.items() if "time" not in k and "eta" not in k} for row in run["stdout"]]
               for run in (plain, logged, reference)]  # fmt: skip
    assert untimed[0] == untimed[1] == untimed[2] and untimed[0]
    for key in ("metrics", "files", "final", "checkpoints"):
        assert logged[key] == reference[key], key
    assert logged["all_files"] == sorted([*plain["all_files"], "tb_logs", "tensorboard"])


def test_ssl_tensorboard_hook_writes_as_under_vissl_and_the_loggers_get_it(runs):
    """VISSL's SSLTensorboardHook (USE_TENSORBOARD, activation statistics every 2 iterations) under lightning-hooks
    train writes what it writes under VISSL's launcher (tags, ``task.iteration`` steps, values but the timings; the
    parameter and gradient histograms), and every scalar of it reaches the Lightning loggers at its step."""
    logged, reference = _runs(runs, "vissl_logged", "vissl_reference")
    [ours], [theirs] = logged["hook"], reference["hook"]
    tags = {name for _, name, _ in theirs}
    assert {"Training/Loss", "Training/Learning_rate", "Speed/ETA_hours"} <= tags
    assert any(name.startswith("activations/") for name in tags)
    _same_plot(ours, theirs)
    _same_rest(logged["hook_rest"][0], reference["hook_rest"][0])
    [csv], [tensorboard] = logged["points"]["csv"], logged["points"]["tensorboard"]
    assert _hook_tags(tensorboard) == ours
    _same_plot(_float32(_hook_tags(csv)), ours, timed=())


def test_the_per_step_values_reach_the_loggers_at_classys_step(runs):
    """``train/loss`` and ``train/lr`` (``--log_freq 1``: every step) at Classy's step, the train step count from 1
    over all phases: at each step TensorboardPlotHook plots ``Learning Rate/train`` at (the first of each phase, its
    ``log_period`` of 10 being longer than a phase), the loggers hold the same LR (CSV: as logged; TensorBoard:
    float32)."""
    [run] = _runs(runs, "every_step")
    [hook], [csv], [tensorboard] = run["hook"], run["csv"], run["tensorboard"]
    plotted = [(step, value) for step, name, value in hook if name == "Learning Rate/train"]
    assert [step for step, _ in plotted] == [1, 5, 9]  # 4 steps a phase, 3 phases
    for points in (csv, tensorboard):
        assert [step for step, name, _ in points if name == "train/loss"] == list(range(1, 13))
        lrs = {step: value for step, name, value in points if name == "train/lr"}
        assert [lrs[step] for step, _ in plotted] == pytest.approx([value for _, value in plotted], rel=1e-6)
