"""Every MMEngine test runs in its own working directory (MMEngine hooks write relative paths), and leaves no closed
log file on an MMLogger."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mmengine.logging import MMLogger

pytest.register_assert_rewrite("downstream_kit")  # its comparisons report the differing values


@pytest.fixture(autouse=True)
def _quiet_cwd(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _closed_log_files_removed() -> Iterator[None]:
    """Before and after each test, the closed log files on MMLoggers are taken off them. ``BaseModule.init_weights``
    outside a run writes to the current MMLogger's file handlers' streams (``_dump_init_info``); a handler is left
    closed by a test that closes a run's file on purpose, and by any code in the process that calls
    ``logging.config.dictConfig`` (Hydra, VISSL's logging setup), which closes every handler without detaching it."""
    _remove_closed_log_files()
    yield
    _remove_closed_log_files()


def _remove_closed_log_files() -> None:
    for logger in list(MMLogger._instance_dict.values()):
        for handler in [h for h in logger.handlers if getattr(h, "baseFilename", None) and h.stream is None]:
            logger.removeHandler(handler)
