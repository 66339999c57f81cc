"""SIGKILL mid-epoch, resume in a new process, compare with an uninterrupted run; SIGKILL during a checkpoint write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def _start(*args: Any, env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {})}
    return subprocess.Popen([sys.executable, *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _finish(proc: subprocess.Popen, returncode: int = 0) -> str:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == returncode, out[-4000:]
    return out


def assert_equal_state(a: Any, b: Any, where: str = "") -> None:
    """Bitwise equality of nested state (NaN equals NaN: the run has a skipped NaN step)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_equal_state(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_equal_state(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True, msg=where)
    else:
        assert a == b or (a != a and b != b), f"{where}: {a!r} != {b!r}"


def test_reliability_sigkill_mid_epoch_then_resume_equals_uninterrupted_run(tmp_path):
    full, killed = tmp_path / "full", tmp_path / "killed"
    full.mkdir()
    killed.mkdir()
    script = HERE / "reliability_resume_run.py"
    reference = _start(script, full)
    out = _finish(_start(script, killed, "--kill-at", 10), returncode=-signal.SIGKILL)
    # killed in epoch 2 (6 batches per epoch) before step 10: MMEngine's CheckpointHook wrote iter_4 and iter_8 only
    assert sorted(p.name for p in killed.glob("*.pth")) == ["iter_4.pth", "iter_8.pth"], out[-2000:]
    ckpt = torch.load(killed / "iter_8.pth", weights_only=True)
    assert ckpt["loops"]["fit_loop"]["epoch_loop.batch_progress"]["current"]["completed"] == 1  # mid-epoch
    out = _finish(_start(script, killed, "--resume", killed / "iter_8.pth"))  # fit(..., weights_only=True)
    assert "not resumable" not in out
    _finish(reference)

    expected = torch.load(full / "final.pt", weights_only=True)
    resumed = torch.load(killed / "final.pt", weights_only=True)
    for state in (expected, resumed):  # CheckpointHook's last file: the same name in two folders
        hub = state["adapters"]["mmengine"]["host"]["message_hub"]["runtime_info"]
        hub["last_ckpt"] = os.path.basename(hub["last_ckpt"])
    assert expected["global_step"] == 18
    assert expected["anomaly"] == {"skipped_steps": 1}  # the NaN step, before the kill
    assert expected["ema"]["num_updates"] == 18
    assert set(expected["adapters"]["classy"]["hooks"]) == {"ExponentialMovingAverageModelHook"}
    assert "train/loss" in expected["adapters"]["mmengine"]["host"]["message_hub"]["log_scalars"]
    # weights, native EMA + AnomalyDetector, MMEngine EMAHook's model, every adapter's state (message hub, Classy
    # hook state and counters, iMIX), all bitwise equal
    assert_equal_state(resumed, expected)
    # iMIX's log buffer counters at after_train
    assert torch.load(killed / "imix.pt") == torch.load(full / "imix.pt") == {"iter": 18, "epoch": 3,
                                                                             "epoch_inner_iter": 6}
    for path in sorted(killed.glob("*.pth")):  # every file the package wrote loads without unpickling objects
        torch.load(path, weights_only=True)


@pytest.mark.parametrize("io_kind", ["atomic", "default"])
def test_reliability_sigkill_during_checkpoint_write(tmp_path, io_kind):
    path, staging = tmp_path / "run" / "last.ckpt", tmp_path / "tmpdir"
    path.parent.mkdir()
    staging.mkdir()
    out = _finish(_start(HERE / "reliability_kill_during_save.py", path, io_kind, env={"TMPDIR": str(staging)}),
                  returncode=-signal.SIGKILL)
    if io_kind == "atomic":
        # AtomicCheckpointIO: the final name still holds the previous, complete checkpoint (weights not yet 7.0)
        ckpt = torch.load(path, weights_only=True)
        assert ckpt["global_step"] == 1 and not (ckpt["state_dict"]["layer.weight"] == 7.0).any()
        # the half-written temporary file stays next to it, hidden, and is never loaded
        assert [p.name.split("-")[0] for p in path.parent.iterdir() if p.name != "last.ckpt"] == [".last.ckpt.tmp"]
    else:
        # Lightning's TorchCheckpointIO with $TMPDIR on another filesystem: the move into place is a copy, and a kill
        # during it leaves a truncated file under the final name (same filesystem: os.rename, atomic)
        with pytest.raises(Exception):
            torch.load(path, weights_only=True)
        assert path.stat().st_size > 0, out[-2000:]
