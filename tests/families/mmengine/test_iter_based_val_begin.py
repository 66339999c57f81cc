"""Iteration-based validation starts *at* ``val_begin``: ``IterBasedTrainLoop`` validates once ``iter >= val_begin``,
so a ``val_begin`` that is a multiple of ``val_interval`` validates at ``val_begin`` itself. Compared with MMEngine's
real Runner."""

from __future__ import annotations

import pytest
from mmengine_testkit import Points, RecorderHook, assert_same_tensors, hook_of, run_lightning, run_mmengine, unprefixed
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine.iter_based import IterLoopConfig

#: 9 iterations, validation every 3 from iteration 3: after iterations 3, 6 and 9
CFG = dict(type="IterBasedTrainLoop", max_iters=9, val_interval=3, val_begin=3)


def _loader() -> DataLoader:
    """12 batches, more than ``max_iters``: no loader restart (MMEngine sleeps 2 s at each)."""
    return DataLoader(Points(48, 1), batch_size=4, shuffle=False)


def test_mmengine_iter_based_validates_at_a_val_begin_that_is_a_multiple_of_val_interval(tmp_path):
    hooks = dict(default_hooks=dict(checkpoint=None), custom_hooks=[dict(type="RecorderHook")])
    runner = run_mmengine(tmp_path / "mm", train_cfg=CFG, train=_loader(), **hooks)
    trainer, adapter, module = run_lightning(tmp_path / "lt", train_cfg=CFG, train=_loader(), **hooks)

    mm_hook, lt_hook = hook_of(runner.hooks, RecorderHook), hook_of(adapter.hooks, RecorderHook)
    assert [e[2] for e in mm_hook.events if e[0] == "after_val"] == [3, 6, 9]  # the Runner validates at val_begin
    assert [e[2] for e in lt_hook.events if e[0] == "after_val"] == [3, 6, 9]
    assert lt_hook.events == mm_hook.events
    assert len(lt_hook.metrics) == len(mm_hook.metrics) == 3
    for lt, mm in zip(lt_hook.metrics, mm_hook.metrics):  # Lightning logs the metric as float32
        assert lt == pytest.approx(mm, rel=1e-6)
    assert trainer.global_step == 9
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())


def test_iter_loop_config_validates_from_val_begin_inclusive():
    cfg = IterLoopConfig(max_iters=9, val_interval=3, val_begin=3)
    assert [it for it in range(1, 10) if cfg.validates_at(it)] == [3, 6, 9]
    assert [it for it in range(1, 8) if IterLoopConfig(7, 2, 4).validates_at(it)] == [4, 6, 7]
