"""iMIX's hooks in ``lightning-hooks demo``, each with a probe that says what it produced."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lightning_hooks.core.demo import Probe, Run


def demo_hooks(out: Path) -> list[tuple[Any, Probe]]:
    from imix.engine.hooks import IterationTimerHook, JSONLoggerHook, PeriodicLogger

    status = out / "imix_status.json"

    def records() -> list[dict[str, float]]:
        return [json.loads(line) for line in status.read_text().splitlines()] if status.exists() else []

    def timer(hook: Any, run: Run) -> str:
        times = [r["iter_time"] for r in records()]
        return f"iter_time into iMIX's log buffer: {1e3 * sum(times) / max(len(times), 1):.2f} ms/iter"

    def logger(hook: Any, run: Run) -> str:
        return f"{len(records())} JSON records of total_loss, iter_time in {os.path.relpath(status)}"

    return [(IterationTimerHook(), timer), (PeriodicLogger([JSONLoggerHook(str(status))], 8), logger)]
