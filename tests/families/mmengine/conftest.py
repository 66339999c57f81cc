"""Every MMEngine test runs in its own working directory (MMEngine hooks write relative paths)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.register_assert_rewrite("downstream_kit")  # its comparisons report the differing values


@pytest.fixture(autouse=True)
def _quiet_cwd(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
