"""The OpenMMLab 1.x family's tests run in ``.venv-mmcv1`` (mmcv 1.x, made by ``bash scripts/setup.sh test``): its
import name ``mmcv`` is taken in the main venv by mmcv-lite 2.x, which has no ``mmcv.runner``. This file runs
``tests/families/mmcv`` there but for its 2-process files (test_venv_ddp.py runs those, on the other xdist worker), so
the main suite fails when they do."""

from __future__ import annotations

import subprocess

from mmcv1_suite import DDP_FILES, ROOT, mmcv1_python, run_mmcv1_suite


def test_mmcv1_environment_has_mmcv_1_and_its_runner():
    script = "import mmcv, mmcv.runner; print(mmcv.__version__, len(mmcv.runner.HOOKS.module_dict))"
    out = subprocess.run([mmcv1_python(), "-W", "ignore", "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["1.7.2", "37"]


def test_mmcv_suite_passes_in_the_mmcv1_environment():
    run_mmcv1_suite(
        ["tests/families/mmcv", "tests/test_lifecycle.py::test_every_table_row_is_installed_and_fires[mmcv]"],
        ignore=DDP_FILES,
    )
