"""A VISSL rerun on a checkpoint folder that holds its final checkpoint: ``lightning-hooks train config=...`` exits 0
and says why, as VISSL's launcher does (``Training already succeeded``), instead of nothing (VISSL logs it before
logging is set up)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import real_torchvision
import vissl_train_runs

from lh_testing import HELPERS

pytestmark = pytest.mark.skipif(not real_torchvision.available(), reason="run `bash scripts/setup.sh test` (real torchvision)")


def test_rerun_on_a_finished_checkpoint_folder_says_training_already_succeeded(tmp_path):
    (tmp_path / "model_final_checkpoint_phase1.torch").write_bytes(b"")  # VISSL's mark of a finished training
    command = [sys.executable, str(HELPERS / "vissl_cli.py"), "lightning", *vissl_train_runs.overrides("simclr", tmp_path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=vissl_train_runs.fresh_shell())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Training already succeeded in {tmp_path}" in proc.stdout, (proc.stdout, proc.stderr[-2000:])
    assert not list(tmp_path.glob("*.json"))  # no training: no stdout.json / metrics.json
