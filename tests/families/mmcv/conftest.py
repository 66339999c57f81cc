"""The mmcv 1.x tests run in ``.venv-mmcv1`` (``bash scripts/setup.sh test``); the main suite runs them there from
tests/families/mmcv/test_venv.py and test_venv_ddp.py, and collects them here only to skip them (mmcv-lite 2.x has no ``mmcv.runner``)."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def quiet_mmcv_logger():
    """mmcv's runners and hooks log to the ``mmcv`` logger; keep it quiet but let caplog see it."""
    logger = logging.getLogger("mmcv")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(level)
