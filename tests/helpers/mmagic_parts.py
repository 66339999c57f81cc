"""mmagic's super-resolution parts (SRCNN, EDSR) in the test venv, for whole-config runs of its shipped SR configs
(tests/families/mmengine/test_resume_corpus.py), and :class:`TinySR`, a generated paired dataset.

mmagic's ``mmagic.models``, ``mmagic.evaluation`` and ``mmagic.datasets`` packages import, from their
``__init__``, modules that need packages this venv lacks (diffusers, safetensors, transformers, albumentations,
lpips, ...). :func:`import_sr_parts` imports only the modules an SRCNN config names (``BaseEditModel``, ``SRCNNNet``,
``L1Loss``, mmagic's ``DataPreprocessor``, ``PackInputs``, ``Evaluator``, ``MAE`` / ``PSNR`` / ``SSIM``), each of
which registers itself as under a full install, with those packages standing as plain namespaces (their own
``__init__`` not run); mmagic's engine and visualization import as in tests/families/mmengine/test_mmagic.py.
"""

from __future__ import annotations

import importlib
import os
import sys
import types

import numpy as np
from mmengine.dataset import BaseDataset
from openmmlab_stubs import MMAGIC, import_modules, stubs

#: the packages whose ``__init__`` needs what the venv lacks, served as namespaces of their folders
_PACKAGES = ("mmagic.models", "mmagic.models.editors", "mmagic.models.losses", "mmagic.models.base_models",
             "mmagic.models.data_preprocessors", "mmagic.models.archs", "mmagic.evaluation", "mmagic.evaluation.metrics",
             "mmagic.datasets", "mmagic.datasets.transforms")  # fmt: skip
#: the names a namespace package's ``__init__`` would export, from the modules that define them (EDSR's imports)
_EXPORTS = {"mmagic.models.archs": {"sr_backbone": ("ResidualBlockNoBN",), "upsample": ("PixelShufflePack",)}}
#: the modules the SRCNN and EDSR super-resolution configs name
_MODULES = ("mmagic.models.base_models.base_edit_model", "mmagic.models.editors.srcnn.srcnn_net",
            "mmagic.models.editors.edsr.edsr_net", "mmagic.models.losses.pixelwise_loss",
            "mmagic.models.data_preprocessors.data_preprocessor", "mmagic.datasets.transforms.formatting",
            "mmagic.datasets.transforms.aug_shape", "mmagic.datasets.transforms.crop",
            "mmagic.datasets.transforms.values", "mmagic.evaluation.evaluator", "mmagic.evaluation.metrics.mae",
            "mmagic.evaluation.metrics.psnr", "mmagic.evaluation.metrics.ssim")  # fmt: skip


def import_sr_parts() -> None:
    """Import (and so register) mmagic's engine, visualization and the SRCNN config's modules, and :class:`TinySR`."""
    import_modules(MMAGIC)
    import mmagic

    root = os.path.dirname(mmagic.__file__)
    for name in _PACKAGES:
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [os.path.join(root, *name.split(".")[1:])]
            sys.modules[name] = package
    with stubs():
        for package, modules in _EXPORTS.items():
            for module, names in modules.items():
                defined = importlib.import_module(f"{package}.{module}")
                for name in names:
                    setattr(sys.modules[package], name, getattr(defined, name))
        for module in _MODULES:
            importlib.import_module(module)
    from mmagic.registry import DATASETS

    DATASETS.register_module(module=TinySR, force=True)


class TinySR(BaseDataset):
    """``n`` random ``size`` x ``size`` RGB ground-truth images and their ``scale`` times smaller inputs (every
    ``scale``-th pixel), as mmagic's ``BasicImageDataset`` with ``LoadImageFromFile`` yields them (``img``, ``gt``,
    their paths)."""

    METAINFO = {"dataset_type": "tiny", "task_name": "sisr"}

    def __init__(self, n: int = 4, seed: int = 0, size: int = 32, scale: int = 4, **kwargs) -> None:
        self.n, self.seed, self.size, self.scale = n, seed, size, scale
        super().__init__(ann_file="", serialize_data=False, **kwargs)

    def load_data_list(self) -> list[dict]:
        rng = np.random.default_rng(self.seed)
        items = []
        for i in range(self.n):
            gt = rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)
            items.append({"gt": gt, "img": np.ascontiguousarray(gt[:: self.scale, :: self.scale]),
                          "gt_path": f"gt/{i}.png", "img_path": f"lq/{i}.png", "key": str(i)})  # fmt: skip
        return items
