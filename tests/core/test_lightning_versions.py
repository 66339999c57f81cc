"""The oldest supported Lightning: the reduced suite runs in ``.venv-lt24`` (``lightning`` and ``pytorch-lightning``
2.4.0, made by ``bash scripts/setup.sh test``), while the main suite runs the newest (the ``.venv`` pins 2.6)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lightning_hooks.core import lightning_api
from lh_testing import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
OLDEST = ROOT / ".venv-lt24" / "bin" / "python"
#: Core (the adapter's shared lifecycle: Lightning 2.4 starts the epoch a fit resumes into, 2.6 does not), the
#: Lightning internals, both namespaces, one differential test per family (four for MMEngine, whose resume
#: goes through fit_loop internals: the iteration-based resume catches a wrong batch_idx only here, as Lightning 2.6's
#: own index already equals the global iteration there; the iterator switch refetches Lightning's prefetched batch)
#: and the native callbacks.
REDUCED_SUITE = (
    "tests/core/test_lightning_api.py",
    "tests/test_console.py",
    "tests/test_demo.py",
    "tests/core/test_namespaces.py",
    "tests/test_adapt.py",
    "tests/core/test_dispatch.py",
    "tests/core/test_adapter.py",
    "tests/core/test_adapter_state.py",
    "tests/families/mmengine/test_differential.py::test_mmengine_ema_checkpoint_validation_match_runner",
    "tests/families/mmengine/test_differential.py::test_mmengine_resume_from_adapter_checkpoint_matches_runner_resume",
    "tests/families/mmengine/test_iter_based.py::test_mmengine_iter_based_resume_from_an_iteration_checkpoint_matches_runner_resume",
    "tests/families/mmengine/test_iter_based.py::test_mmengine_iter_based_data_switch_of_the_loop_iterator_takes_effect_at_the_next_iteration",
    "tests/families/classy/test_precise_bn_proof.py::test_classy_precise_bn_equals_fvcore_update_bn_stats",
    "tests/families/imix/test_optimizer.py::test_optimizer_hook_with_clipping_and_accumulation_matches_reference_loop",
    "tests/callbacks",
)


def _oldest_python() -> Path:
    if not OLDEST.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{OLDEST} is missing: CI must run `bash scripts/setup.sh test`, which creates it")
        pytest.skip("no .venv-lt24: `bash scripts/setup.sh test` creates it")
    return OLDEST


def test_oldest_environment_has_lightning_2_4_in_both_namespaces():
    script = "import importlib.metadata as m; print(m.version('lightning'), m.version('pytorch-lightning'))"
    out = subprocess.run([_oldest_python(), "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    versions = out.stdout.split()
    assert versions == [lightning_api.CHECKED_ON[0]] * 2
    assert all(v in lightning_api.SUPPORTED for v in versions)


def test_reduced_suite_passes_on_the_oldest_supported_lightning():
    env = subprocess_env(inherit=False)  # this checkout, also in the suite's subprocesses
    # -n 0: in one process, as this test already runs beside the rest of the suite on one of its xdist workers
    out = subprocess.run(
        [_oldest_python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *REDUCED_SUITE],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )  # fmt: skip
    tail = "\n".join(out.stdout.splitlines()[-40:])
    assert out.returncode == 0, f"reduced suite on Lightning 2.4 failed:\n{tail}\n{out.stderr[-2000:]}"
    assert " passed" in tail.splitlines()[-1], tail
