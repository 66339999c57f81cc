"""MMEngine hooks inside lightning.Trainer."""

from lightning_hooks.families.mmengine.adapter import MMEngineAdapter

__all__ = ["MMEngineAdapter"]
