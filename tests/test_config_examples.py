"""Every config in configs/ trains: LightningCLI configs through `lightning-hooks fit`, the Hydra tree through
examples/train_hydra.py. Each test checks what the real legacy hooks produced."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, build_callbacks
from lightning_hooks.callbacks import EMA
from lightning_hooks.lightning_cli import LightningHooksCLI
from lh_testing import subprocess_env

ROOT = Path(__file__).parents[1]
SHORT = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=6", "--trainer.limit_val_batches=2",
         "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]  # fmt: skip


def fit(name: str, tmp_path, monkeypatch) -> L.Trainer:
    monkeypatch.chdir(tmp_path)  # configs write under work_dirs/
    return LightningHooksCLI(["fit", "--config", str(ROOT / "configs" / f"{name}.yaml"), *SHORT]).trainer


def adapter(trainer: L.Trainer, kind: type):
    return next(c for c in trainer.callbacks if isinstance(c, kind))


def test_cli_mmengine_config(tmp_path, monkeypatch):
    trainer = fit("mmengine", tmp_path, monkeypatch)
    assert [type(h).__name__ for h in adapter(trainer, MMEngineAdapter).hooks] == [
        "RuntimeInfoHook", "IterTimerHook", "EMAHook", "LoggerHook", "CheckpointHook"]  # fmt: skip
    checkpoint = torch.load(tmp_path / "work_dirs/mmengine/epoch_1.pth", weights_only=False)
    assert "ema_state_dict" in checkpoint and checkpoint["meta"]["epoch"] == 1


def test_cli_classy_config(tmp_path, monkeypatch):
    trainer = fit("classy", tmp_path, monkeypatch)
    classy = adapter(trainer, ClassyAdapter)
    ema = classy.hooks[0]
    assert type(ema).__name__ == "ExponentialMovingAverageModelHook" and ema.get_classy_state()["model_state"]
    assert classy.fired["on_phase_end"] == 2  # one train and one test phase


def test_cli_imix_config(tmp_path, monkeypatch):
    trainer = fit("imix", tmp_path, monkeypatch)
    hooks = adapter(trainer, IMIXAdapter).hooks
    assert [type(h).__name__ for h in hooks] == ["AutogradAnomalyDetectHook", "IterationTimerHook", "TextLoggerHook"]
    assert not torch.is_anomaly_enabled()  # on for training only, restored by after_train


def test_cli_mixed_config(tmp_path, monkeypatch):
    trainer = fit("mixed", tmp_path, monkeypatch)
    kinds = {type(c).__name__ for c in trainer.callbacks}
    assert {"MMEngineAdapter", "ClassyAdapter", "IMIXAdapter", "EMA", "AnomalyDetector"} <= kinds
    assert (tmp_path / "work_dirs/mixed/epoch_1.pth").exists()
    assert list((tmp_path / "work_dirs/mixed").rglob("metrics.csv"))


@pytest.mark.parametrize("hooks", ["mmengine", "classy", "imix", "mixed"])
def test_hydra_tree_composes_and_trains(hooks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with initialize_config_dir(str(ROOT / "configs" / "hydra"), version_base=None):
        cfg = compose("train", overrides=[f"hooks={hooks}", "trainer.max_epochs=1", "+trainer.limit_train_batches=4",
                                          "+trainer.limit_val_batches=2", "+trainer.enable_progress_bar=false"])  # fmt: skip
    assert set(cfg.hooks) == ({"mmengine", "classy", "imix", "callbacks"} if hooks == "mixed" else {hooks})
    callbacks = build_callbacks(cfg.hooks)
    L.Trainer(**cfg.trainer, callbacks=callbacks, default_root_dir=tmp_path).fit(
        instantiate(cfg.model), instantiate(cfg.data)
    )
    if "mmengine" in cfg.hooks:
        assert list(Path(cfg.work_dir).glob("epoch_1.pth"))
    if hooks == "mixed":
        assert next(c for c in callbacks if isinstance(c, EMA)).decay == 0.99


def test_hydra_app_runs_from_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_hydra.py"), "hooks=mmengine", "trainer.max_epochs=1",
         "+trainer.limit_train_batches=4", "+trainer.limit_val_batches=2", "+trainer.enable_progress_bar=false",
         "+callbacks=[anomaly_detector,profiler]", "callbacks.profiler.start_step=0", "callbacks.profiler.num_steps=1",
         f"callbacks.profiler.dirpath={tmp_path / 'prof'}", f"hydra.run.dir={tmp_path}"],  # fmt: skip
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=subprocess_env(inherit=False),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "work_dirs/hydra/epoch_1.pth").exists()
    assert list((tmp_path / "prof").iterdir())  # the Profiler added with +callbacks ran


def test_config_store_names_are_the_snake_case_class_names():
    import lightning_hooks.callbacks as native

    names = {"ema": native.EMA, "precise_bn": native.PreciseBN, "anomaly_detector": native.AnomalyDetector,
             "profiler": native.Profiler, "loss_scale_monitor": native.LossScaleMonitor}  # fmt: skip
    with initialize_config_dir(str(ROOT / "configs" / "hydra"), version_base=None):
        cfg = compose("train", overrides=[f"+callbacks=[{','.join(names)}]", "callbacks.ema.decay=0.9"])
    assert {name: instantiate(node).__class__ for name, node in cfg.callbacks.items()} == names
    assert cfg.callbacks.ema.decay == 0.9


def test_hydra_app_runs_every_hooks_choice_without_native_callbacks(tmp_path):
    """`python examples/train_hydra.py hooks=...` without `+callbacks=[...]` (once a crash), each choice a job of one
    Hydra multirun (`-m`, one process): `mixed` (the default choice), `mmengine`, `classy`; the README's full-size
    `hooks=mixed` and `hooks=imix +callbacks=[...]` run in tests/docs/test_snippets.py."""
    command = [sys.executable, str(ROOT / "examples" / "train_hydra.py"), "-m", "hooks=mixed,mmengine,classy",
               "trainer.max_epochs=1", "+trainer.limit_train_batches=2", "+trainer.limit_val_batches=1",
               f"hydra.sweep.dir={tmp_path}"]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=subprocess_env(inherit=False))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert re.findall(r"#\d : (hooks=\w+)", output) == ["hooks=mixed", "hooks=mmengine", "hooks=classy"], output[-3000:]
    assert output.count("`Trainer.fit` stopped: `max_epochs=1` reached.") == 3, output[-3000:]
