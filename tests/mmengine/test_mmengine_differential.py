"""Differential runs: the same model, data, seed and hooks under MMEngine's Runner and under Lightning + adapter."""

from __future__ import annotations

import pytest
import torch
from conftest import (
    RecorderHook,
    assert_same_tensors,
    files,
    hook_of,
    run_lightning,
    run_mmengine,
    unprefixed,
)
from mmengine.hooks import EMAHook

EMA_CKPT = dict(
    default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1, max_keep_ckpts=2)),
    custom_hooks=[dict(type="RecorderHook"), dict(type="EMAHook", momentum=0.2)],
)


def test_mmengine_ema_checkpoint_validation_match_runner(tmp_path):
    runner = run_mmengine(tmp_path / "mm", **EMA_CKPT)
    trainer, adapter, module = run_lightning(tmp_path / "lt", **EMA_CKPT)

    mm_rec, lt_rec = hook_of(runner.hooks, RecorderHook), hook_of(adapter.hooks, RecorderHook)
    assert lt_rec.events == mm_rec.events
    # Lightning's self.log stores float32: equal to MMEngine's float64 metric up to float32 rounding
    assert [m["toy/mse"] for m in lt_rec.metrics] == [pytest.approx(m["toy/mse"], rel=1e-6) for m in mm_rec.metrics]
    assert_same_tensors(unprefixed(module.state_dict()), runner.model.state_dict())
    mm_ema, lt_ema = hook_of(runner.hooks, EMAHook), hook_of(adapter.hooks, EMAHook)
    assert_same_tensors(unprefixed(lt_ema.ema_model.state_dict()), mm_ema.ema_model.state_dict())
    assert files(tmp_path / "lt") == files(tmp_path / "mm") == {"epoch_2.pth", "epoch_3.pth"}
    assert (tmp_path / "lt" / "last_checkpoint").read_text().endswith("epoch_3.pth")

    mm_ckpt = torch.load(tmp_path / "mm" / "epoch_3.pth", weights_only=False)
    lt_ckpt = torch.load(tmp_path / "lt" / "epoch_3.pth", weights_only=False)
    assert mm_ckpt.keys() <= lt_ckpt.keys()  # MMEngine's layout, plus Lightning's own keys
    assert_same_tensors(unprefixed(lt_ckpt["state_dict"]), mm_ckpt["state_dict"])  # EMA weights swapped in
    assert_same_tensors(unprefixed(lt_ckpt["ema_state_dict"]), mm_ckpt["ema_state_dict"])
    assert {k: lt_ckpt["meta"][k] for k in ("epoch", "iter")} == {k: mm_ckpt["meta"][k] for k in ("epoch", "iter")}
    assert len(lt_rec.checkpoint_keys) == len(mm_rec.checkpoint_keys) == 3
    for mm_keys, lt_keys in zip(mm_rec.checkpoint_keys, lt_rec.checkpoint_keys):
        assert set(mm_keys) <= set(lt_keys)  # what before_save_checkpoint sees: MMEngine's layout (+ Lightning's)

