"""`lightning-hooks demo` (the README's main job) trains, reports what every family's real hooks produced, plots raw
vs EMA validation, shows the legacy loggers' lines and prints no warning."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import torch
from lh_testing import subprocess_env

ROOT = Path(__file__).parents[1]


def test_demo_runs_every_family_reports_each_hook_and_prints_no_warning(tmp_path):
    env = subprocess_env()
    result = subprocess.run([sys.executable, "-m", "lightning_hooks", "demo", "--out", "out", "--epochs", "2"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    printed = result.stdout + result.stderr
    noise = [line for line in printed.splitlines() if "warn" in line.lower() or "Tip:" in line]
    assert not noise, noise
    out, table = tmp_path / "out", result.stdout
    for hook in ("EMAHook", "CheckpointHook", "LoggerHook", "PreciseBatchNormHook", "IterationTimerHook", "PeriodicLogger"):
        assert hook in table
    assert "val loss of all 256 samples after training: EMA" in table and "after_train_iter x64" in table
    assert "Which loss is which" in table and "mmengine - INFO - Epoch(train)" in table  # MMLogger's lines
    assert "INFO:root:Use precise BatchNorm hook" in result.stderr  # Classy's logging.info, as classy_train.py
    assert "imix.engine.hooks.iteration_time]: The Whole training speed" in table  # iMIX's setup_logger format
    mmengine = torch.load(out / "epoch_2.pth", weights_only=True)  # MMEngine CheckpointHook
    assert "ema_state_dict" in mmengine and mmengine["meta"]["epoch"] == 2
    assert {p.name for p in (out / "classy_checkpoints").iterdir()} >= {
        "model_phase-0_end.torch", "model_phase-2_end.torch"}  # fmt: skip
    records = [json.loads(line) for line in (out / "imix_status.json").read_text().splitlines()]
    assert len(records) == 8 and all("total_loss" in r for r in records)  # every 8 of 64 iterations
    assert (out / "val_curves.png").read_bytes().startswith(b"\x89PNG")
    rows = list(csv.DictReader((out / "lightning_logs" / "version_0" / "metrics.csv").open()))
    curves = [r for r in rows if r["val_loss/raw"]]
    assert len(curves) == 2 and all(r["val_loss/ema"] and r["val_acc/raw"] and r["val_acc/ema"] for r in curves)
    assert list((out / "lightning_logs" / "version_0").glob("events.out.tfevents.*"))  # TensorBoard
