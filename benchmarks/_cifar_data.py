"""Generated CIFAR-like data for benchmarks/mmengine_train.py (and scripts/gpu_check_flexible.py's derived MAE
config, which imports this file from its folder), without the tests' helpers: :class:`BenchCifar` in
mmpretrain's ``DATASETS`` registry and :func:`resnet_cifar`, the lines of a config derived from mmpretrain's shipped
ResNet-18 CIFAR config that train on it. mmpretrain imports the real torchvision, which ``bash scripts/setup.sh
test`` installs off the venv's path (``PYTHONPATH=$PWD/scripts/vissl-site``, as the README's benchmark commands)."""

from __future__ import annotations

from pathlib import Path

import mmpretrain
import numpy as np
from mmengine.dataset import BaseDataset
from mmpretrain.registry import DATASETS

#: mmpretrain's ResNet-18 for 32x32 images: its schedule (MultiStepLR) and default runtime
RESNET_CIFAR = Path(mmpretrain.__file__).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"


def resnet_cifar(width: int, batch_size: int, n_train: int) -> str:
    """The lines of a config derived from :data:`RESNET_CIFAR` (after its ``_base_`` line): the ResNet's channels
    scaled to ``width`` (64: the shipped network), ``n_train`` :class:`BenchCifar` images through the shipped train
    pipeline, no validation or test."""
    return f"""model = dict(backbone=dict(stem_channels={width}, base_channels={width}), head=dict(in_channels={width * 8}))
train_dataloader = dict(batch_size={batch_size}, num_workers=0, persistent_workers=False,
    dataset=dict(type="BenchCifar", n={n_train}, seed=1, _delete_=True, pipeline={{{{_base_.train_pipeline}}}}))
val_dataloader = None
val_cfg = None
val_evaluator = None
test_dataloader = None
test_cfg = None
test_evaluator = None
"""


@DATASETS.register_module(force=True)
class BenchCifar(BaseDataset):
    """``n`` random 32x32 RGB images with labels of 10 classes, as mmpretrain's ``CIFAR10`` yields them (``img``:
    HxWx3 uint8, ``gt_label``)."""

    METAINFO = {"classes": tuple(f"class{i}" for i in range(10))}

    def __init__(self, n: int = 16, seed: int = 0, **kwargs: object) -> None:
        self.n, self.seed = n, seed
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        images = rng.integers(0, 256, (self.n, 32, 32, 3), dtype=np.uint8)
        labels = rng.integers(0, 10, self.n)
        return [{"img": img, "gt_label": int(label)} for img, label in zip(images, labels)]
