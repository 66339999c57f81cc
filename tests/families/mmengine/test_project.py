"""A user's own OpenMMLab 2.0 project trains under ``lightning-hooks train`` as under OpenMMLab's ``tools/train.py``.

The project (``user_repo/``) is laid out as OpenMMLab's ``projects/`` folders are: ``projects/my_proj/my_proj/``
registers a backbone, a dataset, a transform, a metric and a hook in mmpretrain's registries, and
``projects/my_proj/configs/my_config.py`` (whose ``_base_`` is mmpretrain's shipped ResNet-18 CIFAR config) imports it
by name (``custom_imports``). It sits in a clone of mmpretrain as its users keep one (``configs/`` and
``tools/train.py``: here the installed package's ``.mim`` copies) and every command runs in that clone's root, as the
docs say. The host is mmpretrain's own ``tools/train.py``, with the root on ``PYTHONPATH`` as an editable install and
``tools/dist_train.sh`` put it there; ``lightning-hooks train`` (the console script and ``python -m``) gets no path
from the test. Nothing in this process imports the project.

Every subprocess that trains gets a ``sitecustomize`` that imports mmpretrain with tests/helpers/openmmlab_stubs.py,
standing in for the torchvision and compiled mmcv ops this venv lacks (a user's environment has them).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, ROOT, subprocess_env

USER_REPO = Path(__file__).parent / "user_repo"
CONFIG = "projects/my_proj/configs/my_config.py"
WORK_DIR = Path("work_dirs/my_config")
LAST = "epoch_2.pth"
#: the commands docs/migration-mmengine.md's "Your own project" shows, run from the clone's root
CONSOLE = ["lightning-hooks", "train", CONFIG]
MODULE = ["python", "-m", "lightning_hooks", "train", CONFIG]
STAMP = re.compile(r"\d{8}_\d{6}")
#: a log line's date and the wall-clock values in it
CLOCK = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d - |(?<=\s)(eta|time|data_time|memory): \S+")
SITECUSTOMIZE = "import openmmlab_stubs\nopenmmlab_stubs.import_openmmlab(['mmpretrain'])\n"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The user's clone of mmpretrain: ``configs/``, ``tools/train.py`` and the project."""
    root = tmp_path / "mmpretrain"
    shutil.copytree(USER_REPO, root)
    mim = Path(importlib.util.find_spec("mmpretrain").origin).parent / ".mim"
    (root / "configs").symlink_to(mim / "configs")
    (root / "tools").mkdir()
    shutil.copy(mim / "tools" / "train.py", root / "tools" / "train.py")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return root


def run(clone: Path, command: list[str], *, host: bool = False, expect: int = 0, site: bool = True
        ) -> subprocess.CompletedProcess:  # fmt: skip
    """``command`` in the clone's root; ``host``: with the root on ``PYTHONPATH``, as OpenMMLab's scripts have it;
    ``site``: with the ``sitecustomize`` that imports mmpretrain (a run that never imports it goes without)."""
    command = [sys.executable if word == "python" else word for word in command]
    if command[0] == "lightning-hooks":
        command[0] = str(Path(sys.executable).parent / "lightning-hooks")  # the venv's console script
    paths = [*([clone.parent / "site"] if site else []), *([clone] if host else [])]
    env = subprocess_env(*paths, drop=(*DDP_LAUNCH_VARIABLES, "LIGHTNING_HOOKS_MMENGINE_SEED"), OMP_NUM_THREADS="1")
    proc = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == expect, f"{command}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc


def keep(clone: Path, name: str) -> Path:
    """Move the run's ``work_dirs`` aside (the next run writes the same folder, as a user's rerun does)."""
    kept = clone.parent / name
    (clone / "work_dirs").rename(kept)
    return kept / WORK_DIR.name


def listing(work_dir: Path) -> list[str]:
    return sorted(STAMP.sub("STAMP", str(p.relative_to(work_dir))) for p in work_dir.rglob("*") if p.is_file())


def scalars(work_dir: Path) -> list[dict]:
    (path,) = work_dir.glob("*/vis_data/scalars.json")
    return [{k: v for k, v in json.loads(line).items() if k not in ("time", "data_time", "eta", "memory")}
            for line in path.read_text().splitlines()]  # fmt: skip


def log_lines(work_dir: Path) -> list[str]:
    """The run's log from the project hook's first line on (the Runner's environment and config header before it is
    not the training's), without dates, wall-clock values and MMEngine's deprecation warnings."""
    (path,) = work_dir.glob("*/*.log")
    lines = [STAMP.sub("STAMP", CLOCK.sub("", line)) for line in path.read_text().splitlines()]
    start = next(i for i, line in enumerate(lines) if "my_proj: tracking" in line)
    return [line for line in lines[start:] if " - WARNING - " not in line]


def dump(work_dir: Path) -> list[str]:
    """The config the run wrote to its work dir, without what mmpretrain's ``tools/train.py`` adds to it and
    ``lightning-hooks train`` does not: ``launcher = 'none'`` and its dataloader defaults ``pin_memory=True`` (no
    effect on CPU) and ``collate_fn=dict(type='default_collate')`` (the dataloaders of both hosts batch alike here: the
    scalars and weights are compared bitwise)."""
    extra = ("launcher = 'none'", "    pin_memory=True,", "    collate_fn=dict(type='default_collate'),")
    return [line for line in (work_dir / "my_config.py").read_text().splitlines() if line not in extra]


def assert_same_training(expected: Path, actual: Path, *, config_dumps: bool = True) -> None:
    """Losses, learning rates and metrics of every iteration, log lines, the project hook's file, the work dir's
    files, ``last_checkpoint`` and the final checkpoint's weights, optimizer and scheduler state: the same."""
    assert listing(actual) == listing(expected)
    assert scalars(actual) == scalars(expected)
    assert log_lines(actual) == log_lines(expected)
    assert any("my_proj/mean_confidence" in line for line in log_lines(actual))  # the project's metric was logged
    assert (actual / "losses.json").read_text() == (expected / "losses.json").read_text()
    for side in (expected, actual):
        assert Path((side / "last_checkpoint").read_text()).name == LAST
    if config_dumps:
        assert dump(actual) == dump(expected)
    ours = torch.load(actual / LAST, map_location="cpu", weights_only=False)
    theirs = torch.load(expected / LAST, map_location="cpu", weights_only=False)
    assert ours["state_dict"].keys() == theirs["state_dict"].keys()
    for key, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][key], value), key
    for i, state in theirs["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(ours["optimizer"]["state"][i][key]), torch.as_tensor(value)), (i, key)
    assert ours["optimizer"]["param_groups"] == theirs["optimizer"]["param_groups"]
    assert ours["param_schedulers"] == theirs["param_schedulers"]
    for key in ("epoch", "iter", "dataset_meta"):
        assert ours["meta"][key] == theirs["meta"][key], key
    assert STAMP.sub("STAMP", ours["meta"]["experiment_name"]) == STAMP.sub("STAMP", theirs["meta"]["experiment_name"])


def test_the_docs_show_the_commands_these_tests_run() -> None:
    page = (ROOT / "docs" / "migration-mmengine.md").read_text()
    section = page[page.index("## Your own project"):]
    for command in (CONSOLE, MODULE, ["python", "tools/train.py", CONFIG], [*CONSOLE, "--devices", "2"]):
        assert " ".join(command) in section, command


def test_project_trains_as_under_tools_train(clone: Path) -> None:
    """``python tools/train.py CONFIG`` against the console script and ``python -m lightning_hooks``, one process."""
    run(clone, ["python", "tools/train.py", CONFIG], host=True)
    expected = keep(clone, "tools_train")
    for name, command in (("console", CONSOLE), ("module", MODULE)):
        run(clone, command)
        assert_same_training(expected, keep(clone, name))


@pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
                    reason="needs torch.distributed with the gloo backend")  # fmt: skip
def test_project_trains_in_two_processes_as_under_torchrun(clone: Path) -> None:
    """``--devices 2`` against the Runner launched as ``tools/dist_train.sh`` launches it (torchrun, two processes;
    on CPU with gloo: tests/helpers/runner_train.py): each process imports the project."""
    run(clone, ["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541",
                str(HELPERS / "runner_train.py"), CONFIG, str(WORK_DIR)], host=True)  # fmt: skip
    expected = keep(clone, "torchrun")
    run(clone, [*CONSOLE, "--devices", "2", "--accelerator", "cpu"])
    # runner_train.py sets the launcher, gloo and the CPU model wrapper in the config it dumps
    assert_same_training(expected, keep(clone, "console"), config_dumps=False)


def test_a_project_that_does_not_import_fails_with_its_import_error(clone: Path) -> None:
    """The user's own ``ImportError``, naming the module, as ``tools/train.py`` shows it; never "no registered family
    trains" (a config with only ``_base_`` and ``custom_imports`` of its own is read to find its kind). The
    dependency is the first import of the package's first module, so neither process imports mmpretrain (nor the
    ``sitecustomize`` that stands in for what it needs)."""
    dataset = clone / "projects" / "my_proj" / "my_proj" / "dataset.py"  # a dependency the project lacks
    dataset.write_text("import my_missing_dependency  # noqa: F401\n" + dataset.read_text())
    config = "projects/my_proj/configs/broken.py"
    (clone / config).write_text("_base_ = ['./my_config.py']\n"
                                "custom_imports = dict(imports=['projects.my_proj.my_proj'], allow_failed_imports=False)\n")
    host = run(clone, ["python", "tools/train.py", config], host=True, expect=1, site=False)
    ours = run(clone, ["lightning-hooks", "train", config], expect=1, site=False)
    error = "ModuleNotFoundError: No module named 'my_missing_dependency'"
    assert error in host.stderr and error in ours.stderr
    assert f"{config}: custom_imports: 'projects.my_proj.my_proj' does not import: {error}" in ours.stderr
    assert "no registered family" not in ours.stderr
