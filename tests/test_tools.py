"""The package passes its linters: ``ruff check lightning_hooks`` and ``mypy`` (configured in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.skip(f"{tool} is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_passes():
    result = _run("ruff", "check", "lightning_hooks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_passes_on_core_and_callbacks():
    """mypy's scope and options are in pyproject.toml ([tool.mypy]): core and callbacks."""
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
