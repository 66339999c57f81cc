"""A hook failing next to ``EMAHook`` during validation leaves the live weights in the model.

``EMAHook.before_val_epoch`` swaps the EMA weights into the model and ``after_val_epoch`` swaps them back. When
another hook raises in between, the adapter swaps back only the ``EMAHook``\\ s that had swapped in and not yet out:
its position relative to the failing hook in the priority queue decides. These tests fail a hook listed *before*
``EMAHook`` and one listed *after* it, at the start and at the end of the validation epoch, and compare both the
model and the EMA copy with the weights they held when validation began.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from mmengine.hooks import EMAHook, Hook
from mmengine_testkit import LitToy, loaders, make_model

from lightning_hooks import MMEngineAdapter


class _BoomAtValStart(Hook):
    """Raises in ``before_val_epoch`` (the adapter finds mount points on the class, as MMEngine's runner does)."""

    def __init__(self, priority: str) -> None:
        self.priority = priority

    def before_val_epoch(self, runner: Any) -> None:
        raise RuntimeError("boom in before_val_epoch")


class _BoomAtValEnd(_BoomAtValStart):
    """Raises in ``after_val_epoch`` only."""

    before_val_epoch = Hook.before_val_epoch

    def after_val_epoch(self, runner: Any, metrics: Any = None) -> None:
        raise RuntimeError("boom in after_val_epoch")


_BOOM = {"before_val_epoch": _BoomAtValStart, "after_val_epoch": _BoomAtValEnd}


class _Weights(pl.Callback):
    """After every training batch (after the adapter's ``after_train_iter``): the model's and ``ema``'s weights."""

    def __init__(self, ema: EMAHook) -> None:
        self.ema = ema

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        self.live = {k: v.clone() for k, v in pl_module.model.state_dict().items()}
        self.averaged = {k: v.clone() for k, v in self.ema.ema_model.module.state_dict().items()}


def _assert_equal(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], what: str) -> None:
    assert actual.keys() == expected.keys()
    for key in expected:
        assert torch.equal(actual[key], expected[key]), f"{what}: {key} holds other weights after the failure"


@pytest.mark.parametrize("mount", ["before_val_epoch", "after_val_epoch"])
@pytest.mark.parametrize("place", ["before", "after"])
def test_a_hook_failing_next_to_ema_hook_in_validation_leaves_the_live_weights(tmp_path, place, mount):
    ema = EMAHook(momentum=0.5)
    # NORMAL is EMAHook's priority: ABOVE_NORMAL runs before it, BELOW_NORMAL after it (list order agrees)
    boom = _BOOM[mount]("ABOVE_NORMAL" if place == "before" else "BELOW_NORMAL")
    adapter = MMEngineAdapter([boom, ema] if place == "before" else [ema, boom], work_dir=tmp_path)
    assert adapter.hooks.index(boom) == (0 if place == "before" else 1)
    weights = _Weights(ema)
    module = LitToy(make_model())
    trainer = pl.Trainer(callbacks=[adapter, weights], max_epochs=2, default_root_dir=tmp_path, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         num_sanity_val_steps=0)  # fmt: skip
    with pytest.raises(RuntimeError, match=f"boom in {mount}") as err:
        trainer.fit(module, *loaders())
    note = f"raised by mmengine hook {type(boom).__qualname__} in mount point '{mount}'"
    assert note in "\n".join(err.value.__notes__)
    assert trainer.current_epoch == 0
    assert any(not torch.equal(weights.live[k], weights.averaged[k]) for k in weights.live)  # the swap is visible
    _assert_equal(module.model.state_dict(), weights.live, "the model (must hold the live weights)")
    _assert_equal(ema.ema_model.module.state_dict(), weights.averaged, "EMAHook's copy (must hold the EMA weights)")
