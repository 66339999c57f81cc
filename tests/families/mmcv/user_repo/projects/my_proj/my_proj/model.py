import torch.nn as nn
from mmcls.models import BACKBONES
from mmcls.models.backbones.base_backbone import BaseBackbone


@BACKBONES.register_module()
class TinyConvNet(BaseBackbone):
    """Two strided convolutions: the project's own backbone."""

    def __init__(self, channels=8, init_cfg=None):
        super().__init__(init_cfg)
        self.layers = nn.Sequential(
            nn.Conv2d(3, channels, 3, stride=2, padding=1), nn.BatchNorm2d(channels), nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1), nn.ReLU())

    def forward(self, x):
        return (self.layers(x),)
