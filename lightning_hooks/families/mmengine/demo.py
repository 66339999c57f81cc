"""MMEngine's hooks in ``lightning-hooks demo``, each with a probe that says what it produced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightning_hooks.core.demo import Probe, Run


def demo_hooks(out: Path) -> list[tuple[Any, Probe]]:
    from mmengine.hooks import CheckpointHook, EMAHook, IterTimerHook, LoggerHook, RuntimeInfoHook

    def ema(hook: Any, run: Run) -> str:
        weights = {k.removeprefix("module."): v for k, v in hook.ema_model.state_dict().items() if k != "steps"}
        return f"val loss of all {len(run.val.dataset)} samples after training: EMA {run.val_loss(weights):.3f}, raw {run.val_loss():.3f}"

    def hub(key: str, what: str, scale: float = 1.0, fmt: str = ".3f") -> Probe:
        return lambda hook, run: f"{what} {run.adapter('mmengine').runner.message_hub.get_scalar(key).mean() * scale:{fmt}}"

    def logs(hook: Any, run: Run) -> str:
        return run.files(run.adapter("mmengine").runner.log_dir)

    return [
        (RuntimeInfoHook(), hub("train/lr", "message hub train/lr =", fmt=".4f")),
        (IterTimerHook(), hub("train/time", "message hub train/time =", 1e3, ".2f")),
        (LoggerHook(interval=8), lambda hook, run: logs(hook, run)),
        (CheckpointHook(interval=1, max_keep_ckpts=2), lambda hook, run: run.files(out, "*.pth")),
        (EMAHook(momentum=0.05), ema),
    ]
