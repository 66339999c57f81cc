"""MMEngine hooks inside lightning.Trainer."""

from lightning_hooks.families.mmengine.adapter import MMEngineAdapter
from lightning_hooks.families.mmengine.config import build_hooks

__all__ = ["MMEngineAdapter", "build_hooks"]
