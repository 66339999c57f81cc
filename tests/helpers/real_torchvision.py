"""Make the real torchvision, fairscale and VISSL importable in a test subprocess.

``scripts/setup.sh test`` installs them into ``.venv/vissl-site``, outside the venv's import path:

- ``torchvision==0.28.0`` (the release for torch 2.13; the index has only its CUDA build), ``--no-deps``. Its compiled
  ops need ``libtorch_cuda.so``, which the CPU torch lacks, so ``import torchvision`` fails with ``operator
  torchvision::nms does not exist`` unless the ``torchvision::nms`` / ``torchvision::qnms`` op schemas are defined
  first (``define_op_schemas``; no kernels: nothing here runs NMS). torchmetrics, and so Lightning, imports
  torchvision whenever it can, so it must never be on the path of a process that did not define them.
- ``fairscale==0.4.13`` (sdist, ``--no-deps``): VISSL's models and checkpoint code import it.
- ``setuptools<81``: VISSL's dataset catalog asks ``pkg_resources`` (gone from setuptools >= 81) for a path.
- VISSL 0.1.6's ``vissl/``, ``configs/`` and ``hydra_plugins/``, extracted from its wheel. The wheel is never
  pip-installed: it bundles its own ``classy_vision`` and ``fairscale``, which would replace classy-vision 0.7.0.

Call ``activate()`` first thing in a subprocess (Classy's ``classy_vision.tasks`` and everything in VISSL import
torchvision); the folder is appended to ``sys.path``, so it never shadows the venv's own packages.

Example::

    import real_torchvision
    real_torchvision.activate()
    from classy_vision.tasks import ClassificationTask
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

#: Where ``scripts/setup.sh test`` installs torchvision, fairscale, setuptools<81 and VISSL's packages.
SITE = Path(sys.prefix) / "vissl-site"

#: The op schemas torchvision's fake-tensor registrations look up at import (torchvision/_meta_registrations.py).
OP_SCHEMAS = {
    "torchvision::nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "torchvision::qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


def available() -> bool:
    """Whether ``scripts/setup.sh test`` installed the site (for ``pytest.mark.skipif``)."""
    return (SITE / "torchvision").is_dir() and (SITE / "vissl").is_dir()


def define_op_schemas() -> None:
    """Define torchvision's ``nms`` / ``qnms`` op schemas (without kernels) unless they exist already."""
    for name, schema in OP_SCHEMAS.items():
        if not _op_exists(name):
            torch.library.define(name, schema)


def _op_exists(name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(name, "")
    except RuntimeError:
        return False
    return True


def activate() -> Path:
    """Define the op schemas and append the site to ``sys.path``; return the site. Idempotent."""
    if not available():
        raise FileNotFoundError(f"{SITE} lacks torchvision or vissl: run `bash scripts/setup.sh test`")
    define_op_schemas()
    if str(SITE) not in sys.path:
        sys.path.append(str(SITE))
    return SITE


def run_child(module: str, out: Path, timeout: int, folder: Path | None = None) -> dict[str, Any]:
    """Run ``<module>.child_main(out)`` (a module in this folder, or in ``folder``) in a subprocess, where it may
    activate the real torchvision, and return what it saved to ``out/results.pt``: one entry per scenario. The
    subprocess runs ``real_torchvision_child.py``, which activates it in loader workers started with ``spawn`` too."""
    here = Path(__file__).resolve().parent
    proc = subprocess.run(
        [sys.executable, str(here / "real_torchvision_child.py"), str(folder or here), module, str(out)],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-6000:]
    return torch.load(out / "results.pt", weights_only=False)


def scenario_result(results: dict[str, Any], name: str) -> dict[str, Any]:
    """One scenario's results; a scenario that raised in the subprocess fails the test with its traceback."""
    result = results[name]
    if "failed" in result:
        pytest.fail(f"scenario {name} failed in the subprocess:\n{result['failed']}")
    return result
