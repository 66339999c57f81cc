"""``lightning-hooks train CONFIG.py --logger ...`` on mmcls's shipped CIFAR ResNet (OpenMMLab 1.x): the log buffer's
scalars reach each Lightning logger under the names and at the steps mmcv's own ``TensorboardLoggerHook`` (listed in
the config's ``log_config``) writes them; the json and text logs are as without the flag; ``--trainer.KEY`` reaches the
Trainer and an option the config decides is refused naming both sides (issue #34)."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from mmcv_testkit import fresh_root_logger, stub_collect_env  # skips outside .venv-mmcv1
from tracker_stores import csv_points, local_stores, mlflow_points, tensorboard_points, wandb_points

mmcls = pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

from lightning_hooks.core.trainer_options import TrainerOptionError  # noqa: E402
from lightning_hooks.families.mmcv import train as mmcv_train  # noqa: E402

SHIPPED = Path(mmcls.__file__).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"
TINY_DATASET = '''
import numpy as np
from mmcls.datasets import DATASETS, BaseDataset


@DATASETS.register_module(force=True)
class TinyCIFARLoggers(BaseDataset):
    CLASSES = [str(i) for i in range(10)]

    def load_annotations(self):
        rng = np.random.RandomState(1 if self.test_mode else 0)
        n = 4 if self.test_mode else 8
        return [dict(img=rng.randint(0, 255, (32, 32, 3)).astype(np.uint8), gt_label=np.array(i % 10, dtype=np.int64))
                for i in range(n)]
'''


@pytest.fixture
def config(tmp_path, monkeypatch):
    """The shipped CIFAR ResNet, narrow, on tiny data, 2 epochs, logging every iteration to text, json and mmcv's
    TensorboardLoggerHook (the reference for names and steps)."""
    stub_collect_env(monkeypatch)
    fresh_root_logger("mmcv")  # an earlier test's run left mmcv's logger a closed log file (init_weights writes there)
    (tmp_path / "tiny_cifar_loggers.py").write_text(TINY_DATASET)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "tiny_resnet_cifar.py"
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(SHIPPED)!r}]
        custom_imports = dict(imports=['tiny_cifar_loggers'])
        model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64))
        data = dict(samples_per_gpu=4, workers_per_gpu=0, persistent_workers=False,
                    train=dict(type='TinyCIFARLoggers'), val=dict(type='TinyCIFARLoggers'),
                    test=dict(type='TinyCIFARLoggers'))
        runner = dict(max_epochs=2)
        log_config = dict(interval=1, hooks=[dict(type='TextLoggerHook'), dict(type='TensorboardLoggerHook')])
        lr_config = dict(policy='step', step=[1])
        evaluation = dict(interval=1, metric='accuracy')
    """))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield path
    torch.set_num_threads(threads)
    sys.modules.pop("tiny_cifar_loggers", None)


def run(config: Path, work_dir: Path, *flags: str) -> None:
    fresh_root_logger("mmcls")
    mmcv_train.main([str(config), "--work-dir", str(work_dir), "--seed", "0", "--accelerator", "cpu", *flags])


def json_log(work_dir: Path) -> list[dict]:
    (path,) = work_dir.glob("*.log.json")
    lines = [json.loads(line) for line in path.read_text().replace(str(work_dir), "WORK").splitlines()]
    return [{k: v for k, v in r.items() if k not in ("time", "data_time", "eta", "memory")} for r in lines]


def text_log(work_dir: Path) -> list[str]:
    (path,) = [p for p in work_dir.glob("*.log") if not p.name.endswith(".json")]
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if " - mmcls - " in line]
    return [line.split(", time:")[0] for line in lines if line.startswith(("Epoch", "Saving checkpoint"))]


def as_float32(points):
    return sorted((step, name, float(np.float32(value))) for step, name, value in points)


def test_csv_and_tensorboard_get_the_log_buffers_scalars_and_the_logs_stay(config, tmp_path):
    plain, logged = tmp_path / "plain", tmp_path / "logged"
    run(config, plain)
    run(config, logged, "--logger", "csv", "--logger", "tensorboard")
    assert json_log(logged) == json_log(plain)
    assert text_log(logged) == text_log(plain) and text_log(plain)
    names = {side: sorted(re.sub(r"\d{8}_\d{6}", "STAMP", p.name) for p in side.iterdir()) for side in (plain, logged)}
    assert [n for n in names[logged] if n not in ("lightning_logs", "tensorboard")] == names[plain]
    reference = tensorboard_points(logged / "tf_logs")  # mmcv's TensorboardLoggerHook in the same run
    assert {"train/loss", "learning_rate", "momentum", "val/accuracy_top-1"} <= {name for _, name, _ in reference}
    untimed = [p for p in reference if p[1] not in ("train/time", "train/data_time")]
    assert [p for p in tensorboard_points(logged / "tensorboard" / "version_0") if p[1] not in ("train/time", "train/data_time")] == untimed
    csv = csv_points(logged / "lightning_logs" / "version_0" / "metrics.csv")
    assert [p for p in as_float32(csv) if p[1] not in ("train/time", "train/data_time")] == untimed


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
    from lightning.pytorch.callbacks import LambdaCallback

    fresh_root_logger("mmcls")
    trainer = None

    def capture(runner, loaders, workflow):
        nonlocal trainer
        trainer = original(runner, loaders, workflow)
        return trainer

    original = mmcv_train.fit
    mmcv_train.fit = capture
    try:
        run(config, tmp_path / "w", "--trainer.log_every_n_steps", "3", "--trainer.max_time", "00:01:00:00",
            "--trainer.callbacks+=LambdaCallback", "--cfg-options", "runner.max_epochs=1")
    finally:
        mmcv_train.fit = original
    assert trainer.log_every_n_steps == 3 and trainer.max_epochs == 1
    assert any(isinstance(cb, LambdaCallback) for cb in trainer.callbacks)
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
