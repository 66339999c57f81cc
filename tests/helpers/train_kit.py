"""Tiny generated datasets for the whole-config differential tests (tests/families/mmengine/test_train.py) and the
train benchmark (benchmarks/mmengine_train.py): each is registered in its library's ``DATASETS`` registry, so a small
derived config of a shipped config swaps it in for the real data, as a user's own config does (``custom_imports``);
:func:`resnet_cifar` writes the lines of the derived mmpretrain config both use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from mmengine.dataset import BaseDataset
from openmmlab_stubs import import_openmmlab

import_openmmlab()

import mmpretrain  # noqa: E402  (after the stubs)
from mmpretrain.registry import DATASETS as PRETRAIN_DATASETS  # noqa: E402

#: mmpretrain's ResNet-18 for 32x32 images: its schedule (MultiStepLR) and default runtime
RESNET_CIFAR = Path(mmpretrain.__file__).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"
#: a derived config's lines that drop the shipped config's validation and test
NO_VALIDATION = """val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
"""


def resnet_cifar(width: int = 8, batch_size: int = 4, n_train: int = 12, n_val: int | None = 6) -> str:
    """The lines of a config derived from :data:`RESNET_CIFAR` (after its ``_base_`` line): the ResNet's channels
    scaled to ``width`` (64: the shipped network), :class:`TinyCifar` data through the shipped pipelines, ``n_train``
    train images and ``n_val`` validation (and test) images, or none (:data:`NO_VALIDATION`)."""
    lines = f"""model = dict(backbone=dict(stem_channels={width}, base_channels={width}), head=dict(in_channels={width * 8}))
train_dataloader = dict(batch_size={batch_size}, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n={n_train}, seed=1, _delete_=True, pipeline={{{{_base_.train_pipeline}}}}))
"""
    if n_val is None:
        return lines + NO_VALIDATION
    return lines + f"""val_dataloader = dict(batch_size={batch_size}, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n={n_val}, seed=2, _delete_=True, pipeline={{{{_base_.test_pipeline}}}}))
test_dataloader = val_dataloader
"""


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
from mmdet.structures.mask import BitmapMasks  # noqa: E402
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


#: a derived mmdet config's train loader: four :class:`TinyDetection` images, two a batch, flipped and packed
TINY_DETECTION_TRAIN = """train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyDetection", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackDetInputs")]))
"""
#: :data:`TINY_DETECTION_TRAIN` with each box's instance mask (``with_mask``), for instance segmentation
TINY_MASK_TRAIN = TINY_DETECTION_TRAIN + "train_dataloader['dataset']['with_mask'] = True\n"


@DET_DATASETS.register_module(force=True)
class TinyDetection(BaseDataset):
    """``n`` random ``size`` x ``size`` images, each with two boxes of the ``classes``, as mmdet's loaders yield them
    (with the raw ``instances``, boxes and mask polygons, that ``CocoMetric`` without an ``ann_file`` scores against,
    when ``PackDetInputs`` keeps them in ``meta_keys``); ``with_mask``: each box with its instance mask (the box filled), as
    ``LoadAnnotations(with_mask=True)`` gives it. A box's sides are ``min_side`` to ``size / 2`` pixels."""

    METAINFO = {"classes": ("box", "ball")}

    def __init__(self, n: int = 8, seed: int = 0, size: int = 64, with_mask: bool = False, min_side: int = 8,
                 **kwargs) -> None:
        self.n, self.seed, self.size, self.with_mask, self.min_side = n, seed, size, with_mask, min_side
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        items = []
        for i in range(self.n):
            img = rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)
            corners = rng.integers(0, self.size // 2, (2, 2))
            boxes = np.concatenate([corners, corners + rng.integers(self.min_side, self.size // 2, (2, 2))], axis=1)
            instances = [{"bbox": box, "bbox_label": label, "ignore_flag": 0,  # the mask: the box's polygon
                          "mask": [[box[0], box[1], box[2], box[1], box[2], box[3], box[0], box[3]]]}
                         for label, box in enumerate(boxes.tolist())]
            items.append({"img": img, "gt_bboxes": boxes.astype(np.float32), "gt_bboxes_labels": np.array([0, 1]),
                          "instances": instances,
                          "gt_ignore_flags": np.zeros(2, dtype=bool), "img_shape": img.shape[:2],
                          "ori_shape": img.shape[:2], "width": self.size, "height": self.size, "img_id": i, "img_path": f"{i}.jpg", "scale_factor": (1.0, 1.0)})
        return items

    def prepare_data(self, idx: int) -> dict:
        """The sample with its boxes as ``HorizontalBoxes`` and its masks as ``BitmapMasks`` (mmdet's loaders make
        them in ``LoadAnnotations``)."""
        data = dict(self.get_data_info(idx))
        if self.with_mask:
            masks = np.zeros((len(data["gt_bboxes"]), self.size, self.size), dtype=np.uint8)
            for mask, (x1, y1, x2, y2) in zip(masks, data["gt_bboxes"].astype(int)):
                mask[y1:y2, x1:x2] = 1
            data["gt_masks"] = BitmapMasks(masks, self.size, self.size)
        data["gt_bboxes"] = HorizontalBoxes(data["gt_bboxes"])
        return self.pipeline(data)
