"""Engine hooks of the other OpenMMLab 2.0 libraries (mmyolo 0.6, mmpose 1.3) under Lightning + MMEngineAdapter, each
against the real MMEngine ``Runner`` with the same model, data, seed and hooks (harness: downstream_kit.py).

The hooks that switch the training data (mmyolo ``YOLOXModeSwitchHook``, mmpose ``YOLOXPoseModeSwitchHook``) build
the new loader from ``runner.cfg.train_dataloader`` with a new pipeline, as in those libraries' configs; mmpose's
visualization hooks read ``runner.val_evaluator.dataset_meta`` (the val dataset's metainfo, handed to the evaluator
by ``ValLoop``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from downstream_kit import Images, TinyClassifier, run_both
from mmengine.dataset import Compose, default_collate
from mmengine.registry import DATASETS, VISUALIZERS
from mmengine.structures import InstanceData
from mmengine.visualization import Visualizer
from openmmlab_stubs import import_modules, import_openmmlab
from torch.utils.data import DataLoader

import_openmmlab(["mmyolo"])
import_modules(["mmpose.engine.hooks"])

from mmpose.structures import PoseDataSample  # noqa: E402  (after the stubs)

#: IterBasedTrainLoop as OpenMMLab configs use it: 4 batches per pass, so the train loader restarts twice
ITER_CFG = dict(type="IterBasedTrainLoop", max_iters=10, val_interval=4)


@pytest.fixture(autouse=True)
def _no_restart_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts the train loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


@DATASETS.register_module(force=True)
class PipelineImages(Images):
    """:class:`Images` built from a config, with the ``pipeline`` of transform configs a mode switch hook replaces."""

    def __init__(self, n: int, seed: int, pipeline: list[dict] | None = None) -> None:
        super().__init__(n, seed)
        self.pipeline = Compose(pipeline) if pipeline else None


#: ``train_dataloader`` as an OpenMMLab config writes it (``runner.cfg``): the mode switch hooks rebuild it through
#: ``Runner.build_dataloader``; both hosts start on the equal loader of ``_train_loader()``
TRAIN_DATALOADER = dict(
    batch_size=4,
    dataset=dict(type="PipelineImages", n=16, seed=1),
    sampler=dict(type="DefaultSampler", shuffle=False),
    collate_fn=dict(type="default_collate"),
)
NEW_PIPELINE = [dict(type="mmdet.HalveInputs")]


def _train_loader() -> DataLoader:
    """The loader ``TRAIN_DATALOADER`` describes, for the Lightning side (the Runner builds its own)."""
    return DataLoader(PipelineImages(16, 1), batch_size=4, shuffle=False, collate_fn=default_collate)


#: name -> (hook config, run_both options, log lines to compare)
EPOCH_AND_ITER = {
    "YOLOv5ParamSchedulerHook": (  # warmup over the first half epoch, then linear decay by epoch
        dict(type="mmyolo.YOLOv5ParamSchedulerHook", scheduler_type="linear", lr_factor=0.01, max_epochs=2,
             warmup_epochs=0.5, warmup_mim_iter=2),
        {}, (),
    ),  # fmt: skip
    "PPYOLOEParamSchedulerHook": (
        dict(type="mmyolo.PPYOLOEParamSchedulerHook", warmup_min_iter=2, start_factor=0.1, warmup_epochs=1,
             min_lr_ratio=0.1, total_epochs=2),
        {}, (),
    ),  # fmt: skip
    "SwitchToDeployHook": (dict(type="mmyolo.SwitchToDeployHook"), {}, ()),
    "RTMOModeSwitchHook": (dict(type="mmpose.RTMOModeSwitchHook", epoch_attributes={1: {"scale": 0.5}}), {}, ("Change",)),
    "SyncNormHook": (dict(type="mmpose.SyncNormHook"), {}, ()),
}


@pytest.mark.parametrize("loop", ["epoch", "iter"])
@pytest.mark.parametrize("name", EPOCH_AND_ITER)
def test_mmengine_openmmlab_hook_matches_runner(tmp_path, name, loop):
    config, options, log_lines = EPOCH_AND_ITER[name]
    pair = run_both(tmp_path, custom_hooks=[config], train_cfg=ITER_CFG if loop == "iter" else None, **options)
    (cls,) = {type(h) for h in pair.adapter.hooks if type(h).__name__ == name}
    pair.assert_same(cls, log_lines=log_lines)


@pytest.mark.parametrize(
    "hook, switched",
    [
        (dict(type="mmyolo.YOLOXModeSwitchHook", num_last_epochs=1, new_train_pipeline=NEW_PIPELINE), "use_bbox_aux"),
        (dict(type="mmpose.YOLOXPoseModeSwitchHook", num_last_epochs=1, new_train_pipeline=NEW_PIPELINE), "use_aux_loss"),
    ],
)
def test_mmengine_openmmlab_mode_switch_hooks_retrain_on_the_rebuilt_loader(tmp_path, hook, switched):
    # the last epoch trains on Runner.build_dataloader(runner.cfg.train_dataloader) with the new pipeline, assigned
    # to runner.train_loop.dataloader in before_train_epoch; the head switches its auxiliary loss on
    cfg = dict(train_dataloader=TRAIN_DATALOADER)
    pair = run_both(tmp_path, custom_hooks=[hook], train=_train_loader(), cfg=cfg,
                    train_cfg=dict(by_epoch=True, max_epochs=3, val_interval=1))  # fmt: skip
    pair.assert_same(log_lines=("the dataloader!",))
    assert getattr(pair.module.model.head, switched) is getattr(pair.runner.model.head, switched) is True
    assert pair.trainer.train_dataloader.dataset.pipeline is not None  # the rebuilt loader, with HalveInputs


# ------------------------------------------------------------------------------------------------ mmpose visualization
KEYPOINT_META = dict(
    keypoint_colors=np.array([[255, 0, 0], [0, 255, 0]], dtype=np.uint8),
    skeleton_links=[(0, 1)],
    skeleton_link_colors=np.array([[0, 0, 255]], dtype=np.uint8),
)


class PoseImages(Images):
    """:class:`Images` with a pose dataset's metainfo (keypoint colors, skeleton) and a ``PoseDataSample`` per image,
    as mmpose's pipelines pack them."""

    def __init__(self, n: int, seed: int) -> None:
        super().__init__(n, seed)
        self.metainfo = {**self.metainfo, **KEYPOINT_META}

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**super().__getitem__(i), "data_samples": PoseDataSample(metainfo=dict(img_path=self.img_paths[i]))}


class PoseClassifier(TinyClassifier):
    """:class:`TinyClassifier` predicting two keypoints per image, placed by the class scores."""

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, img_path: Any = None, data_samples: Any = None,
                mode: str = "tensor") -> Any:  # fmt: skip
        if mode != "predict":
            return super().forward(inputs, labels, img_path, mode)
        scores = super().forward(inputs, labels, img_path, "tensor").softmax(-1)
        return [_pose_sample(s, t, p) for s, t, p in zip(scores, labels, img_path)]


def _pose_sample(score: torch.Tensor, label: torch.Tensor, img_path: str) -> PoseDataSample:
    sample = PoseDataSample(metainfo=dict(img_path=img_path, ori_shape=(16, 16)))
    keypoints = (score.detach() * 14 + 1).reshape(1, 2, 1).expand(1, 2, 2).numpy()
    sample.pred_instances = InstanceData(keypoints=keypoints, keypoint_scores=np.ones((1, 2)),
                                         bboxes=np.array([[1.0, 1.0, 15.0, 15.0]]))  # fmt: skip
    sample.gt_label = label
    sample.pred_score = score
    return sample


@VISUALIZERS.register_module(force=True)
class KeypointVisualizer(Visualizer):
    """Draws predicted keypoints in the colors of ``dataset_meta`` and joins them with its skeleton: the part of
    mmpose's ``PoseLocalVisualizer`` (whose module needs the compiled xtcocotools) that the metainfo decides."""

    def set_dataset_meta(self, dataset_meta: dict) -> None:
        self.dataset_meta = dataset_meta

    def add_datasample(self, name: str, image: np.ndarray, data_sample: PoseDataSample, step: int = 0,
                       **options: Any) -> None:  # fmt: skip
        meta = self.dataset_meta
        self.set_image(image)
        keypoints = torch.as_tensor(data_sample.pred_instances.keypoints[0])
        for (a, b), color in zip(meta["skeleton_links"], meta["skeleton_link_colors"]):
            self.draw_lines(keypoints[[a, b], 0], keypoints[[a, b], 1], colors=[tuple(int(c) for c in color)])
        colors = [tuple(int(c) for c in color) for color in meta["keypoint_colors"]]
        self.draw_points(keypoints, colors=colors, sizes=np.full(len(keypoints), 4))
        self.add_image(name, self.get_image(), step)


def test_mmengine_openmmlab_pose_visualization_hook_draws_with_the_val_evaluators_metainfo(tmp_path):
    # PoseVisualizationHook sets its visualizer's dataset_meta from runner.val_evaluator.dataset_meta at every val
    # iteration: the evaluator gets the val dataset's metainfo as MMEngine's ValLoop hands it
    train, val = (DataLoader(PoseImages(n, seed), batch_size=4, collate_fn=default_collate) for n, seed in ((16, 1), (8, 2)))
    options = dict(visualizer=dict(type="KeypointVisualizer", vis_backends=[dict(type="LocalVisBackend")]))
    hook = dict(type="mmpose.PoseVisualizationHook", enable=True, interval=1)
    pair = run_both(tmp_path, custom_hooks=[hook], train=train, val=val, model=PoseClassifier, **options)
    pair.assert_same()
    assert pair.adapter.runner.val_evaluator.dataset_meta["skeleton_links"] == [(0, 1)]
    images = list((tmp_path / "lt" / pair.adapter.runner.timestamp / "vis_data" / "vis_image").glob("val_img_*.png"))
    assert len(images) == 2 * 2  # 2 epochs x 2 val batches, the first sample of each
