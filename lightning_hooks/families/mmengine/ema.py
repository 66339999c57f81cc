"""MMEngine's ``EMAHook`` under the adapter: its weights swapped back after a run that failed mid-evaluation, and the
note a resume without it gets. ``EMAHook`` swaps its averaged weights into the model in ``before_{val,test}_epoch``
and back in ``after_{val,test}_epoch``, and saves them as the model's in ``before_save_checkpoint``."""

from __future__ import annotations

from typing import Any


def swap_back(hooks: list[Any], failed_at: tuple[str, Any] | None) -> None:
    """Swap back every ``EMAHook`` of ``hooks`` whose ``before_{val,test}_epoch`` swapped the EMA in and whose
    ``after_{val,test}_epoch`` did not run (the run failed or was interrupted in between); ``failed_at`` is the mount
    point and hook that raised, if one did."""
    from mmengine.hooks import EMAHook

    mount, failed = failed_at or ("", None)
    position = hooks.index(failed) if failed is not None else None
    for i, hook in enumerate(hooks):
        if not isinstance(hook, EMAHook):
            continue
        if position is not None and mount.startswith("before_") and mount.endswith("_epoch") and i >= position:
            continue  # the failure came before this hook swapped
        if position is not None and mount.startswith("after_") and mount.endswith("_epoch") and i < position:
            continue  # this hook already swapped back
        hook._swap_ema_parameters()


def removed_note(removed: list[str]) -> str:
    """For a resume whose hook list lost an ``EMAHook`` (``removed``: the state keys no hook takes): its checkpoint
    holds the EMA weights as the model's (``before_save_checkpoint`` swaps them in, the trained ones go to
    ``ema_state_dict``), so the run continues from the EMA weights, as MMEngine's Runner does; the note says so and
    how to keep the trained weights."""
    if not any(key.split("#")[0] == "EMAHook" for key in removed):
        return ""
    return (
        "The model continues from the checkpoint's model weights, which are EMAHook's averaged (EMA) weights "
        "(EMAHook swaps them in when it saves), as MMEngine's Runner does; the trained weights, saved in the "
        "checkpoint's 'ema_state_dict', are not used. To continue from the trained weights and the average, keep "
        "EMAHook in the hook list."
    )
