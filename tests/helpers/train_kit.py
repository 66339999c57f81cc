"""Tiny generated datasets for the whole-config differential tests (tests/families/mmengine/test_train.py): each is
registered in its library's ``DATASETS`` registry, so a small derived config of a shipped config swaps it in for the
real data, as a user's own config does (``custom_imports``)."""

from __future__ import annotations

import numpy as np
from mmengine.dataset import BaseDataset
from openmmlab_stubs import import_openmmlab

import_openmmlab()

from mmpretrain.registry import DATASETS as PRETRAIN_DATASETS  # noqa: E402  (after the stubs)


@PRETRAIN_DATASETS.register_module(force=True)
class TinyCifar(BaseDataset):
    """``n`` random 32x32 RGB images with labels of ``num_classes`` classes, as mmpretrain's ``CIFAR10`` yields them
    (``img``: HxWx3 uint8, ``gt_label``)."""

    METAINFO = {"classes": tuple(f"class{i}" for i in range(10))}

    def __init__(self, n: int = 16, seed: int = 0, num_classes: int = 10, **kwargs) -> None:
        self.n, self.seed, self.num_classes = n, seed, num_classes
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        images = rng.integers(0, 256, (self.n, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, self.num_classes, self.n)
        return [{"img": img, "gt_label": int(label)} for img, label in zip(images, labels)]


from mmdet.registry import DATASETS as DET_DATASETS  # noqa: E402
from mmdet.structures.bbox import HorizontalBoxes  # noqa: E402
from mmseg.registry import DATASETS as SEG_DATASETS  # noqa: E402


@SEG_DATASETS.register_module(force=True)
class TinySegmentation(BaseDataset):
    """``n`` random ``size`` x ``size`` images, each with a segmentation map of ``num_classes`` rectangles."""

    METAINFO = {"classes": ("a", "b", "c", "d"), "palette": [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]]}

    def __init__(self, n: int = 8, seed: int = 0, size: int = 32, **kwargs) -> None:
        self.n, self.seed, self.size = n, seed, size
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        items = []
        for i in range(self.n):
            seg = np.zeros((self.size, self.size), dtype=np.uint8)
            for label in range(1, 4):
                y, x = rng.integers(0, self.size // 2, 2)
                seg[y:y + self.size // 3, x:x + self.size // 3] = label
            img = (rng.integers(0, 60, (self.size, self.size, 3)) + seg[..., None] * 60).astype(np.uint8)
            items.append({"img": img, "gt_seg_map": seg, "img_shape": seg.shape, "ori_shape": seg.shape,
                          "seg_fields": ["gt_seg_map"], "reduce_zero_label": False, "img_path": f"{i}.png"})
        return items


@DET_DATASETS.register_module(force=True)
class TinyDetection(BaseDataset):
    """``n`` random ``size`` x ``size`` images, each with two boxes of the ``classes``, as mmdet's loaders yield them."""

    METAINFO = {"classes": ("box", "ball")}

    def __init__(self, n: int = 8, seed: int = 0, size: int = 64, **kwargs) -> None:
        self.n, self.seed, self.size = n, seed, size
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        items = []
        for i in range(self.n):
            img = rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)
            corners = rng.integers(0, self.size // 2, (2, 2))
            boxes = np.concatenate([corners, corners + rng.integers(8, self.size // 2, (2, 2))], axis=1)
            items.append({"img": img, "gt_bboxes": boxes.astype(np.float32), "gt_bboxes_labels": np.array([0, 1]),
                          "gt_ignore_flags": np.zeros(2, dtype=bool), "img_shape": img.shape[:2],
                          "ori_shape": img.shape[:2], "width": self.size, "height": self.size, "img_id": i, "img_path": f"{i}.jpg", "scale_factor": (1.0, 1.0)})
        return items

    def prepare_data(self, idx: int) -> dict:
        """The sample with its boxes as ``HorizontalBoxes`` (mmdet's loaders box them in ``LoadAnnotations``)."""
        data = dict(self.get_data_info(idx))
        data["gt_bboxes"] = HorizontalBoxes(data["gt_bboxes"])
        return self.pipeline(data)
