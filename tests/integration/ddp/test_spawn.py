"""``strategy="ddp_spawn"`` (CPU, gloo, 2 ranks) with every family's adapter and the native callbacks in one Trainer:
the callbacks reach the spawned ranks by pickling, where none was constructed. ``ddp_spawn_scenarios.py`` trains one
epoch, then resumes the ``ModelCheckpoint`` file rank 0 wrote for a second one (one parent process for both fits, each
spawning its ranks afresh)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist
from lh_testing import DDP_LAUNCH_VARIABLES, subprocess_env

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with the gloo backend"
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ddp_spawn")
    env = subprocess_env(drop=DDP_LAUNCH_VARIABLES)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "ddp_spawn_scenarios.py"), str(out), "first", "resume"],
        cwd=out, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}{proc.stderr[-6000:]}"
    return out


def seen(out: Path, phase: str) -> list[dict[str, Any]]:
    return [json.loads((out / f"{phase}_rank{r}.json").read_text()) for r in (0, 1)]


def test_ddp_spawn_trains_every_family_and_the_native_callbacks(out: Path) -> None:
    for rank in seen(out, "first"):
        assert rank["global_step"] == 2
        # each callback kept its own checkpoint key in the spawned ranks (no renumbering against a stale registry)
        assert rank["state_keys"][3:6] == ["EMA", "PreciseBN", "LossScaleMonitor"]


def test_ddp_spawn_resumes_every_callback_from_the_checkpoint(out: Path) -> None:
    for rank in seen(out, "resume"):
        assert rank["epoch_at_start"] == 1 and rank["global_step"] == 4
        assert rank["ema_updates_at_start"] == 2  # the native EMA's state came back on both ranks
        assert rank["mmengine_at_start"] == [1, 2]  # runner.epoch, runner.iter
        assert rank["imix_at_start"] == 2  # iMIX's trainer.iter


def test_ddp_spawn_only_rank_0_writes_the_hooks_files(out: Path) -> None:
    work = out / "mmengine"
    assert sorted(p.name for p in work.glob("*.pth")) == ["epoch_1.pth", "epoch_2.pth"]
    assert (work / "last_checkpoint").read_text().endswith("epoch_2.pth")
    runs = [p for p in work.iterdir() if p.is_dir()]
    assert len(runs) == 2  # one timestamped log folder per fit (rank 0's), not one per rank
    for run in runs:
        assert [p.name for p in run.glob("*.log")] == [f"{run.name}.log"]
    assert sorted(p.name for p in (out / "classy").iterdir()) == [
        "checkpoint.torch", "model_phase-0_end.torch", "model_phase-1_end.torch"]


def test_ddp_spawn_names_a_hook_that_cannot_be_pickled(tmp_path: Path) -> None:
    import pickle

    from imix.engine.hooks import JSONLoggerHook, PeriodicLogger

    from lightning_hooks import IMIXAdapter

    adapter = IMIXAdapter([PeriodicLogger([JSONLoggerHook(str(tmp_path / "status.json"))], 1)])  # holds an open file
    with pytest.raises(TypeError, match=r"the PeriodicLogger hook cannot be pickled .*Use strategy='ddp'"):
        pickle.dumps(adapter)
