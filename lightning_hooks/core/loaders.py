"""Views of Lightning's dataloaders that facades hand to legacy hooks."""

from __future__ import annotations

from typing import Any


class Loader:
    """A dataloader whose ``len()`` is the number of batches Lightning runs per epoch (legacy hooks call
    ``len(runner.data_loader)`` / ``len(trainer.data_loader)``); other attributes (``sampler``, ``dataset``) are the
    loader's."""

    def __init__(self, loader: Any, batches: int) -> None:
        self.loader = loader
        self.batches = batches

    def __len__(self) -> int:
        return self.batches

    def __iter__(self) -> Any:
        return iter(self.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
