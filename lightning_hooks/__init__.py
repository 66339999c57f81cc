"""lightning-hooks: run Classy Vision / VISSL, iMIX and MMEngine hooks unchanged inside ``lightning.Trainer``."""

from lightning_hooks.adapt import adapt
from lightning_hooks.config import build_callbacks
from lightning_hooks.families.classy import ClassyAdapter
from lightning_hooks.families.imix import IMIXAdapter
from lightning_hooks.families.mmengine import MMEngineAdapter

__all__ = ["ClassyAdapter", "IMIXAdapter", "MMEngineAdapter", "adapt", "build_callbacks"]
__version__ = "0.1.0"
