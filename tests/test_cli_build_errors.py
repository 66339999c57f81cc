"""``lightning-hooks fit --config``: an object that refuses its arguments ends the command on one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lh_testing import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """trainer:
  callbacks:
    - class_path: lightning_hooks.{adapter}
      init_args:
        hooks: [{hook}]
seed_everything: 0
"""


@pytest.mark.parametrize("adapter, hook, expected", [
    ("MMEngineAdapter", "{type: EMAHok}", "MMEngineAdapter: build_hooks: hook type 'EMAHok' is not registered"),
    ("ClassyAdapter", "{name: precise_bn_hok}", "ClassyAdapter: unknown Classy hook name 'precise_bn_hok'"),
    ("IMIXAdapter", "{type: IterationTimerHok}", "IMIXAdapter: unknown iMIX hook type 'IterationTimerHok'"),
])  # fmt: skip
def test_cli_unknown_hook_type_is_one_line_with_did_you_mean(adapter, hook, expected, tmp_path):
    (tmp_path / "bad.yaml").write_text(CONFIG.format(adapter=adapter, hook=hook))
    env = subprocess_env()
    result = subprocess.run([sys.executable, "-m", "lightning_hooks", "fit", "--config", "bad.yaml"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    lines = [line for line in result.stderr.splitlines() if "error" in line or "Traceback" in line]
    assert result.returncode == 2
    assert len(lines) == 1 and lines[0].startswith(f"lightning-hooks fit: error: {expected}"), result.stderr[-3000:]
    assert "Did you mean" in lines[0]
