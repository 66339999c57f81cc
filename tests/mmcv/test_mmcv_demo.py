"""``lightning-hooks demo`` with mmcv 1.x installed runs the family's demo hooks too (the demo venv, with mmcv-lite
2.x, leaves them out: ``FAMILY.demo_hooks`` is None there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (bash scripts/setup.sh test)")

ROOT = Path(__file__).parents[2]


def test_demo_reports_the_mmcv_hooks_and_prints_no_warning(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "lightning_hooks", "demo", "--out", "out", "--epochs", "1"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    noise = [line for line in (result.stdout + result.stderr).splitlines() if "warn" in line.lower()]
    assert not noise, noise
    rows = [line for line in result.stdout.splitlines() if "| mmcv " in line]
    assert [row.split("|")[1].strip() for row in rows] == ["IterTimerHook", "TextLoggerHook"]
    assert "mmcv's LogBuffer" in result.stdout and "JSON log lines" in result.stdout
    [log] = (tmp_path / "out").glob("*.log.json")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["iter"] for line in lines if line.get("mode") == "train"] == [16, 32]
    assert "mmcv - INFO - Epoch [1][16/32]" in result.stderr  # TextLoggerHook's line through mmcv's logger
