"""Tiny generated datasets for the whole-config differential tests (tests/mmengine/test_mmengine_train.py): each is
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
