"""The OpenMMLab 1.x family's tests run in ``.venv-mmcv1`` (mmcv 1.x, made by ``bash scripts/setup.sh test``): its
import name ``mmcv`` is taken in the main venv by mmcv-lite 2.x, which has no ``mmcv.runner``. This test runs
``tests/families/mmcv`` there, so the main suite fails when they do."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from lh_testing import subprocess_env

ROOT = Path(__file__).resolve().parents[3]
MMCV1 = ROOT / ".venv-mmcv1" / "bin" / "python"


def _mmcv1_python() -> Path:
    if not MMCV1.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{MMCV1} is missing: CI must run `bash scripts/setup.sh test`, which creates it")
        pytest.skip("no .venv-mmcv1: `bash scripts/setup.sh test` creates it")
    return MMCV1


def test_mmcv1_environment_has_mmcv_1_and_its_runner():
    script = "import mmcv, mmcv.runner; print(mmcv.__version__, len(mmcv.runner.HOOKS.module_dict))"
    out = subprocess.run([_mmcv1_python(), "-W", "ignore", "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["1.7.2", "37"]


def test_mmcv_suite_passes_in_the_mmcv1_environment():
    env = subprocess_env(inherit=False)  # this checkout, also in the suite's subprocesses
    # -n 0: in one process, as this test already runs beside the rest of the suite on one of its xdist workers
    out = subprocess.run(
        [_mmcv1_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "tests/families/mmcv",
         "--ignore", "tests/families/mmcv/test_venv.py", "tests/test_lifecycle.py::test_every_table_row_is_installed_and_fires[mmcv]"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )  # fmt: skip
    tail = "\n".join(out.stdout.splitlines()[-40:])
    assert out.returncode == 0, f"tests/families/mmcv failed in .venv-mmcv1:\n{tail}\n{out.stderr[-2000:]}"
    last = tail.splitlines()[-1]
    assert " passed" in last and "skipped" not in last, tail
