"""Only rank 0 writes, as under the legacy host: in a two-process run (gloo, CPU) each rank's writes under the work
dir (files opened for writing, renamed onto, folders made: tests/helpers/write_audit.py) are the legacy host's rank by
rank, with Lightning's loggers (``--logger csv tensorboard mlflow wandb``), whose stores rank 0 alone writes.

Each family's host is launched as its users launch it on two processes: MMEngine's Runner under torchrun
(``tools/dist_train.sh``), mmcv 1.x's ``tools/train.py --launcher pytorch`` under torchrun (test_write_audit_mmcv.py,
which tests/families/mmcv/test_venv_ddp.py runs in ``.venv-mmcv1``), Classy's
``classy_train.py --distributed_backend ddp`` under torchrun, VISSL's launcher with two processes; each beside
``lightning-hooks train --devices 2`` on the same config. iMIX has no train command.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import real_torchvision
import write_audit
import write_audit_runs
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, ROOT, python_path, subprocess_env

LOGGERS = write_audit_runs.LOGGERS


def _test_module(path: Path):
    """A family's test module, by path (its cases and launch kits)."""
    spec = importlib.util.spec_from_file_location(f"write_audit_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _audited(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every process a test starts records its writes under ``tmp_path`` (the sides' work dirs) into the returned
    records folder."""
    records = tmp_path / "writes"  # beside the sides' work dirs: its files are written with os.write, unrecorded
    for key, value in write_audit.env(records, tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", python_path(write_audit.SITE))
    return records


def test_mmengine_ranks_write_what_the_runners_ranks_write(monkeypatch, tmp_path):
    """mmpretrain's ResNet-18 CIFAR on its shipped loader workers (2 a loader, not persistent), test_train_ddp.py's
    two-process case, once for both tests: the ranks' writes, then (the loggers' stores moved out of Lightning's work
    dir) test_train_ddp's rank-by-rank comparison of the same runs."""
    ddp = _test_module(ROOT / "tests" / "families" / "mmengine" / "test_train_ddp.py")
    records = _audited(monkeypatch, tmp_path)
    path = ddp.two_process_config(tmp_path, ddp.AUDITED)
    runner, lightning = ddp.run_both(path, tmp_path, 29581, *LOGGERS)
    sides = write_audit.by_side(write_audit.writes(records))
    assert write_audit.differences(sides["runner"], sides["lightning"]) == {}
    assert "write losses_rank1.jsonl" in sides["runner"][1]  # rank 1 recorded (resume_kit.RankLossHook's own file)
    for store in write_audit.LOGGER_STORES.values():
        (lightning / store).rename(tmp_path / f"lightning_{store}")
    ddp.assert_same_ranks(ddp.AUDITED, runner, lightning, runs=[0])


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _run(command: list[str], cwd: Path) -> None:
    env = subprocess_env(drop=(*DDP_LAUNCH_VARIABLES, "LOCAL_WORLD_SIZE"), OMP_NUM_THREADS="1")
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


TORCHRUN = (sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port")


@pytest.mark.skipif(not real_torchvision.available(), reason="needs the real torchvision (`bash scripts/setup.sh test`)")
def test_classy_ranks_write_what_classy_trains_ranks_write(monkeypatch, tmp_path):
    """classy_ddp_runs' ResNet task (one epoch, checkpoints each phase) under ``classy_train.py`` in torchrun."""
    records = _audited(monkeypatch, tmp_path)
    write_audit_runs.prepare_classy(tmp_path)
    script = str(HELPERS / "write_audit_runs.py")
    _run([*TORCHRUN, _free_port(), script, "classy", str(tmp_path), "classy"], cwd=tmp_path / "classy")
    _run([sys.executable, script, "classy", str(tmp_path), "lightning"], cwd=tmp_path / "lightning")
    sides = write_audit.by_side(write_audit.writes(records))
    assert write_audit.differences(sides["classy"], sides["lightning"]) == {}


@pytest.mark.skipif(not real_torchvision.available(), reason="needs the real torchvision (`bash scripts/setup.sh test`)")
def test_vissl_ranks_write_what_vissls_launcher_ranks_write(monkeypatch, tmp_path):
    """vissl_train_runs' DINO (a one-layer ViT, 32 px synthetic images, one epoch, a checkpoint each phase) in two
    processes: VISSL's launcher (``NUM_PROC_PER_NODE=2``, ``torch.multiprocessing`` spawning the ranks) and
    ``lightning-hooks train --devices 2``, as the commands a user runs (vissl_cli.py)."""
    import vissl_train_runs

    records = _audited(monkeypatch, tmp_path)
    for side, world in (("vissl", ["config.DISTRIBUTED.NUM_PROC_PER_NODE=2"]), ("lightning", ["--devices", "2", *LOGGERS])):
        out = tmp_path / side
        out.mkdir()
        command = [sys.executable, str(HELPERS / "vissl_cli.py"), side, *vissl_train_runs.overrides("dino", out),
                   *vissl_train_runs.TWO_PROCESSES, "config.OPTIMIZER.num_epochs=1", *world]  # fmt: skip
        proc = subprocess.run(command, cwd=out, env=vissl_train_runs.fresh_shell(), capture_output=True, text=True,
                              timeout=900)  # fmt: skip
        assert proc.returncode == 0, (side, proc.stderr[-6000:])
    sides = write_audit.by_side(write_audit.writes(records))
    assert write_audit.differences(sides["vissl"], sides["lightning"]) == {}
