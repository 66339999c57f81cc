"""Lightning loggers provided by lightning-hooks."""

from lightning_hooks.loggers.visdom import VisdomLogger

__all__ = ["VisdomLogger"]
