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


#: (hook config, Runner/adapter options, log lines to compare): hooks whose effect needs no special data
SIMPLE = {
    "CheckInvalidLossHook": (dict(type="mmdet.CheckInvalidLossHook", interval=1), {}, ()),
    "SetEpochInfoHook": (dict(type="mmdet.SetEpochInfoHook"), {}, ()),
    "SyncNormHook": (dict(type="mmdet.SyncNormHook"), {}, ()),
    "MeanTeacherHook": (dict(type="mmdet.MeanTeacherHook", momentum=0.5), {}, ()),
    "NumClassCheckHook": (dict(type="mmdet.NumClassCheckHook"), {}, ()),
    "YOLOXModeSwitchHook": (dict(type="mmdet.YOLOXModeSwitchHook", num_last_epochs=1), {}, ("mosaic", "L1 loss")),
    "PipelineSwitchHook": (
        dict(type="PipelineSwitchHook", switch_epoch=1, switch_pipeline=[dict(type="HalveInputs")]),
        dict(default_scope="mmdet"),  # HalveInputs is in mmdet's TRANSFORMS only
        ("Switch pipeline",),
    ),
    "DenseCLHook": (dict(type="mmpretrain.DenseCLHook", start_iters=5), {}, ()),
    "WarmupParamHook": (
        dict(type="mmpretrain.WarmupParamHook", param_name="scale", module_name="head", warmup_epochs=1), {}, ()
    ),
    "ClassNumCheckHook": (dict(type="mmpretrain.ClassNumCheckHook"), {}, ()),
    "SwitchRecipeHook": (
        dict(type="SwitchRecipeHook", schedule=[dict(action_epoch=2, train_pipeline=[dict(type="ShiftInputs")])]),
        dict(default_scope="mmpretrain"),
        ("Switch train pipeline",),
    ),
}


@pytest.mark.parametrize("name", SIMPLE)
def test_mmengine_downstream_hook_matches_runner(tmp_path, name):
    config, options, log_lines = SIMPLE[name]
    pair = run_both(tmp_path, custom_hooks=[config], **options)
    (cls,) = {type(h) for h in pair.adapter.hooks if type(h).__name__ == name}
    pair.assert_same(cls, log_lines=log_lines)


@HOOKS.register_module(force=True)
class SwapTrainLoaderHook(Hook):
    """Assigns ``runner.train_loop.dataloader`` as mmpose's ``YOLOXPoseModeSwitchHook`` and mmagic's
    ``PGGANFetchDataHook`` do, in ``before_train_epoch`` or ``after_train_epoch`` of ``epoch``."""

    def __init__(self, epoch: int, mount: str) -> None:
        self.epoch, self.mount = epoch, mount

    def _swap(self, runner, mount: str) -> None:
        if mount == self.mount and runner.epoch == self.epoch:
            runner.train_loop.dataloader = DataLoader(Images(16, 3), batch_size=4)

    def before_train_epoch(self, runner) -> None:
        self._swap(runner, "before_train_epoch")

    def after_train_epoch(self, runner) -> None:
        self._swap(runner, "after_train_epoch")


@pytest.mark.parametrize("epoch, mount", [(0, "before_train_epoch"), (1, "before_train_epoch"), (0, "after_train_epoch")])
def test_mmengine_downstream_train_dataloader_assignment_takes_effect_where_the_runner_applies_it(tmp_path, epoch, mount):
    # before_train_epoch: that epoch trains on the new loader; after_train_epoch: the next epoch does
    pair = run_both(tmp_path, custom_hooks=[dict(type="SwapTrainLoaderHook", epoch=epoch, mount=mount)],
                    train_cfg=dict(by_epoch=True, max_epochs=3, val_interval=1))
    pair.assert_same()
    assert pair.adapter.runner.train_dataloader.dataset.images.shape == (16, 3, 4, 4)
    assert pair.trainer.train_dataloader.dataset is pair.adapter.runner.train_loop.dataloader.dataset
