"""Generated data for benchmarks/train_commands.py: tiny datasets in MMEngine's libraries' registries (mmdet 3.x,
mmseg 1.x) and image / annotation files for OpenMMLab 1.x's own dataset classes (mmdet 2.x's ``CustomDataset``
pickle, mmseg 0.x's ``CustomDataset`` folders)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

SIZE = 64


def boxes(rng: np.random.Generator) -> np.ndarray:
    """Two boxes inside a ``SIZE`` x ``SIZE`` image, x1 y1 x2 y2."""
    corners = rng.integers(0, SIZE // 2, (2, 2))
    return np.concatenate([corners, corners + rng.integers(8, SIZE // 2, (2, 2))], axis=1).astype(np.float32)


def seg_map(rng: np.random.Generator) -> np.ndarray:
    """A ``SIZE`` x ``SIZE`` map of three rectangles of classes 1-3 on class 0."""
    seg = np.zeros((SIZE, SIZE), dtype=np.uint8)
    for label in range(1, 4):
        y, x = rng.integers(0, SIZE // 2, 2)
        seg[y:y + SIZE // 3, x:x + SIZE // 3] = label
    return seg


def register(library: str) -> None:
    """Register ``BenchDetection`` / ``BenchSegmentation`` in mmdet 3.x's / mmseg 1.x's registry; OpenMMLab 1.x's
    runs read files (:func:`write_files`)."""
    import mmcv

    if mmcv.__version__.startswith("1."):
        return
    from mmengine.dataset import BaseDataset

    if library == "mmdet":
        from mmdet.registry import DATASETS
        from mmdet.structures.bbox import HorizontalBoxes

        class BenchDetection(BaseDataset):
            """``n`` random images with two boxes of two classes each, as mmdet's loaders yield them."""

            METAINFO = {"classes": ("box", "ball")}

            def __init__(self, n: int = 8, seed: int = 0, **kwargs: object) -> None:
                self.n, self.seed = n, seed
                super().__init__(ann_file="", serialize_data=False, **kwargs)

            def load_data_list(self) -> list[dict]:
                rng = np.random.default_rng(self.seed)
                return [{"img": rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8), "gt_bboxes": boxes(rng),
                         "gt_bboxes_labels": np.array([0, 1]), "gt_ignore_flags": np.zeros(2, dtype=bool),
                         "img_shape": (SIZE, SIZE), "ori_shape": (SIZE, SIZE), "width": SIZE, "height": SIZE,
                         "img_id": i, "img_path": f"{i}.jpg", "scale_factor": (1.0, 1.0)} for i in range(self.n)]  # fmt: skip

            def prepare_data(self, idx: int) -> dict:
                data = dict(self.get_data_info(idx))
                data["gt_bboxes"] = HorizontalBoxes(data["gt_bboxes"])
                return self.pipeline(data)

        DATASETS.register_module(module=BenchDetection, force=True)
    elif library == "mmseg":
        from mmseg.registry import DATASETS

        class BenchSegmentation(BaseDataset):
            """``n`` images, each with a map of rectangles of 4 classes."""

            METAINFO = {"classes": ("a", "b", "c", "d"), "palette": [[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255]]}

            def __init__(self, n: int = 8, seed: int = 0, **kwargs: object) -> None:
                self.n, self.seed = n, seed
                super().__init__(ann_file="", serialize_data=False, **kwargs)

            def load_data_list(self) -> list[dict]:
                rng = np.random.default_rng(self.seed)
                items = []
                for i in range(self.n):
                    seg = seg_map(rng)
                    img = (rng.integers(0, 60, (SIZE, SIZE, 3)) + seg[..., None] * 60).astype(np.uint8)
                    items.append({"img": img, "gt_seg_map": seg, "img_shape": seg.shape, "ori_shape": seg.shape,
                                  "seg_fields": ["gt_seg_map"], "reduce_zero_label": False, "img_path": f"{i}.png"})
                return items

        DATASETS.register_module(module=BenchSegmentation, force=True)


def write_files(root: Path, n: int, seed: int = 0) -> None:
    """``root/img/{i}.png``, ``root/ann/{i}.png`` (segmentation maps) and ``root/train.pkl`` (mmdet 2.x's middle format:
    two boxes of classes 0 and 1 per image) for ``n`` images."""
    import mmcv

    rng = np.random.default_rng(seed)
    infos = []
    for i in range(n):
        seg = seg_map(rng)
        img = (rng.integers(0, 60, (SIZE, SIZE, 3)) + seg[..., None] * 60).astype(np.uint8)
        mmcv.imwrite(img, str(root / "img" / f"{i}.png"))
        mmcv.imwrite(seg, str(root / "ann" / f"{i}.png"))
        infos.append(dict(filename=f"{i}.png", width=SIZE, height=SIZE,
                          ann=dict(bboxes=boxes(rng), labels=np.array([0, 1], dtype=np.int64))))  # fmt: skip
    with open(root / "train.pkl", "wb") as f:
        pickle.dump(infos, f)
