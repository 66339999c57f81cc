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

    def __setattr__(self, name: str, value: Any) -> None:
        """A write goes to the loader (but the view's own ``loader`` and ``batches``): mmdet 2.x's
        ``YOLOXModeSwitchHook`` restarts persistent workers with ``runner.data_loader._iterator = None``."""
        if name in ("loader", "batches"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.loader, name, value)


def epoch_samplers(loader: Any) -> list[Any]:
    """The samplers of ``loader`` whose epoch Lightning sets at each epoch's start: its own sampler, then its batch
    sampler's, each where it has ``set_epoch`` (a plain ``DataLoader``'s two are one sampler, listed twice)."""
    samplers = (getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None))
    return [sampler for sampler in samplers if callable(getattr(sampler, "set_epoch", None))]


def epoch_sampler(loader: Any) -> Any:
    """The first of :func:`epoch_samplers` (``None`` if there is none): the one sampler a legacy loop sets an epoch on
    (mmcv's ``DistSamplerSeedHook``, MMEngine's ``InfiniteSampler`` loop)."""
    return next(iter(epoch_samplers(loader)), None)


def set_sampler_epoch(loader: Any, epoch: int) -> None:
    """``loader``'s own sampler (not a batch sampler's) gets ``epoch`` when it has ``set_epoch``, as a legacy loop sets
    it before it makes an epoch's iterator (mmcv 1.x's ``IterLoader``, VISSL's ``recreate_data_iterator``)."""
    set_epoch = getattr(getattr(loader, "sampler", None), "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)
