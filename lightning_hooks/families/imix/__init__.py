"""iMIX hooks inside lightning.Trainer."""

from lightning_hooks.families.imix.adapter import IMIXAdapter

__all__ = ["IMIXAdapter"]
