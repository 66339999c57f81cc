# A user's project, laid out as OpenMMLab's projects/ folders are: its config imports this package by name
# (custom_imports), which registers the project's model, dataset, transform, metric and hook in mmpretrain's registries.
from .dataset import SquaresDataset
from .hook import LossTrackerHook
from .metric import MeanConfidence
from .model import TinyConvNet
from .transform import AddNoise

__all__ = ["AddNoise", "LossTrackerHook", "MeanConfidence", "SquaresDataset", "TinyConvNet"]
