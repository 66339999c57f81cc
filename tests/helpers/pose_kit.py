"""mmpose in the test venv, for whole-config runs of its shipped top-down configs
(tests/families/mmengine/test_resume_corpus.py), and :class:`TinyPose`, a generated COCO keypoint dataset.

mmpose's modules import xtcocotools (built from its sdist by scripts/setup.sh: its wheels are built against numpy 1)
and, through ``mmpose.apis``, ``pkg_resources`` (setuptools<81); its ``register_all_modules`` imports the rest as
under a full install, with torchvision stubbed while it imports (tests/helpers/openmmlab_stubs.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from openmmlab_stubs import import_openmmlab

import_openmmlab(("mmpose",))

from mmpose.datasets import CocoDataset  # noqa: E402  (after the stubs)
from mmpose.registry import DATASETS  # noqa: E402


@DATASETS.register_module(force=True)
class TinyPose(CocoDataset):
    """``n`` random ``size`` x ``size`` images, each with one person: a box and COCO's 17 keypoints inside it (some
    invisible), as COCO's keypoint annotations give them (``raw_ann_info`` kept, which ``CocoMetric`` evaluates
    against without an annotation file); the image travels in ``img``, which mmpose's ``LoadImage`` takes as
    loaded. ``area``: each person's annotated area, the scale of COCO's keypoint similarity (OKS): its box's by
    default; a larger one lets the keypoints of a barely trained model score a partial OKS (a nonzero AP)."""

    def __init__(self, n: int = 4, seed: int = 0, size: int = 64, area: float | None = None, **kwargs: Any) -> None:
        self.n, self.seed, self.size, self.area = n, seed, size, area
        super().__init__(ann_file=None, serialize_data=False, **kwargs)  # CocoMetric reads no file: the ground truth

    def _load_annotations(self) -> tuple[list[dict], list[dict]]:
        rng = np.random.default_rng(self.seed)
        self._metainfo["CLASSES"] = [{"id": 1, "name": "person", "supercategory": "person"}]  # COCO's categories
        instances, images = [], []
        for i in range(self.n):
            x, y = rng.integers(0, self.size // 4, 2)
            w, h = rng.integers(self.size // 3, self.size // 2, 2)
            points = np.stack([x + rng.uniform(0, w, 17), y + rng.uniform(0, h, 17), rng.choice([1, 2], 17)], axis=1)
            points[rng.choice(17, 3, replace=False)] = 0  # three keypoints not annotated
            image = {"id": i, "img_id": i, "file_name": f"{i}.jpg", "img_path": f"{i}.jpg", "width": self.size,
                     "height": self.size}  # fmt: skip
            ann = {"id": i + 1, "image_id": i, "category_id": 1, "bbox": [float(x), float(y), float(w), float(h)],
                   "keypoints": points.reshape(-1).tolist(), "num_keypoints": int((points[:, 2] > 0).sum()),
                   "area": float(self.area or w * h), "iscrowd": 0}  # fmt: skip
            instance = self.parse_data_info({"raw_ann_info": ann, "raw_img_info": image})
            instance["img"] = rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)
            instances.append(instance)
            images.append(image)
        return instances, images
