"""EMAs that swap their average into the model for evaluation: at most one per model."""

from __future__ import annotations

from lightning_hooks.core.lightning_api import pl


def check_one_weight_swap(trainer: pl.Trainer) -> None:
    """Refuse a Trainer whose callbacks hold more than one EMA that swaps its weights into the model.

    Each callback lists what it swaps in ``weight_swappers()`` (the native ``EMA``, an adapter's EMA hooks). Two of
    them write into the tensors the other swapped in, so both averages and the live weights end up corrupted.
    """
    callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
    names = [name for callback in callbacks for name in getattr(callback, "weight_swappers", list)()]
    if len(names) > 1:
        raise ValueError(
            f"{' and '.join(names)} both swap EMA weights into the same model for evaluation; each would overwrite "
            "the weights the other swapped in, corrupting both averages and the trained weights. Keep one of them "
            "(lightning_hooks.callbacks.EMA replaces either legacy EMA hook)."
        )
