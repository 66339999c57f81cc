"""Runs part of ``tests/families/mmcv`` in ``.venv-mmcv1`` (mmcv 1.x, made by ``bash scripts/setup.sh test``) from the
main suite: mmcv 1.x's import name ``mmcv`` is taken in the main venv by mmcv-lite 2.x, which has no ``mmcv.runner``.
The part is split across test files so that the suite's two xdist workers (``--dist loadfile``) can run them side by
side.

Example::

    run_mmcv1_suite(["tests/families/mmcv/test_train_ddp.py"])
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from lh_testing import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
MMCV1 = ROOT / ".venv-mmcv1" / "bin" / "python"
#: the files that run the mmcv suite from the main venv: never collected by the inner run
RUNNERS = ("tests/families/mmcv/test_venv.py", "tests/families/mmcv/test_venv_ddp.py")
#: the 2-process files, run by test_venv_ddp.py; test_venv.py runs the rest of ``tests/families/mmcv``
DDP_FILES = ("tests/families/mmcv/test_train_ddp.py", "tests/integration/ddp/test_write_audit_mmcv.py")


def mmcv1_python() -> Path:
    """``.venv-mmcv1``'s interpreter; the test fails on CI without it and is skipped elsewhere."""
    if not MMCV1.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{MMCV1} is missing: CI must run `bash scripts/setup.sh test`, which creates it")
        pytest.skip("no .venv-mmcv1: `bash scripts/setup.sh test` creates it")
    return MMCV1


def run_mmcv1_suite(targets: list[str], ignore: tuple[str, ...] = (), timeout: int = 1200) -> None:
    """Run pytest on ``targets`` in ``.venv-mmcv1`` (without the runner files and ``ignore``); fail with its tail."""
    # -n 0: in one process, as the calling test already runs beside the rest of the suite on one xdist worker
    ignores = [arg for path in (*RUNNERS, *ignore) for arg in ("--ignore", path)]
    out = subprocess.run(
        [mmcv1_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *targets, *ignores],
        capture_output=True, text=True, cwd=ROOT, env=subprocess_env(inherit=False), timeout=timeout,
    )  # fmt: skip  # the command on one line, as a shell would read it
    tail = "\n".join(out.stdout.splitlines()[-40:])
    assert out.returncode == 0, f"{' '.join(targets)} failed in .venv-mmcv1:\n{tail}\n{out.stderr[-2000:]}"
    last = tail.splitlines()[-1]
    assert " passed" in last and "skipped" not in last, tail
