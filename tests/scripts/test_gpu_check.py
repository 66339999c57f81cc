"""``scripts/gpu-check.sh``: without a GPU it says so and exits 0; ``--fetch`` keeps what it downloads pure or built
for the GPU machine's Python, and under 64 MiB (checked offline here with a stand-in ``pip`` that writes wheels of
chosen names and sizes; ``bash scripts/gpu-check.sh --fetch`` itself takes minutes of downloads)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check.sh"
#: a stand-in for ``$PYTHON -m pip download|wheel ... -d|-w DIR REQUIREMENT``: writes REQUIREMENT's wheel into DIR,
#: named by $FAKE_TAG (one of them by $FAKE_ODD_TAG when set) and of $FAKE_KIB KiB
FAKE_PIP = r"""#!/usr/bin/env bash
dir= req=
while [ $# -gt 0 ]; do
  case $1 in -d|-w) dir=$2; shift ;; *) req=$1 ;; esac
  shift
done
name=${req#pure:}
name=${name%%[=<>]*}
tag=$FAKE_TAG
[ "$name" = mmengine ] && [ -n "${FAKE_ODD_TAG:-}" ] && tag=$FAKE_ODD_TAG
head -c $((FAKE_KIB * 1024)) /dev/zero > "$dir/${name//-/_}-1.0-$tag.whl"
"""


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})  # fmt: skip


def test_without_a_gpu_it_says_so_and_exits_0():
    assert not __import__("torch").cuda.is_available()
    for python in (sys.executable, "python3"):  # this venv's torch (no CUDA), and a Python that may have no torch
        result = run(PYTHON=python)
        assert result.returncode == 0, result.stderr
        assert "gpu-check: no GPU on this machine" in result.stdout
        assert not (ROOT / ".gpu-site").exists()  # nothing installed


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python"
    path.write_text(FAKE_PIP)
    path.chmod(0o755)
    return path


def test_fetch_reports_the_size_of_pure_and_target_wheels(fake_python, tmp_path):
    result = run("--fetch", str(tmp_path / "wheels"), PYTHON=str(fake_python), FAKE_TAG="py3-none-any", FAKE_KIB="100",
                 FAKE_ODD_TAG="cp312-cp312-manylinux_2_17_x86_64")  # fmt: skip
    assert result.returncode == 0, result.stderr
    wheels = list((tmp_path / "wheels").iterdir())
    assert len(wheels) == len(requirements())
    size = int(re.search(r"gpu-check: (\d+) MiB of wheels in .+ \(limit 64 MiB\)", result.stdout).group(1))
    assert size == -(-len(wheels) * 100 // 1024)  # du -m rounds up


def test_fetch_refuses_a_wheel_built_for_this_machines_python(fake_python, tmp_path):
    result = run("--fetch", str(tmp_path / "wheels"), PYTHON=str(fake_python), FAKE_TAG="py3-none-any", FAKE_KIB="1",
                 FAKE_ODD_TAG="cp311-cp311-linux_x86_64", GPU_PYTHON_VERSION="3.12")  # fmt: skip
    assert result.returncode == 1
    assert "mmengine-1.0-cp311-cp311-linux_x86_64.whl" in result.stdout
    assert "built for this machine's Python, not the GPU machine's" in result.stderr


def test_fetch_refuses_more_than_64_mib(fake_python, tmp_path):
    kib = 65 * 1024 // len(requirements()) + 1
    result = run("--fetch", str(tmp_path / "wheels"), PYTHON=str(fake_python), FAKE_TAG="py3-none-any", FAKE_KIB=str(kib))
    assert result.returncode == 1 and "more than 64 MiB of wheels" in result.stderr


def requirements() -> list[str]:
    """The script's ``REQUIREMENTS``: what ``--fetch`` gets."""
    text = SCRIPT.read_text()
    start = "\nREQUIREMENTS=("
    return text[text.index(start) + len(start):].split(")", 1)[0].split()


def test_the_pinned_wheels_are_the_versions_the_suite_runs_here():
    pinned = dict(r.removeprefix("pure:").split("==") for r in requirements() if "==" in r)
    for name in ("mmengine", "mmpretrain", "mmcv-lite", "classy-vision", "imix", "mmdet", "mmsegmentation", "omegaconf",
                 "hydra-core", "jsonargparse", "pydantic", "pydantic-core", "fvcore", "visdom", "shapely"):
        assert pinned[name] == importlib.metadata.version(name), name


#: a stand-in for the GPU machine's Python in a dry run: notes each command in $FAKE_LOG; ``-m pip`` does nothing,
#: ``-c "import A,B"`` fails where $FAKE_MISSING names one of the modules; every other command succeeds
FAKE_RUN_PYTHON = r"""#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
if [ "$1" = -c ]; then
  for name in ${FAKE_MISSING:-}; do
    case ",${2#import }," in *",$name,"*) exit 1 ;; esac
  done
fi
[ "$1 $2" = "-m pytest" ] && echo "${FAKE_PYTEST_SAYS:-1 passed in 0.01s}"
exit 0
"""


def dry_run(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``gpu-check.sh --dry-run`` (``args``: in its place) with :data:`FAKE_RUN_PYTHON`, whose ``torch`` sees a GPU;
    returns the run and the commands it gave Python."""
    python, wheels, log = tmp_path / "python", tmp_path / "wheels", tmp_path / "commands.log"
    python.write_text(FAKE_RUN_PYTHON)
    python.chmod(0o755)
    wheels.mkdir()
    (wheels / "mmengine-0.10.7-py3-none-any.whl").write_bytes(b"")
    result = run(*(args or ["--dry-run"]), PYTHON=str(python), GPU_WHEELS=str(wheels), FAKE_LOG=str(log),
                 GPU_SITE=str(tmp_path / "site"), **env)  # fmt: skip
    return result, log.read_text().splitlines()


def test_a_cuda_test_that_skips_on_the_gpu_machine_fails_its_check(tmp_path):
    """On the GPU machine (no option) a CUDA test that pytest skips checked nothing: its step fails, naming it."""
    result, commands = dry_run(tmp_path, "", FAKE_PYTEST_SAYS="1 passed, 1 skipped in 0.02s")
    assert result.returncode == 1
    assert "=== gpu-check: CUDA tests: EMA and loss scale FAILED: a test skipped" in result.stdout
    assert not any("--collect-only" in c or "--dry-run" in c for c in commands)
    (tmp_path / "passing").mkdir()
    result, _ = dry_run(tmp_path / "passing", "")
    assert result.returncode == 0 and "FAILED" not in result.stdout


def test_a_dry_run_collects_each_cuda_test_and_loads_the_configs_training_nothing(tmp_path):
    result, commands = dry_run(tmp_path, FAKE_MISSING="deepspeed")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "-m pip install --quiet --no-index --no-deps --no-compile --target" in commands[0]
    runs = [c for c in commands if not c.startswith(("-c ", "-m pip "))]
    pytest_runs = [c for c in runs if c.startswith("-m pytest")]
    assert pytest_runs and all(c.endswith("--collect-only") or " --collect-only " in c for c in pytest_runs)
    assert "scripts/gpu_check_flexible.py fsdp --dry-run" in runs
    assert not any("gpu_check_flexible.py ds" in c for c in runs)  # DeepSpeed cannot be had: said, the rest runs
    assert "DeepSpeed cannot be had here" in result.stdout
    assert "benchmarks/mmengine_train.py --help" in runs and not any("--rounds" in c for c in runs)
    assert "(dry run)" in result.stdout and not (ROOT / ".gpu-site").exists()


def test_a_step_whose_modules_do_not_import_is_skipped_by_name(tmp_path):
    result, _ = dry_run(tmp_path, FAKE_MISSING="imix")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "iMIX Fp16OptimizerHook, Lightning's GradScaler SKIPPED: it needs pytest,imix,tensorboard" in result.stdout


def test_no_step_starts_past_the_runs_budget(tmp_path):
    result, commands = dry_run(tmp_path, GPU_CHECK_BUDGET_S="10")
    assert result.returncode == 1
    assert result.stdout.count("SKIPPED: the run's 10 s are spent") == 7
    assert [c for c in commands if not c.startswith(("-c ", "-m pip "))] == []


def test_the_script_runs_every_cuda_only_test_of_the_suite():
    """The ``tests/...py::name`` the script names are the suite's tests marked to run only with CUDA, each a
    module-level test function of its file (``gpu-check.sh --dry-run`` collects them with pytest, on the GPU
    machine's packages)."""
    named = set(re.findall(r"(tests/[\w/]+\.py)::(\w+)", SCRIPT.read_text()))
    marked = re.compile(r"^@pytest\.mark\.skipif\(not torch\.cuda\.is_available\(\).*\n(?:@.*\n)*def (\w+)\(", re.M)
    cuda_only = {(str(path.relative_to(ROOT)), name) for path in (ROOT / "tests").rglob("test_*.py")
                 for name in marked.findall(path.read_text())}  # fmt: skip
    assert named == cuda_only and len(named) == 6
