"""Engine hooks of mmdet 3.3, mmpretrain 1.2 and mmsegmentation 1.2 under Lightning + MMEngineAdapter, each against
the real MMEngine ``Runner`` with the same model, data, seed and hooks (harness: downstream_kit.py)."""

from __future__ import annotations

import pytest
from downstream_kit import Images, run_both
from mmdet.engine.hooks import CheckInvalidLossHook, MeanTeacherHook, PipelineSwitchHook, SetEpochInfoHook, SyncNormHook
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmpretrain.engine.hooks import DenseCLHook, EMAHook, PreciseBNHook, VisualizationHook, WarmupParamHook
from torch.utils.data import DataLoader


def test_mmengine_downstream_precise_bn_hook_matches_runner(tmp_path):
    # isinstance(runner.train_loop, EpochBasedTrainLoop) decides whether PreciseBN runs at all
    pair = run_both(tmp_path, custom_hooks=[dict(type="mmpretrain.PreciseBNHook", num_samples=8, interval=1)])
    pair.assert_same(PreciseBNHook, log_lines=("Precise BN", "BN found"))


def test_mmengine_downstream_ema_hook_evaluate_on_origin_matches_runner(tmp_path):
    # after_val_epoch re-runs validation through runner.val_loop.run_iter and evaluates with val_loop.evaluator
    pair = run_both(tmp_path, custom_hooks=[dict(type="mmpretrain.EMAHook", momentum=0.2, evaluate_on_origin=True)])
    pair.assert_same(EMAHook)
    assert "val/tiny/accuracy_origin" in pair.adapter.runner.message_hub.log_scalars


def test_mmengine_downstream_pretrain_visualization_hook_matches_runner(tmp_path):
    # images named by epoch (EpochBasedTrainLoop), drawn by mmpretrain's UniversalVisualizer with the dataset classes
    options = dict(
        default_scope="mmpretrain",
        visualizer=dict(type="UniversalVisualizer", vis_backends=[dict(type="LocalVisBackend")]),
    )
    pair = run_both(tmp_path, custom_hooks=[dict(type="VisualizationHook", enable=True, interval=3)], **options)
    pair.assert_same(VisualizationHook)
    images = sorted(p.name for p in (tmp_path / "lt").rglob("*.png"))
    assert images and all(p.endswith(("_1.png", "_2.png")) for p in images)
    assert all(p.parent.parent.parent.name == pair.adapter.runner.timestamp for p in (tmp_path / "lt").rglob("*.png"))
