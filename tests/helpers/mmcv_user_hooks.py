"""A user's hook module for the OpenMMLab 1.x train tests, registered in mmcv's ``HOOKS`` when imported: hooks that
act on the data or draw from torch's random generator when the run or an epoch starts, before mmcv's runners make the
train loader's iterator (``EpochBasedRunner.train`` after ``before_train_epoch``, ``IterBasedRunner.run``'s
``IterLoader`` after ``before_run``) or after it (``IterBasedRunner``'s ``before_epoch``). Configs name it in ``custom_imports``, as
:mod:`mmcv_tiny_cifar`; no test imports it itself.
"""

from __future__ import annotations

from mmcv.parallel import is_module_wrapper
from mmcv.runner import HOOKS, Hook


@HOOKS.register_module(force=True)
class SwitchOffAugmentation(Hook):
    """From epoch ``epoch`` (0-based) on, the train dataset leaves out the transforms ``skip_type_keys``: set in
    ``before_train_epoch`` on ``runner.data_loader.dataset``, as mmdet 2.x's ``YOLOXModeSwitchHook`` turns mosaic and
    mixup off for the last epochs (a dataset with ``update_skip_type_keys``: ``mmcv_tiny_cifar.TinyCIFAR``)."""

    def __init__(self, epoch: int, skip_type_keys: tuple[str, ...] = ("RandomCrop", "RandomFlip")) -> None:
        self.epoch = epoch
        self.skip_type_keys = skip_type_keys

    def before_train_epoch(self, runner):
        if runner.epoch >= self.epoch:
            runner.data_loader.dataset.update_skip_type_keys(self.skip_type_keys)


@HOOKS.register_module(force=True)
class ReinitDecodeHead(Hook):
    """Draws the segmentor's classifier (``decode_head.conv_seg``) anew in ``before_run``, from torch's generator, as
    a fine-tuning recipe that starts its head from scratch would."""

    def before_run(self, runner):
        model = runner.model.module if is_module_wrapper(runner.model) else runner.model
        model.decode_head.conv_seg.reset_parameters()


@HOOKS.register_module(force=True)
class ReinitAuxiliaryHead(Hook):
    """Draws the segmentor's auxiliary classifier (``auxiliary_head.conv_seg``) anew in ``before_epoch``, from torch's
    generator: under ``IterBasedRunner`` once, after its ``IterLoader`` made the train loader's iterator."""

    def before_epoch(self, runner):
        model = runner.model.module if is_module_wrapper(runner.model) else runner.model
        model.auxiliary_head.conv_seg.reset_parameters()
