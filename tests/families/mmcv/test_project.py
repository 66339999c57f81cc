"""A user's own OpenMMLab 1.x project trains under ``lightning-hooks train`` as under mmcls 0.x's ``tools/train.py``.

The project (``user_repo/``) is laid out as the ``projects/`` folders of OpenMMLab 1.x repositories are:
``projects/my_proj/my_proj/`` registers a backbone, a dataset (whose ``evaluate`` adds a metric of its own), a
pipeline transform and a hook in mmcls's and mmcv's registries, and ``projects/my_proj/configs/my_config.py`` (whose
``_base_`` is mmcls's shipped ResNet-18 CIFAR config) imports it by name (``custom_imports``). It sits in a clone of
mmcls (``configs/`` and ``tools/train.py``: here the installed package's ``.mim`` copies) and every command runs in
that clone's root. The host is mmcls's own ``tools/train.py --seed 0``, with the root on ``PYTHONPATH`` as an editable
install and ``tools/dist_train.sh`` put it there; ``lightning-hooks train`` (the console script and ``python -m``)
gets no path from the test. Nothing in this process imports the project.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, ROOT, subprocess_env
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

USER_REPO = Path(__file__).parent / "user_repo"
CONFIG = "projects/my_proj/configs/my_config.py"
WORK_DIR = Path("work_dirs/my_config")
#: the commands docs/migration-mmcv.md's "Your own project" shows, run from the clone's root
CONSOLE = ["lightning-hooks", "train", CONFIG, "--seed", "0"]
MODULE = ["python", "-m", "lightning_hooks", "train", CONFIG, "--seed", "0"]
HOST = ["python", "tools/train.py", CONFIG, "--seed", "0"]
STAMP = re.compile(r"\d{8}_\d{6}")


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The user's clone of mmcls: ``configs/``, ``tools/train.py`` and the project."""
    root = tmp_path / "mmcls"
    shutil.copytree(USER_REPO, root)
    mim = Path(importlib.util.find_spec("mmcls").origin).parent / ".mim"
    (root / "configs").symlink_to(mim / "configs")
    (root / "tools").mkdir()
    shutil.copy(mim / "tools" / "train.py", root / "tools" / "train.py")
    return root


def run(clone: Path, command: list[str], *, host: bool = False, expect: int = 0) -> subprocess.CompletedProcess:
    """``command`` in the clone's root; ``host``: with the root on ``PYTHONPATH``, as OpenMMLab's scripts have it."""
    command = [sys.executable if word == "python" else word for word in command]
    if command[0] == "lightning-hooks":
        command[0] = str(Path(sys.executable).parent / "lightning-hooks")  # the venv's console script
    env = subprocess_env(*([clone] if host else []), drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1")
    proc = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, f"{command}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def keep(clone: Path, name: str) -> Path:
    """Move the run's ``work_dirs`` aside (the next run writes the same folder, as a user's rerun does)."""
    kept = clone.parent / name
    (clone / "work_dirs").rename(kept)
    return kept / WORK_DIR.name


def listing(work_dir: Path) -> list[str]:
    return sorted(STAMP.sub("STAMP", str(p.relative_to(work_dir))) for p in work_dir.rglob("*"))


def json_log(work_dir: Path) -> list[dict]:
    (path,) = work_dir.glob("*.log.json")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("time", "data_time", "eta", "memory")} for r in records]


def text_log(work_dir: Path) -> list[str]:
    """The text log's lines of the project hook, training, evaluation and checkpoints, without time stamps and
    wall-clock values (mmcv's runner also logs its hook table at the start, which the command does not)."""
    (path,) = work_dir.glob("*.log")
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if " - mmcls - " in line]
    keep = ("my_proj:", "Epoch", "Saving checkpoint", "Set random seed", "Checkpoints will be saved")
    return [re.sub(r"(eta|time|data_time): [^,]+, ", "", line) for line in lines if line.startswith(keep)]


def assert_same_training(expected: Path, actual: Path) -> None:
    """Losses, learning rates and metrics of every iteration, log lines, the project hook's file, the work dir's
    files, the config dump and the checkpoints' meta, weights and optimizer state: the same."""
    assert listing(actual) == listing(expected)
    records = json_log(actual)
    assert records == json_log(expected)
    assert [r for r in records if r.get("mode") == "val"][-1].keys() >= {"accuracy_top-1", "mean_confidence"}
    assert text_log(actual) == text_log(expected)
    assert any(line.startswith("my_proj:") for line in text_log(actual))
    assert (actual / "losses.json").read_text() == (expected / "losses.json").read_text()
    assert (actual / "my_config.py").read_text() == (expected / "my_config.py").read_text()
    assert os.readlink(actual / "latest.pth") == os.readlink(expected / "latest.pth") == "epoch_2.pth"
    for name in ("epoch_1.pth", "epoch_2.pth"):
        ours, theirs = (torch.load(side / name, map_location="cpu", weights_only=False) for side in (actual, expected))
        for meta in (ours["meta"], theirs["meta"]):
            meta.pop("time")
        assert ours["meta"] == theirs["meta"]
        assert ours["state_dict"].keys() == theirs["state_dict"].keys()
        for key, value in theirs["state_dict"].items():
            assert torch.equal(ours["state_dict"][key], value), (name, key)
        assert str(ours["optimizer"]) == str(theirs["optimizer"])


def test_the_docs_show_the_commands_these_tests_run() -> None:
    page = (ROOT / "docs" / "migration-mmcv.md").read_text()
    section = page[page.index("## Your own project"):]
    for command in (CONSOLE, MODULE, HOST, [*CONSOLE, "--devices", "2"]):
        assert " ".join(command) in section, command


def test_project_trains_as_under_tools_train(clone: Path) -> None:
    """``python tools/train.py CONFIG --seed 0`` against ``python -m lightning_hooks``. (The console script, which
    unlike ``python -m`` has not the working directory on ``sys.path``, is the command of the 2-process case.)"""
    run(clone, HOST, host=True)
    expected = keep(clone, "tools_train")
    run(clone, MODULE)
    assert_same_training(expected, keep(clone, "module"))


def test_a_project_that_does_not_import_fails_with_its_import_error(clone: Path) -> None:
    """The user's own ``ImportError``, naming the module, as ``tools/train.py`` shows it (mmcv re-raises a bare
    ``ImportError`` from it; the command names the config and the module); never "no registered family trains" (a
    config with only ``_base_`` and ``custom_imports`` of its own is read to find its kind)."""
    model = clone / "projects" / "my_proj" / "my_proj" / "model.py"  # a dependency the project lacks
    model.write_text("import my_missing_dependency  # noqa: F401\n" + model.read_text())
    config = "projects/my_proj/configs/broken.py"
    (clone / config).write_text("_base_ = ['./my_config.py']\n"
                                "custom_imports = dict(imports=['projects.my_proj.my_proj'], allow_failed_imports=False)\n")
    host = run(clone, ["python", "tools/train.py", config], host=True, expect=1)
    ours = run(clone, ["lightning-hooks", "train", config], expect=1)
    error = "ModuleNotFoundError: No module named 'my_missing_dependency'"
    assert error in host.stderr and error in ours.stderr
    assert f"{config}: custom_imports: 'projects.my_proj.my_proj' does not import: {error}" in ours.stderr
    assert "no registered family" not in ours.stderr


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                    reason="needs torch.distributed with the gloo backend")  # fmt: skip
def test_project_trains_in_two_processes_as_under_dist_train_sh(clone: Path) -> None:
    """``--devices 2`` against mmcls's ``tools/train.py --launcher pytorch`` under torchrun with two processes, as
    ``tools/dist_train.sh`` runs it (on CPU: tests/helpers/mmcv_dist_train.py, and gloo for both): each process
    imports the project."""
    gloo = ["--cfg-options", "dist_params.backend=gloo"]  # the configs' nccl is for GPUs
    run(clone, ["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", _free_port(),
                str(HELPERS / "mmcv_dist_train.py"), "mmcls", *HOST[2:], "--launcher", "pytorch", *gloo],
        host=True)  # fmt: skip
    expected = keep(clone, "dist_train")
    run(clone, [*CONSOLE, "--devices", "2", "--accelerator", "cpu", *gloo])
    assert_same_training(expected, keep(clone, "console"))
