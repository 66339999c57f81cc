"""``lightning-hooks train CONFIG.py --logger ...`` on mmcls's shipped CIFAR ResNet (OpenMMLab 1.x): the log buffer's
scalars reach each Lightning logger under the names and at the steps mmcv's own ``TensorboardLoggerHook`` (listed in
the config's ``log_config``) writes them; the json and text logs are as without the flag; ``--trainer.KEY`` reaches the
Trainer and an option the config decides is refused naming both sides (issue #34)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from mmcv_testkit import stub_collect_env  # skips outside .venv-mmcv1
from mmcv_train_kit import json_log, text_log, tiny_resnet_cifar
from tracker_stores import csv_points, local_stores, mlflow_points, tensorboard_points, wandb_points

mmcls = pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

from lightning_hooks.core.trainer_options import TrainerOptionError  # noqa: E402
from lightning_hooks.families.mmcv import lightning_runner  # noqa: E402
from lightning_hooks.families.mmcv import train as mmcv_train  # noqa: E402


@pytest.fixture
def config(tmp_path, monkeypatch):
    """The shipped CIFAR ResNet, narrow, on tiny data, 2 epochs, logging every iteration to text, json and mmcv's
    TensorboardLoggerHook (the reference for names and steps)."""
    stub_collect_env(monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_resnet_cifar(tmp_path / "tiny_resnet_cifar.py", lines="""
        log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook')])
    """)
    torch.set_num_threads(threads)


def run(config: Path, work_dir: Path, *flags: str) -> None:
    mmcv_train.main([str(config), "--work-dir", str(work_dir), "--seed", "0", "--accelerator", "cpu", *flags])


def as_float32(points):
    return sorted((step, name, float(np.float32(value))) for step, name, value in points)


def test_csv_and_tensorboard_get_the_log_buffers_scalars_and_the_logs_stay(config, tmp_path):
    plain, logged = tmp_path / "plain", tmp_path / "logged"
    run(config, plain)
    run(config, logged, "--logger", "csv", "--logger", "tensorboard")
    assert json_log(logged) == json_log(plain)
    assert text_log(logged, "mmcls") == text_log(plain, "mmcls") and text_log(plain, "mmcls")
    names = {side: sorted(re.sub(r"\d{8}_\d{6}", "STAMP", p.name) for p in side.iterdir()) for side in (plain, logged)}
    assert [n for n in names[logged] if n not in ("lightning_logs", "tensorboard")] == names[plain]
    reference = tensorboard_points(logged / "tf_logs")  # mmcv's TensorboardLoggerHook in the same run
    assert {"train/loss", "learning_rate", "momentum", "val/accuracy_top-1"} <= {name for _, name, _ in reference}
    untimed = [p for p in reference if p[1] not in ("train/time", "train/data_time")]
    assert [p for p in tensorboard_points(logged / "tensorboard" / "version_0") if p[1] not in ("train/time", "train/data_time")] == untimed
    csv = csv_points(logged / "lightning_logs" / "version_0" / "metrics.csv")
    assert [p for p in as_float32(csv) if p[1] not in ("train/time", "train/data_time")] == untimed
    # resumed for a third epoch: the loggers' steps go on from the checkpoint's, as TensorboardLoggerHook's
    run(config, logged, "--logger", "tensorboard", "--resume-from", str(logged / "epoch_2.pth"),
        "--cfg-options", "runner.max_epochs=3")
    resumed = [p for p in tensorboard_points(logged / "tensorboard" / "version_1") if "time" not in p[1]]
    assert min(step for step, _, _ in resumed) > max(step for step, name, _ in untimed if name == "train/loss")
    assert sorted([*untimed, *resumed]) == [p for p in tensorboard_points(logged / "tf_logs") if "time" not in p[1]]


def test_mlflow_and_wandb_get_the_log_buffers_scalars(config, tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is installed in .venv-mmcv1 by scripts/setup.sh test")
    pytest.importorskip("mlflow", reason="mlflow-skinny is installed in .venv-mmcv1 by scripts/setup.sh test")
    import wandb

    local_stores(tmp_path, monkeypatch)
    work = tmp_path / "work"
    run(config, work, "--logger", "mlflow", "--logger", "wandb", "--cfg-options", "runner.max_epochs=1")
    wandb.finish()
    reference = tensorboard_points(work / "tf_logs")
    assert as_float32(mlflow_points(work / "mlruns", "work")) == reference
    assert as_float32(wandb_points(work)) == reference


def test_trainer_options_reach_the_trainer(config, tmp_path):
    """``--trainer.KEY`` and callbacks reach the Trainer; EarlyStopping and ModelCheckpoint monitor the EvalHook's
    metric under the name the loggers get (``val/accuracy_top-1``), the json log's value."""
    from lightning.pytorch.callbacks import EarlyStopping, LambdaCallback, ModelCheckpoint

    trainer = None

    def capture(runner, loaders, workflow):
        nonlocal trainer
        trainer = original(runner, loaders, workflow)
        return trainer

    original = lightning_runner.fit
    lightning_runner.fit = capture
    try:
        run(config, tmp_path / "w", "--trainer.max_time", "00:01:00:00",
            "--trainer.callbacks+=LambdaCallback", "--cfg-options", "runner.max_epochs=1",
            *[f"--trainer.callbacks{item}" for kind in ("EarlyStopping", "ModelCheckpoint")
              for item in (f"+={kind}", ".monitor=val/accuracy_top-1", ".mode=max")])  # fmt: skip
    finally:
        lightning_runner.fit = original
    assert trainer.log_every_n_steps == 1 and trainer.max_epochs == 1  # Lightning's logging at log_config's interval
    assert any(isinstance(cb, LambdaCallback) for cb in trainer.callbacks)
    [accuracy] = [record["accuracy_top-1"] for record in json_log(tmp_path / "w") if record.get("mode") == "val"]
    assert float(trainer.callback_metrics["val/accuracy_top-1"]) == pytest.approx(accuracy, abs=1e-4)
    for kind in (EarlyStopping, ModelCheckpoint):
        assert next(cb for cb in trainer.callbacks if isinstance(cb, kind)).monitor == "val/accuracy_top-1"
    assert float(next(cb for cb in trainer.callbacks if isinstance(cb, ModelCheckpoint)).best_model_score) == pytest.approx(accuracy, abs=1e-4)
    assert next(cb for cb in trainer.callbacks if type(cb).__name__ == "Timer")._duration == 3600


@pytest.mark.parametrize(("flags", "both_sides"), [
    (["--trainer.max_epochs", "5"], ["--trainer.max_epochs 5", "runner=", "max_epochs=2"]),
    (["--trainer.gradient_clip_val", "1.0"], ["--trainer.gradient_clip_val 1.0", "optimizer_config"]),
    (["--trainer.accumulate_grad_batches", "2"], ["--trainer.accumulate_grad_batches 2", "GradientCumulative"]),
    (["--trainer.enable_checkpointing", "true"], ["--trainer.enable_checkpointing true", "checkpoint_config"]),
    (["--trainer.precision", "16-mixed"], ["--trainer.precision 16-mixed", "fp16"]),
    (["--trainer.devices", "2"], ["--trainer.devices 2", "--devices"]),
    (["--trainer.logger", "false", "--logger", "csv"], ["--trainer.logger false", "--logger csv"]),
])  # fmt: skip
def test_an_option_the_config_decides_is_refused_naming_both_sides(config, tmp_path, flags, both_sides):
    with pytest.raises(TrainerOptionError) as err:
        run(config, tmp_path / "w", *flags)
    for side in both_sides:
        assert side in str(err.value)


RANK_MONITORS = '''
import json

from mmcv.runner import HOOKS, Hook


@HOOKS.register_module(force=True)
class RankMonitors(Hook):
    """What this rank's Lightning monitoring callbacks saw (written as monitors_rank{R}.json): the epochs it trained,
    EarlyStopping's best score and stopped epoch, ModelCheckpoint's best score and file."""

    def __init__(self):
        self.epochs = []

    def after_train_epoch(self, runner):
        self.epochs.append(runner.epoch)

    def after_run(self, runner):
        trainer = next(hook.trainer for hook in runner.hooks if type(hook).__name__ == "LightningLoggerHook")
        kinds = {type(callback).__name__: callback for callback in trainer.callbacks}
        stop, save = kinds["EarlyStopping"], kinds["ModelCheckpoint"]
        record = dict(epochs=self.epochs, stopped_epoch=stop.stopped_epoch, stop_best=float(stop.best_score),
                      save_best=float(save.best_model_score), save_path=save.best_model_path)
        with open(f"{runner.work_dir}/monitors_rank{runner.rank}.json", "w") as f:
            json.dump(record, f)
'''


def test_monitoring_callbacks_decide_alike_on_both_ranks_of_two_processes(tmp_path, monkeypatch):
    """``--devices 2``: mmcls's DistEvalHook evaluates on rank 0 only; both ranks' EarlyStopping and
    ``ModelCheckpoint(monitor=...)`` see rank 0's ``val/accuracy_top-1`` (the json log's), so both stop after the same
    epoch (patience 0, an improvement of 1000 asked: the 2nd of 4 epochs) and agree on the best checkpoint, which
    rank 0 alone writes (one file)."""
    import json
    import subprocess
    import sys

    from lh_testing import DDP_LAUNCH_VARIABLES, subprocess_env

    stub_collect_env(monkeypatch)
    (tmp_path / "rank_monitors.py").write_text(RANK_MONITORS)
    config = tiny_resnet_cifar(tmp_path / "tiny_resnet_cifar_dist.py", samples_per_gpu=2, imports=("rank_monitors",),
                               lines="""
        runner = dict(max_epochs=4)
        custom_hooks = [dict(type='RankMonitors')]
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call
    work = tmp_path / "work"
    flags = [f"--trainer.callbacks{item}" for kind in ("ModelCheckpoint", "EarlyStopping")
             for item in (f"+={kind}", ".monitor=val/accuracy_top-1", ".mode=max")]  # fmt: skip
    flags += ["--trainer.callbacks.patience=0", "--trainer.callbacks.min_delta=1000"]  # EarlyStopping's, the last named
    proc = subprocess.run([sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir", str(work),
                           "--seed", "0", "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", *flags],
                          cwd=tmp_path, env=subprocess_env(drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "sync_dist" not in proc.stderr  # Lightning's advice on epoch-level values of one rank: every rank has them
    ranks = [json.loads((work / f"monitors_rank{rank}.json").read_text()) for rank in (0, 1)]
    assert ranks[0] == ranks[1]
    accuracies = [r["accuracy_top-1"] for r in json_log(work) if r.get("mode") == "val"]
    assert ranks[0]["epochs"] == [0, 1] and len(accuracies) == 2 and ranks[0]["stopped_epoch"] == 1
    assert ranks[0]["stop_best"] == pytest.approx(accuracies[0], abs=1e-4)
    assert ranks[0]["save_best"] == pytest.approx(max(accuracies), abs=1e-4)
    assert [p.name for p in Path(ranks[0]["save_path"]).parent.glob("*.ckpt")] == [Path(ranks[0]["save_path"]).name]
