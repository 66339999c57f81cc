# A user's OpenMMLab 1.x project, laid out as the projects/ folders of mmcls 0.x / mmdet 2.x are: its config imports
# this package by name (custom_imports), which registers the project's backbone, dataset (with its own metric in
# evaluate), pipeline transform and hook in mmcls's and mmcv's registries.
from .dataset import SquaresDataset
from .hook import LossTrackerHook
from .model import TinyConvNet
from .transform import AddNoise

__all__ = ["AddNoise", "LossTrackerHook", "SquaresDataset", "TinyConvNet"]
