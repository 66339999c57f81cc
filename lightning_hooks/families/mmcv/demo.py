"""mmcv 1.x's hooks in ``lightning-hooks demo``, each with a probe that says what it produced. Only where mmcv 1.x is
installed (its import name ``mmcv`` is mmcv-lite 2.x's too, which has no ``mmcv.runner``): see :func:`available`."""

from __future__ import annotations

import importlib.metadata
import json
import os
import warnings
from pathlib import Path
from typing import Any

from lightning_hooks.core.demo import Probe, Run


def available() -> bool:
    """Whether mmcv 1.x (the ``mmcv`` or ``mmcv-full`` distribution) is installed; imports nothing."""
    for distribution in ("mmcv", "mmcv-full"):
        try:
            return importlib.metadata.version(distribution).startswith("1.")
        except importlib.metadata.PackageNotFoundError:
            continue
    return False


def demo_hooks(out: Path) -> list[tuple[Any, Probe]]:
    with warnings.catch_warnings():  # mmcv 1.7's import-time notice about mmcv 2.0, for every import
        warnings.filterwarnings("ignore", message="On January 1, 2023, MMCV will release v2.0.0")
        from mmcv.runner import IterTimerHook, TextLoggerHook

    logger = TextLoggerHook(interval=16)
    logger.priority = "VERY_LOW"  # as register_training_hooks registers logger hooks

    def records() -> list[dict[str, Any]]:
        paths = sorted(out.glob("*.log.json"))
        return [json.loads(line) for line in paths[-1].read_text().splitlines()] if paths else []

    def timer(hook: Any, run: Run) -> str:
        times = [r["time"] for r in records() if "time" in r]
        return f"time into mmcv's LogBuffer: {1e3 * sum(times) / max(len(times), 1):.2f} ms/iter (16-iter means)"

    def text(hook: Any, run: Run) -> str:
        paths = sorted(out.glob("*.log.json"))
        where = os.path.relpath(paths[-1]) if paths else "no file"
        return f"{len([r for r in records() if r.get('mode')])} JSON log lines (lr, time) in {where}"

    return [(IterTimerHook(), timer), (logger, text)]
