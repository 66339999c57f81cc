"""VISSL's hooks under ClassyAdapter against VISSL's real ``SelfSupervisionTrainer``, on VISSL's own configs.

One subprocess (the real torchvision and VISSL from ``.venv/vissl-site``; see real_torchvision.py) runs every
scenario twice, under Lightning and under VISSL's trainer, with the hooks VISSL's ``default_hook_generator(cfg)``
builds for the config (vissl_runs.py): MoCo, SwAV, SwAV momentum and DINO losses with their hooks, perf stats, the
NaN checks, the loss/LR/ETA log and the checkpoint hook. Each test compares what the hooks saw and wrote.

Known upstream limits on CPU (VISSL fails the same way under its own trainer), so the configs avoid them:
SwAVMomentumHook converts the model's BatchNorm to SyncBatchNorm (GPU only) and its queue needs a world size > 1; the
scenarios use a ViT trunk (no BatchNorm) and no SwAV queue.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
import real_torchvision
import torch

pytestmark = pytest.mark.skipif(
    not real_torchvision.available(), reason=f"{real_torchvision.SITE} missing: run `bash scripts/setup.sh test`"
)

HERE = Path(__file__).resolve().parent
#: stdout.json fields that hold times, which differ between any two runs.
TIMES = ("btime", "eta", "rolling_eta", "peak_mem")


# ------------------------------------------------------------------------------------- run in the subprocess
def child_main(out: str) -> None:
    torch.set_num_threads(1)
    real_torchvision.activate()
    import vissl_runs as runs
    from vissl_eval_runs import TEST_MODEL

    root = Path(out)
    results: dict[str, Any] = {}

    def scenario(name: str, fn: Any) -> None:
        try:
            results[name] = fn()
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}

    def both(name: str, overrides: list[str], extra: Any = lambda: []) -> dict[str, Any]:
        return {
            "lightning": runs.run_lightning(runs.compose(root / name / "lightning", overrides), extra=extra()),
            "vissl": runs.run_vissl(runs.compose(root / name / "vissl", overrides), extra=extra()),
        }

    for loss, overrides in runs.LOSSES.items():
        scenario(loss, lambda: both(loss, runs.TINY + overrides))
    for target in ("model", "queue"):
        scenario(f"nan_{target}", lambda: both(f"nan_{target}", runs.TINY + runs.LOSSES["moco"],
                                               lambda: [runs.Poison(target)]))  # fmt: skip
    moco = runs.TINY + runs.LOSSES["moco"]
    scenario("vissl_resume", lambda: runs.run_vissl(
        runs.compose(root / "vissl_resume", moco), checkpoint=str(root / "moco/vissl/model_phase0.torch")))
    scenario("to_vissl", lambda: runs.run_vissl(
        runs.compose(root / "to_vissl", moco), checkpoint=str(root / "moco/lightning/model_phase0.torch")))
    scenario("to_lightning", lambda: runs.run_lightning(
        runs.compose(root / "to_lightning", moco), ckpt_path=str(root / "moco/vissl/model_phase0.torch")))
    scheduled = runs.SCHEDULED + runs.LOSSES["moco"]  # MoCoHook builds the loss's key encoder after a resume loads
    scenario("schedule", lambda: schedule(root / "schedule", scheduled))
    scenario("schedule_resume", lambda: runs.run_lightning(
        runs.compose(root / "schedule_resume", scheduled), ckpt_path=str(root / "schedule/ckpt/epoch=0-step=2.ckpt")))
    phase0 = str(root / "schedule/vissl/model_phase0.torch")
    scenario("schedule_vissl_resume", lambda: runs.run_vissl(runs.compose(root / "schedule_vissl_resume", scheduled),
                                                             checkpoint=phase0))
    scenario("schedule_from_vissl", lambda: runs.run_lightning(runs.compose(root / "schedule_from_vissl", scheduled),
                                                               ckpt_path=phase0))
    for name, module in (("forgetful", runs.ForgetfulModule), ("two_schedules", runs.TwoSchedulesModule)):
        scenario(name, lambda: runs.run_lightning(runs.compose(root / name, scheduled), module=module))
    tested = [*runs.TINY, *runs.LOSSES["swav"], *TEST_MODEL, "config.DATA.TRAIN.USE_STATEFUL_DISTRIBUTED_SAMPLER=true"]
    inside = str(root / "tested/model_iteration3.torch")  # iteration 3: the first of train phase 1's 2
    scenario("tested", lambda: runs.run_vissl(runs.compose(root / "tested", tested)))
    scenario("tested_vissl_resume", lambda: runs.run_vissl(runs.compose(root / "tested_vissl_resume", tested),
                                                           checkpoint=inside))
    scenario("tested_from_vissl", lambda: runs.run_lightning(runs.compose(root / "tested_from_vissl", tested),
                                                             module=runs.TestedModule, ckpt_path=inside))
    scenario("config", lambda: config_layer(root / "config"))
    scenario("cli", lambda: cli(root / "cli"))
    scenario("docs", lambda: docs_snippet(root / "docs"))
    scenario("regnet", lambda: both("regnet", ["config.OPTIMIZER.num_epochs=1", "config.DISTRIBUTED.INIT_METHOD=file"]))
    torch.save(results, root / "results.pt")


def schedule(out: Path, overrides: list[str]) -> dict[str, Any]:
    """VISSL's param schedulers under Lightning (saving a Lightning checkpoint per epoch) and under VISSL."""
    import lightning as L
    import vissl_runs as runs

    saver = L.pytorch.callbacks.ModelCheckpoint(out / "ckpt", save_top_k=-1, save_on_train_epoch_end=True)
    return {
        "lightning": runs.run_lightning(runs.compose(out / "lightning", overrides), callbacks=[saver]),
        "vissl": runs.run_vissl(runs.compose(out / "vissl", overrides)),
    }


def config_layer(out: Path) -> dict[str, Any]:
    """build_callbacks with a VISSL config in the classy section."""
    from vissl.hooks import default_hook_generator

    from lightning_hooks.config import build_callbacks

    overrides = ["config=test/cpu_test/test_cpu_regnet_moco", f"config.CHECKPOINT.DIR={out}"]
    [adapter] = build_callbacks({"classy": {"vissl": overrides, "hooks": [{"name": "loss_lr_meter_logging"}],
                                            "loss": "criterion"}})  # fmt: skip
    return {
        "hooks": [type(hook).__name__ for hook in adapter.hooks],
        "vissl": [type(hook).__name__ for hook in default_hook_generator(adapter.task.config)],
        "folder": adapter.task.checkpoint_folder,
        "out": str(out),
    }


def cli(out: Path) -> dict[str, Any]:
    """`lightning-hooks fit --config` with ClassyAdapter(vissl=...) in trainer.callbacks and VISSL's model and data."""
    import vissl_runs as runs
    import yaml

    from lightning_hooks.cli import main

    overrides = [runs.BASE, f"config.CHECKPOINT.DIR={out}", *runs.TINY, *runs.LOSSES["moco"]]
    overrides.remove("config.OPTIMIZER.num_epochs=2")
    config = {
        "model": {"class_path": "vissl_runs.VisslModule", "init_args": {"config": overrides}},
        "trainer": {
            "max_epochs": 1, "logger": False, "enable_checkpointing": False, "default_root_dir": str(out),
            "callbacks": [{"class_path": "lightning_hooks.ClassyAdapter",
                           "init_args": {"hooks": [], "vissl": overrides, "loss": "criterion"}}],
        },
    }  # fmt: skip
    out.mkdir(parents=True)
    (out / "fit.yaml").write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(out / "fit.yaml")])
    return {"files": sorted(p.name for p in out.glob("*.torch")), "stdout": (out / "stdout.json").exists()}


def docs_snippet(out: Path) -> dict[str, Any]:
    """docs/migration-classy.md's VISSL snippet, run as written (in ``out``)."""
    import os

    text = (HERE.parents[2] / "docs" / "migration-classy.md").read_text()
    code = next(block for block in text.split("```python\n")[1:] if "class VisslModule" in block).split("```")[0]
    out.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(out)
    try:
        exec(compile(code, "docs/migration-classy.md", "exec"), {"__name__": "docs_snippet"})
    finally:
        os.chdir(cwd)
    return {"files": sorted(p.name for p in (out / "vissl_ckpt").glob("*.torch"))}


# ------------------------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return real_torchvision.run_child("test_vissl_trainer", tmp_path_factory.mktemp("vissl_trainer"), timeout=600, folder=HERE)


scenario = real_torchvision.scenario_result


def assert_same_tensors(ours: Any, theirs: Any, what: str) -> None:
    """Equal nested dicts/lists of tensors and values; tensors bitwise (NaN equals NaN)."""
    if isinstance(theirs, torch.Tensor):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0, equal_nan=True, msg=what)
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys(), what
        for key, value in theirs.items():
            assert_same_tensors(ours[key], value, f"{what}.{key}")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), what
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_tensors(a, b, f"{what}[{i}]")
    else:
        assert ours == theirs, what


def without_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: ("<time>" if k.startswith(TIMES) else v) for k, v in row.items()} for row in rows]


def assert_same_run(lightning: dict[str, Any], vissl: dict[str, Any]) -> None:
    """Everything the hooks saw and wrote: mount-point values, logs, checkpoints, final model and loss state."""
    assert lightning["hooks"] == vissl["hooks"]
    assert lightning["error"] == vissl["error"]
    assert lightning["seen"] == vissl["seen"]
    assert without_times(lightning["stdout"]) == without_times(vissl["stdout"])  # the same keys, incl. rolling ETA
    assert lightning["metrics"] == vissl["metrics"]
    assert lightning["files"] == vissl["files"]
    for name, checkpoint in vissl["checkpoints"].items():
        assert_same_tensors(lightning["checkpoints"][name], checkpoint, name)
    assert_same_tensors(lightning["dumps"], vissl["dumps"], "NaN dumps")
    assert_same_tensors(lightning["model"], vissl["model"], "model")
    assert_same_tensors(lightning["loss"], vissl["loss"], "loss")


@pytest.mark.parametrize("loss", ["moco", "swav", "swav_momentum", "dino"])
def test_classy_vissl_trainer_default_hooks_match_vissl(runs, loss):
    result = scenario(runs, loss)
    lightning, vissl = result["lightning"], result["vissl"]
    assert_same_run(lightning, vissl)
    assert lightning["error"] is None and vissl["files"]
    hooks = {"moco": "MoCoHook", "swav": "NormalizePrototypesHook", "swav_momentum": "SwAVMomentumHook",
             "dino": "DINOHook"}  # fmt: skip
    assert {"LogPerfTimeMetricsHook", "LogLossMetricsCheckpointHook", hooks[loss]} <= set(lightning["hooks"])
    # the adapter opened a process group for the hooks and closed it; VISSL's trainer leaves its own open
    assert (lightning["group_left"], vissl["group_left"]) == (False, True)


def test_classy_vissl_trainer_perf_stats_time_vissls_step_sections(runs):
    seen = scenario(runs, "moco")["lightning"]["seen"]
    timers = [entry[3] for entry in seen if entry[0] == "on_phase_end"]
    sections = ["read_sample", "forward", "loss_compute", "loss_all_reduce", "backward", "optimizer_step",
                "train_step_total"]  # fmt: skip
    assert [list(t) for t in timers] == [sections, sections] and all(set(t.values()) == {2} for t in timers)


def test_classy_vissl_trainer_counters_as_vissls_loop(runs):
    seen = scenario(runs, "moco")["lightning"]["seen"]
    assert seen[0] == ("on_start", 0, -1, -1, -1, -1, 0, True)  # batches -1, no perf_stats yet
    steps = [entry for entry in seen if entry[0] == "on_step"]
    # iteration, batches (reset by SetDataSamplerEpochHook), local_iteration_num, len(batch_time) kept per run
    assert [s[1:5] for s in steps] == [(1, 1, 1, 1), (2, 2, 2, 2), (3, 1, 4, 3), (4, 2, 5, 4)]
    forward = next(entry for entry in seen if entry[0] == "on_forward")
    assert forward[1] == "Tensor"  # the model's one output, unwrapped from its list


def test_classy_vissl_trainer_nan_model_output_dumps_a_tensor_and_stops(runs):
    lightning, vissl = scenario(runs, "nan_model")["lightning"], scenario(runs, "nan_model")["vissl"]
    assert_same_run(lightning, vissl)
    # CheckNanModelOutputHook calls a _checkpoint_model it lacks (a VISSL 0.1.6 bug): the same error in both
    assert lightning["error"] == "AttributeError: 'CheckNanModelOutputHook' object has no attribute '_checkpoint_model'"
    assert isinstance(lightning["dumps"]["rank0_model_output.pth"], torch.Tensor)
    assert "model_iteration2.torch" in lightning["files"]


def test_classy_vissl_trainer_nan_loss_stops_at_the_loss_check(runs):
    lightning, vissl = scenario(runs, "nan_queue")["lightning"], scenario(runs, "nan_queue")["vissl"]
    assert_same_run(lightning, vissl)
    assert lightning["error"].startswith("FloatingPointError: Infinite Loss or NaN at iteration=2")


def assert_same_resume(ours: dict[str, Any], reference: dict[str, Any]) -> None:
    assert ours["error"] is None and reference["error"] is None
    assert ours["seen"] == reference["seen"]
    assert ours["files"] == reference["files"]
    assert without_times(ours["stdout"]) == without_times(reference["stdout"])
    assert_same_tensors(ours["model"], reference["model"], "model")
    assert_same_tensors(ours["loss"], reference["loss"], "loss")  # MoCo's queue and key encoder
    final = "model_final_checkpoint_phase1.torch"
    assert_same_tensors(ours["checkpoints"][final], reference["checkpoints"][final], final)


def test_classy_vissl_trainer_lightning_checkpoint_resumes_in_vissl(runs):
    """VISSL's trainer resumes from the phase checkpoint LogLossMetricsCheckpointHook wrote under Lightning exactly
    as from the one VISSL's own run wrote."""
    resumed = scenario(runs, "vissl_resume")
    assert resumed["seen"][0] == ("on_start", 2, -1, 2, 0, 0, 0, True)  # VISSL's counters from the checkpoint
    assert_same_resume(scenario(runs, "to_vissl"), resumed)


def test_classy_vissl_trainer_fit_ckpt_path_resumes_a_vissl_checkpoint(runs):
    """trainer.fit(ckpt_path=<VISSL's model_phase0.torch>), max_epochs = VISSL's num_epochs: the run continues as
    VISSL's trainer resumes from that file (weights, MoCo's queue and key encoder, counters, logs, checkpoints)."""
    started = scenario(runs, "to_lightning")
    assert_same_resume(started, scenario(runs, "vissl_resume"))
    assert started["epochs"] == [1] and started["global_step"] == 4  # Lightning's epochs count VISSL's phases


def test_classy_vissl_trainer_user_module_tests_a_phase_resumed_inside_it(runs):
    """A user's own LightningModule that validates (``TEST_MODEL``), fit from VISSL's ``model_iteration3.torch``
    (written inside its last train phase): the phase's remaining batch, then its test phase, as VISSL's trainer resumes
    from that file. VISSL's stateful sampler skips the batch trained already, which Lightning's count of the loader
    includes: the adapter ends the phase at its real last batch and moves Lightning's validation check there."""
    assert scenario(runs, "tested")["error"] is None
    ours, theirs = scenario(runs, "tested_from_vissl"), scenario(runs, "tested_vissl_resume")
    phases = [entry[1:3] + entry[5:6] for entry in theirs["seen"] if entry[0] == "on_phase_start"]
    assert phases == [(2, 1, True), (3, 1, False)]  # (phase_idx, train_phase_idx, train): the test phase after
    assert ours["error"] is None and ours["seen"] == theirs["seen"]
    assert ours["metrics"] == theirs["metrics"] and ours["files"] == theirs["files"]
    assert without_times(ours["stdout"]) == without_times(theirs["stdout"])


def test_classy_vissl_trainer_cpu_test_config_as_a_whole(runs):
    """VISSL's own test/cpu_test/test_cpu_regnet_moco (RegNet, MONITOR_PERF_STATS) with its whole hook list."""
    result = scenario(runs, "regnet")
    assert_same_run(result["lightning"], result["vissl"])
    assert result["lightning"]["error"] is None and result["lightning"]["hooks"][0] == "LogPerfTimeMetricsHook"


def updates(seen: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The train phase starts' options and the updates' (iteration, num_updates, where, options)."""
    return [entry if entry[0] == "on_update" else (entry[0], entry[-1]) for entry in seen
            if entry[0] in ("on_phase_start", "on_update")]  # fmt: skip


def test_classy_vissl_trainer_param_schedulers_as_vissls(runs):
    """VISSL's OPTIMIZER.param_schedulers (step warmup + cosine LR, an epoch LR for the head's groups, a step weight
    decay schedule) set every group's options per step as VISSL's trainer does: the options and task.where each hook
    sees, stdout.json's lr, the checkpoints and the final weights agree bitwise."""
    result = scenario(runs, "schedule")
    lightning, vissl = result["lightning"], result["vissl"]
    assert lightning["error"] is None and vissl["error"] is None
    assert_same_run(lightning, vissl)
    seen = updates(lightning["seen"])  # groups: trunk (regularized, not), head (same), other
    trunk_lrs = [entry[-1][0][0][0] for entry in seen if entry[0] == "on_update"]
    head_lrs = [entry[-1][0][2][0] for entry in seen if entry[0] == "on_update"]
    decays = [entry[-1][0][0][1] for entry in seen if entry[0] == "on_update"]
    assert len(set(trunk_lrs)) == 4 and len(set(decays)) == 4  # a new value every step
    assert head_lrs == [0.2, 0.2, 0.02, 0.02]  # the epoch schedule, set at the phase start
    assert [entry[-1] for entry in seen if entry[0] == "on_phase_start"][1][0][2][0] == 0.02
    assert [row["lr"] for row in lightning["stdout"]] == [row["lr"] for row in vissl["stdout"]]


def test_classy_vissl_trainer_param_schedulers_resume_from_a_lightning_checkpoint(runs):
    """fit(ckpt_path=...) from Lightning's checkpoint at the end of the first epoch continues VISSL's schedule at its
    where (the second epoch's options are those of VISSL's uninterrupted run) and MoCo's loss state: MoCoHook builds
    the key encoder from it at the first forward, which skips that step's momentum update in VISSL too, so the weights
    are those of VISSL resuming from its own checkpoint of the same epoch."""
    whole, resumed = scenario(runs, "schedule")["vissl"], scenario(runs, "schedule_resume")
    reference = scenario(runs, "schedule_vissl_resume")
    assert resumed["error"] is None
    assert updates(resumed["seen"]) == updates(whole["seen"])[-3:]  # phase 1's start and its two updates
    assert_same_tensors(resumed["model"], reference["model"], "model")
    assert_same_tensors(resumed["loss"], reference["loss"], "loss")


def test_classy_vissl_trainer_param_schedulers_continue_from_a_vissl_checkpoint(runs):
    """fit(ckpt_path=<VISSL checkpoint>) continues VISSL's schedule at VISSL's where, as VISSL's trainer resuming
    from the same phase checkpoint does."""
    reference, started = scenario(runs, "schedule_vissl_resume"), scenario(runs, "schedule_from_vissl")
    assert started["error"] is None and reference["error"] is None
    whole = scenario(runs, "schedule")["vissl"]
    assert updates(started["seen"]) == updates(reference["seen"]) == updates(whole["seen"])[-3:]
    assert_same_tensors(started["model"], reference["model"], "model")


def test_classy_vissl_trainer_param_schedulers_refused_without_a_classy_optimizer(runs):
    error = scenario(runs, "forgetful")["error"]
    assert error.startswith("ValueError: ClassyAdapter(vissl=...): the config's OPTIMIZER.param_schedulers")
    assert "['lr', 'lr_head', 'weight_decay']" in error and "ForgetfulModule holds no ClassyOptimizer" in error
    assert "self.classy_optimizer = build_optimizer(config.OPTIMIZER)" in error


def test_classy_vissl_trainer_param_schedulers_refused_with_a_lightning_scheduler(runs):
    error = scenario(runs, "two_schedules")["error"]
    assert error.startswith("ValueError: ClassyAdapter: configure_optimizers returned a Lightning LR scheduler")
    assert "(StepLR)" in error
    assert "the two schedules would fight" in error


def test_classy_vissl_trainer_config_layer_builds_vissls_hooks(runs):
    result = scenario(runs, "config")
    assert result["hooks"] == [*result["vissl"], "LossLrMeterLoggingHook"]  # default_hook_generator's, then ours
    assert result["folder"] == result["out"]  # VISSL's CHECKPOINT.DIR


def test_classy_vissl_trainer_cli_fits_with_a_vissl_config(runs):
    result = scenario(runs, "cli")
    assert result["files"] == ["checkpoint.torch", "model_final_checkpoint_phase0.torch"] and result["stdout"]


def test_classy_vissl_trainer_docs_snippet_runs(runs):
    assert scenario(runs, "docs")["files"] == ["checkpoint.torch", "model_final_checkpoint_phase0.torch"]
