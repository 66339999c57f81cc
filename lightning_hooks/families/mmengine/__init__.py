"""MMEngine hooks inside lightning.Trainer."""

from typing import Any

from lightning_hooks.families.mmengine.adapter import MMEngineAdapter

__all__ = ["MMEngineAdapter", "build_hooks"]


def __getattr__(name: str) -> Any:
    if name == "build_hooks":  # imports mmengine, which lightning-hooks does not depend on
        from lightning_hooks.families.mmengine.config import build_hooks

        return build_hooks
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
