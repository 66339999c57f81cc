"""Classy Vision's hooks in ``lightning-hooks demo``, each with a probe that says what it produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning_hooks.core.demo import Probe, Run


def demo_hooks(out: Path) -> list[tuple[Any, Probe]]:
    from classy_vision.hooks import CheckpointHook, PreciseBatchNormHook

    folder = out / "classy_checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    precise_bn = PreciseBatchNormHook(num_samples=128, cache_samples=True)

    def bn(hook: Any, run: Run) -> str:
        phases = run.adapter("classy").task.train_phase_idx + 1
        return f"BN statistics recomputed at the end of each of {phases} train phases from 128 cached samples"

    return [
        (CheckpointHook(str(folder), input_args={}), lambda hook, run: run.files(folder)),
        (precise_bn, bn),
    ]
