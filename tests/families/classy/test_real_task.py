"""Differential tests against Classy's real ``ClassificationTask`` driven by Classy's ``LocalTrainer`` (CPU).

The same spec (``classy_real``) runs in Classy and under ``lightning.Trainer`` with ``ClassyAdapter``: the same
``ClassyModel``, data, Classy hook and meter configs, optimizer layout and Classy LR schedule. Compared: per-phase
losses, LRs, meter values, the weights each test phase ran with (EMA swapped in, precise BN applied), the
LossLrMeterLoggingHook log, TensorBoard scalars, CSV rows, hook attributes, and the checkpoint files, which each side
then resumes from (Classy from Lightning's, Lightning from Classy's).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import real_torchvision
import torch
from classy_real import reference
from classy_testkit import lightning_run

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")

EPOCHS = 4
STEP = {"scheduler": {"name": "step", "num_epochs": EPOCHS, "values": [0.1, 0.01]}, "interval": "step"}
EPOCH = {"scheduler": {"name": "linear", "start_value": 0.1, "end_value": 0.01}, "interval": "epoch"}
METERS = {"accuracy": {"topk": [1, 2]}, "precision_at_k": {"topk": [1, 2]}, "recall_at_k": {"topk": [1]}}


def _spec(folder: Path, lr: dict = STEP, epochs: int = EPOCHS, checkpoint: str | None = None) -> dict:
    """Every Classy hook that runs on CPU, by Classy's registry name: CheckpointHook (listed first: Classy moves it
    last), LossLrMeterLoggingHook, ExponentialMovingAverageModelHook, PreciseBatchNormHook, OutputCSVHook,
    TensorboardPlotHook, ProgressBarHook, ModelComplexityHook."""
    folder.mkdir(parents=True, exist_ok=True)
    hooks = [
        {"name": "checkpoint", "checkpoint_folder": str(folder), "phase_types": ["train", "test"]},
        {"name": "loss_lr_meter_logging"},
        {"name": "ema_model_weights", "decay": 0.8, "device": "cpu"},
        {"name": "precise_bn", "num_samples": 8},
        {"name": "output_csv", "folder": str(folder)},
        {"name": "tensorboard_plot", "summary_writer": {"log_dir": str(folder / "tb")}, "log_period": 1},
        {"name": "progress_bar"},
        {"name": "model_complexity"},
    ]
    return {"epochs": epochs, "lr": lr, "meters": METERS, "hooks": hooks, "checkpoint": checkpoint}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Lightning runs, then one Classy subprocess for the references (a Classy run resumes Lightning's checkpoint),
    then Lightning resumes Classy's checkpoint."""
    root = tmp_path_factory.mktemp("classy_real")
    epoch_spec = {"epochs": 3, "lr": EPOCH, "meters": {"accuracy": {"topk": [1]}}, "hooks": [{"name": "loss_lr_meter_logging"}]}
    ours = {"step": lightning_run(_spec(root / "pl"), root / "pl"), "epoch": lightning_run(epoch_spec, root / "plb")}
    half = "model_phase-3_end.torch"  # written at the end of the second test phase (2 of 4 epochs)
    train_end = "model_phase-2_end.torch"  # written at the end of the second train phase, before its test phase
    specs = [_spec(root / "ref"), epoch_spec, _spec(root / "ref_resumed", checkpoint=str(root / "pl" / half)),
             _spec(root / "ref_train_end", checkpoint=str(root / "ref" / train_end))]  # fmt: skip
    step, epoch, resumed, train_resumed = reference(specs, root / "classy")
    theirs = {"step": step, "epoch": epoch, "resumed": resumed, "train_end": train_resumed}
    ours["resumed"] = lightning_run(_spec(root / "pl_resumed"), root / "pl_resumed", ckpt_path=root / "ref" / half)
    ours["train_end"] = lightning_run(_spec(root / "pl_train_end"), root / "pl_train_end",
                                      ckpt_path=root / "ref" / train_end)  # fmt: skip
    return root, ours, theirs


def _assert_phases_equal(ours: list[dict], theirs: list[dict]) -> None:
    assert [p["type"] for p in ours] == [p["type"] for p in theirs]
    for mine, ref in zip(ours, theirs):
        where = f"{ref['type']} phase_idx {ref['phase_idx']}"
        assert (mine["phase_idx"], mine["train_phase_idx"], mine["num_updates"]) == (
            ref["phase_idx"], ref["train_phase_idx"], ref["num_updates"]), where
        assert mine["losses"] == pytest.approx(ref["losses"], abs=1e-6), where
        assert _close(mine["meters"], ref["meters"]), (where, mine["meters"], ref["meters"])
        assert mine.get("lr") == pytest.approx(ref.get("lr")), where
        for key, value in ref.get("weights", {}).items():
            torch.testing.assert_close(mine["weights"][key], value, rtol=0, atol=1e-6, msg=f"{where}: {key}")


def test_classy_real_task_phases_losses_meters_and_weights(runs):
    _, ours, theirs = runs
    assert len(theirs["step"]["phases"]) == 2 * EPOCHS
    _assert_phases_equal(ours["step"]["phases"], theirs["step"]["phases"])


def test_classy_real_task_lr_at_phase_end_per_step_and_per_epoch_schedule(runs):
    _, ours, theirs = runs
    lrs = {kind: [p["lr"] for p in run["phases"] if p["type"] == "train"] for kind, run in ours.items()}
    assert lrs["step"] == pytest.approx([0.1, 0.1, 0.01, 0.01])  # the LR the phase's last step used
    # an epoch schedule is applied before the phase-end hooks while where < 1; after the last phase Classy keeps it
    assert lrs["epoch"] == pytest.approx([0.07, 0.04, 0.04])
    _assert_phases_equal(ours["epoch"]["phases"], theirs["epoch"]["phases"])


def test_classy_real_task_loss_lr_meter_log_lines(runs):
    _, ours, theirs = runs
    for kind in ("step", "epoch"):
        lines = [[line for line in run[kind]["log"] if line.startswith("Synced meters")] for run in (ours, theirs)]
        assert len(lines[1]) == 2 * len(lines[1]) // 2 > 0 and lines[0] == lines[1], kind


def test_classy_real_task_checkpoint_files(runs):
    root, _, _ = runs
    names = sorted(p.name for p in (root / "ref").glob("*.torch"))
    assert names == sorted(p.name for p in (root / "pl").glob("*.torch"))
    assert len(names) == 1 + 2 * EPOCHS  # checkpoint.torch and one model_phase-N_end.torch per phase
    for name in names:
        ours = torch.load(root / "pl" / name, weights_only=True)["classy_state_dict"]
        theirs = torch.load(root / "ref" / name, weights_only=True)["classy_state_dict"]
        assert set(ours) - {"iteration"} == set(theirs), name
        for key in ("train", "phase_idx", "train_phase_idx", "num_updates"):
            assert ours[key] == theirs[key], (name, key)
        assert ours["losses"] == pytest.approx(theirs["losses"], abs=1e-6)
        assert _close(ours["meters"], theirs["meters"]), name
        assert set(ours["hooks"]) == set(theirs["hooks"]) and ours["base_model"]["model"]["heads"] == {}
        assert _close(ours["base_model"], theirs["base_model"]), name
        optim, ref_optim = ours["optimizer"]["optim"], theirs["optimizer"]["optim"]  # Classy's {"optim": ...} nesting
        assert _close(optim["state"], ref_optim["state"]), name  # momentum buffers, in Classy's param-group order
        for group, ref_group in zip(optim["param_groups"], ref_optim["param_groups"], strict=True):
            assert _close({k: group[k] for k in ref_group}, ref_group), name  # (LambdaLR adds initial_lr)
        ema = "ExponentialMovingAverageModelHook"
        assert _close(ours["hooks"][ema], theirs["hooks"][ema]), name


def test_classy_real_task_resumes_from_a_lightning_checkpoint(runs):
    _, ours, theirs = runs
    # Classy's real task started from the checkpoint CheckpointHook wrote under Lightning after 2 of 4 epochs
    _assert_phases_equal(theirs["resumed"]["phases"], theirs["step"]["phases"][4:])


def test_classy_real_task_lightning_resumes_from_a_classy_checkpoint(runs):
    _, ours, theirs = runs
    # trainer.fit(ckpt_path=<Classy's model_phase-3_end.torch>): weights, optimizer, hooks, meters, counters, LR
    _assert_phases_equal(ours["resumed"]["phases"], theirs["step"]["phases"][4:])
    assert ours["resumed"]["adapter"].task.phase_idx == 2 * EPOCHS - 1


def test_classy_real_task_lightning_resumes_from_a_train_phase_end_with_its_test_phase(runs):
    """Classy's checkpoint written at the end of a train phase: Classy's task runs that epoch's test phase first
    (on_start sees (phase_idx, train_phase_idx) = (2, 1)), then trains on; so does the Lightning run."""
    _, ours, theirs = runs
    assert theirs["train_end"]["start"] == (2, 1) and theirs["train_end"]["phases"][0]["type"] == "test"
    assert ours["train_end"]["start"] == theirs["train_end"]["start"]
    _assert_phases_equal(ours["train_end"]["phases"], theirs["train_end"]["phases"])
    _assert_phases_equal(ours["train_end"]["phases"], theirs["step"]["phases"][3:])


def test_classy_real_task_csv_tensorboard_progress_and_complexity(runs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root, ours, theirs = runs
    assert (root / "pl" / "predictions.csv").read_text() == (root / "ref" / "predictions.csv").read_text()

    def scalars(folder):
        acc = EventAccumulator(str(folder))
        acc.Reload()
        return {tag: [(e.step, round(e.value, 5)) for e in acc.Scalars(tag)]
                for tag in acc.Tags()["scalars"] if not tag.startswith("Speed")}

    mine, ref = scalars(root / "pl" / "tb"), scalars(root / "ref" / "tb")
    assert mine.keys() == ref.keys() and "Meters/test/accuracy/top_2" in mine
    for tag in ref:
        assert mine[tag] == ref[tag], tag
    hooks = {hook.name(): hook for hook in ours["step"]["adapter"].hooks}
    for name in ("ModelComplexityHook", "ProgressBarHook"):
        for attr, value in theirs["step"]["hook_state"][name].items():
            if attr != "state":
                assert getattr(hooks[name], attr) == value, (name, attr)


def _close(a, b) -> bool:
    """Nested dicts/lists of tensors and numbers equal to 1e-6."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a.double(), b.double(), atol=1e-6)
    return a == b or a == pytest.approx(b)
