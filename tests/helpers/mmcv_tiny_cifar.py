"""A user's dataset module for the OpenMMLab 1.x train tests: ``TinyCIFAR``, 8 (train) or 4 (test) generated 32x32
images of the 10 CIFAR classes, registered in mmcls 0.x's ``DATASETS`` when imported.

Configs name it (``custom_imports = dict(imports=['mmcv_tiny_cifar'])``, as
:func:`mmcv_train_kit.tiny_resnet_cifar` writes them) and the command under test imports it, as a user's config has
its project's modules imported; no test imports it itself. ``tests/helpers`` is on the path of the suite and of its
subprocesses (``lh_testing.subprocess_env``).
"""

from __future__ import annotations

import copy

import numpy as np
from mmcls.datasets import DATASETS, BaseDataset


@DATASETS.register_module(force=True)
class TinyCIFAR(BaseDataset):
    """8 (train) or 4 (test) generated 32x32 images of the 10 CIFAR classes."""

    CLASSES = [str(i) for i in range(10)]
    #: the pipeline's transforms left out (``mmcv_user_hooks.SwitchOffAugmentation`` sets them)
    skip_type_keys: tuple[str, ...] = ()

    def update_skip_type_keys(self, skip_type_keys):
        """Leave the transforms of these types out from now on (mmdet 2.x's ``MultiImageMixDataset`` method)."""
        self.skip_type_keys = tuple(skip_type_keys)

    def prepare_data(self, idx):
        results = copy.deepcopy(self.data_infos[idx])
        for transform in self.pipeline.transforms:
            if type(transform).__name__ not in self.skip_type_keys:
                results = transform(results)
        return results

    def load_annotations(self):
        rng = np.random.RandomState(1 if self.test_mode else 0)
        n = 4 if self.test_mode else 8
        return [dict(img=rng.randint(0, 255, (32, 32, 3)).astype(np.uint8), gt_label=np.array(i % 10, dtype=np.int64))
                for i in range(n)]
