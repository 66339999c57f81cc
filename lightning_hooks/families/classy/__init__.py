"""Classy Vision and VISSL hooks inside lightning.Trainer."""

from lightning_hooks.families.classy.adapter import ClassyAdapter

__all__ = ["ClassyAdapter"]
