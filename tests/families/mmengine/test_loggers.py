"""``lightning-hooks train CONFIG.py --logger ...`` on a shipped MMEngine config: ``LoggerHook``'s scalars reach each
Lightning logger under their names and at their steps (``{timestamp}/vis_data/scalars.json``, as the host writes
it), read back from the real stores; the legacy files are as without the flag; ``--trainer.KEY`` reaches the Trainer
and an option the config decides is refused naming both sides (issue #34)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import train_kit  # registers the tiny datasets
from resume_kit import past_last_stamp
from tracker_stores import csv_points, local_stores, mlflow_points, tensorboard_points, wandb_points

from lightning_hooks.core.trainer_options import TrainerOptionError
from lightning_hooks.families.mmengine import train as mmengine_train

STAMP = re.compile(r"\d{8}_\d{6}")
#: what the loggers write under the work dir, beside the legacy files
LOGGER_DIRS = ("lightning_logs", "tensorboard", "wandb", "mlruns")


def config(directory: Path, epochs: int = 2) -> Path:
    """mmpretrain's shipped ResNet-18 CIFAR config on tiny data, logging every iteration, validating each epoch."""
    path = directory / "resnet18_cifar.py"
    path.write_text(f"_base_ = [{str(train_kit.RESNET_CIFAR)!r}]\n{train_kit.resnet_cifar()}"
                    f"param_scheduler = dict(milestones=[1])\ntrain_cfg = dict(max_epochs={epochs})\n"
                    "default_hooks = dict(logger=dict(interval=1))\nrandomness = dict(seed=0)\n")  # fmt: skip
    return path


def legacy_points(work_dir: Path, run: int | None = None) -> list[tuple[int, str, float]]:
    """Every scalar of ``scalars.json`` (what ``LoggerHook`` wrote through the visualizer) at its step; ``run``: of
    that run's timestamp folder (in time order), where the work dir has several."""
    stamps = sorted(d for d in os.listdir(work_dir) if STAMP.fullmatch(d))
    (stamp,) = stamps if run is None else [stamps[run]]
    lines = [json.loads(line) for line in (work_dir / stamp / "vis_data" / "scalars.json").read_text().splitlines()]
    return sorted((line["step"], k, float(v)) for line in lines for k, v in line.items() if k != "step")


def legacy_files(work_dir: Path) -> dict[str, Any]:
    """The host's files: their names (timestamps replaced) and the json logs without wall-clock values."""
    files = sorted(STAMP.sub("STAMP", str(p.relative_to(work_dir))) for p in work_dir.rglob("*")
                   if p.is_file() and p.relative_to(work_dir).parts[0] not in LOGGER_DIRS)  # fmt: skip
    logs = {STAMP.sub("STAMP", p.name): [{k: v for k, v in json.loads(line).items() if k not in ("time", "data_time")}
                                         for line in p.read_text().splitlines()]
            for p in work_dir.rglob("*.json")}  # fmt: skip
    return dict(files=files, logs=logs)


def untimed(points: list[tuple[int, str, float]]) -> list[tuple[int, str, float]]:
    return [p for p in points if p[1] not in ("time", "data_time")]


def as_float32(points: list[tuple[int, str, float]]) -> list[tuple[int, str, float]]:
    return [(step, name, float(np.float32(value))) for step, name, value in points]


def test_csv_and_tensorboard_get_loggerhooks_scalars_and_the_legacy_files_stay(tmp_path: Path) -> None:
    path = config(tmp_path)
    plain, logged = tmp_path / "plain", tmp_path / "logged"
    mmengine_train.main([str(path), "--work-dir", str(plain)])
    mmengine_train.main([str(path), "--work-dir", str(logged), "--logger", "csv", "--logger", "tensorboard"])
    assert legacy_files(logged) == legacy_files(plain)
    expected = legacy_points(logged)
    assert {"loss", "lr", "accuracy/top1", "epoch", "iter", "time"} <= {name for _, name, _ in expected}
    assert csv_points(logged / "lightning_logs" / "version_0" / "metrics.csv") == expected
    assert tensorboard_points(logged / "tensorboard" / "version_0") == as_float32(expected)
    assert untimed(expected) == untimed(legacy_points(plain))
    # --resume for a third epoch: the CSV logger's steps go on from the checkpoint's, as the new scalars.json's
    past_last_stamp(logged)  # the resumed run's {timestamp} folder is its own (as the Runner's)
    mmengine_train.main([str(path), "--work-dir", str(logged), "--logger", "csv", "--resume",
                         "--cfg-options", "train_cfg.max_epochs=3"])  # fmt: skip
    resumed = csv_points(logged / "lightning_logs" / "version_1" / "metrics.csv")
    assert resumed == legacy_points(logged, -1) and min(step for step, name, _ in resumed if name == "iter") == 7


def test_mlflow_and_wandb_get_loggerhooks_scalars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wandb", reason="wandb is in the test extra (scripts/setup.sh test)")
    pytest.importorskip("mlflow", reason="mlflow-skinny is in the test extra (scripts/setup.sh test)")
    import wandb

    local_stores(tmp_path, monkeypatch)
    work = tmp_path / "work"
    mmengine_train.main([str(config(tmp_path, epochs=1)), "--work-dir", str(work), "--logger", "mlflow", "--logger",
                         "wandb"])  # fmt: skip
    assert wandb.run is None  # the command ended the run it started (trainer_options.WandbRunsFinished)
    expected = legacy_points(work)
    assert mlflow_points(work / "mlruns", "resnet18_cifar") == expected
    assert wandb_points(work) == expected


def test_trainer_options_reach_the_trainer(tmp_path: Path) -> None:
    """``--trainer.KEY VALUE`` typed by ``Trainer.__init__`` (``max_time`` as a string, callbacks by class path with
    their init args) and ``--trainer-config`` YAML, the later winning; the config's loop stays."""
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint

    yaml = tmp_path / "trainer.yaml"
    yaml.write_text("max_time: '00:01:00:00'\nlog_every_n_steps: 7\ncallbacks:\n"
                    "  - class_path: lightning.pytorch.callbacks.LearningRateMonitor\n")  # fmt: skip
    argv = [str(config(tmp_path)), "--work-dir", str(tmp_path / "w"), "--trainer-config", str(yaml),
            "--trainer.log_every_n_steps", "3", "--trainer.callbacks+=lightning.pytorch.callbacks.EarlyStopping",
            "--trainer.callbacks.monitor=accuracy/top1", "--trainer.callbacks+=ModelCheckpoint",
            "--trainer.limit_val_batches", "0.5"]  # fmt: skip
    trainer = built(argv)
    assert (trainer.log_every_n_steps, trainer.limit_val_batches, trainer.max_epochs) == (3, 0.5, 2)
    kinds = [type(cb) for cb in trainer.callbacks]
    assert {LearningRateMonitor, EarlyStopping, ModelCheckpoint} <= set(kinds)
    stopper = next(cb for cb in trainer.callbacks if isinstance(cb, EarlyStopping))
    assert stopper.monitor == "accuracy/top1"
    timer = next(cb for cb in trainer.callbacks if type(cb).__name__ == "Timer")
    assert timer._duration == 3600


def test_lightnings_logging_interval_is_loggerhooks(tmp_path: Path) -> None:
    """Without ``--trainer.log_every_n_steps``, Lightning logs (a callback's values, e.g. LearningRateMonitor's) at
    ``default_hooks.logger.interval`` (1 here), as the scalars arrive: not at 50, which with ``--logger`` made
    Lightning warn on every short epoch that the logs were too sparse."""
    work = str(tmp_path / "w")
    assert built([str(config(tmp_path)), "--work-dir", work, "--logger", "csv"]).log_every_n_steps == 1
    default = tmp_path / "default_logger_hook.py"
    default.write_text(f"_base_ = [{str(config(tmp_path))!r}]\ndefault_hooks = dict(logger=dict(_delete_=True, type='LoggerHook'))\n")
    assert built([str(default), "--work-dir", work]).log_every_n_steps == 10  # LoggerHook's own default


def built(argv: list[str]) -> Any:
    """The Trainer ``main(argv)`` would fit."""
    from lightning_hooks.core.trainer_flags import split_argv
    from lightning_hooks.core.trainer_options import TrainerRequest

    argv, trainer_argv = split_argv(argv)
    parser = mmengine_train.parser()
    args = parser.parse_args(argv)
    request = TrainerRequest.from_args(args, trainer_argv, parser=parser)
    cfg = mmengine_train.load_config(args)
    return mmengine_train.build(cfg, request, devices=1, precision=args.precision)[0]


@pytest.mark.parametrize(("flags", "both_sides"), [
    (["--trainer.max_epochs", "5"], ["--trainer.max_epochs 5", "train_cfg=", "max_epochs=2"]),
    (["--trainer.max_steps", "4"], ["--trainer.max_steps 4", "train_cfg=", "max_epochs=2"]),
    (["--trainer.val_check_interval", "2"], ["--trainer.val_check_interval 2", "train_cfg=", "val_interval"]),
    (["--trainer.gradient_clip_val", "1.0"], ["--trainer.gradient_clip_val 1.0", "optim_wrapper=", "clip_grad"]),
    (["--trainer.accumulate_grad_batches", "2"], ["--trainer.accumulate_grad_batches 2", "accumulative_counts"]),
    (["--trainer.enable_checkpointing", "true"], ["--trainer.enable_checkpointing true", "CheckpointHook"]),
    (["--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "x", "--logger", "csv"],
     ["--trainer.logger", "--logger csv"]),
    (["--amp", "--trainer.precision", "16-mixed"], ["--trainer.precision 16-mixed", "AmpOptimWrapper", "--amp"]),
    (["--precision", "32", "--trainer.precision", "bf16-mixed"], ["--trainer.precision bf16-mixed", "--precision 32"]),
    (["--devices", "1", "--trainer.devices", "2"], ["--trainer.devices 2", "--devices 1"]),
    (["--work-dir", "elsewhere", "--trainer.default_root_dir", "there"], ["--trainer.default_root_dir", "--work-dir"]),
    (["--cfg-options", "randomness.deterministic=True", "--trainer.deterministic", "false"],
     ["--trainer.deterministic false", "randomness.deterministic=True"]),
    (["--trainer.max_epocs", "5"], ["--trainer.max_epocs", "max_epochs"]),
    (["--trainer.max_epochs", "x"], ["--trainer.max_epochs x", "int"]),
])  # fmt: skip
def test_an_option_the_config_decides_is_refused_naming_both_sides(tmp_path: Path, flags: list[str],
                                                                   both_sides: list[str]) -> None:  # fmt: skip
    with pytest.raises(TrainerOptionError) as err:
        mmengine_train.main([str(config(tmp_path)), *flags])
    for side in both_sides:
        assert side in str(err.value)


def test_a_vis_backend_without_loggers_says_which_flag_feeds_it() -> None:
    """``LightningLoggerVisBackend`` in a config trained without ``--logger`` warns, naming itself and the flag."""
    from mmengine.visualization import Visualizer

    from lightning_hooks.core.lightning_api import pl
    from lightning_hooks.families.mmengine.vis_backend import attach_trainer

    visualizer = Visualizer(name="lh-trackers", vis_backends=[dict(type="LightningLoggerVisBackend")], save_dir=".")
    with pytest.warns(UserWarning, match=r"LightningLoggerVisBackend .*no logger.*--logger tensorboard"):
        attach_trainer(visualizer, pl.Trainer(logger=False, enable_checkpointing=False))


def test_a_config_listing_the_backend_keeps_its_own_and_gets_no_second(tmp_path: Path) -> None:
    """A config whose visualizer lists ``LightningLoggerVisBackend`` (here with ``prefix='mm/'``) keeps it as it is
    under ``--logger``: every scalar once, under the prefixed name, at ``scalars.json``'s step."""
    path = config(tmp_path)
    with open(path, "a") as f:
        f.write("visualizer = dict(vis_backends=[dict(type='LocalVisBackend'), "
                "dict(type='LightningLoggerVisBackend', prefix='mm/')])\n")  # fmt: skip
    work = tmp_path / "work"
    mmengine_train.main([str(path), "--work-dir", str(work), "--logger", "csv"])
    expected = [(step, f"mm/{name}", value) for step, name, value in legacy_points(work)]
    assert csv_points(work / "lightning_logs" / "version_0" / "metrics.csv") == sorted(expected)
