"""A VISSL user's own module (the test copies it into the run folder as ``my_vissl_ext.py``): a trunk, a loss and a
hook, registered with VISSL's and Classy's decorators, and the ``hook_generator`` a VISSL launcher script passes to
``launch_distributed``: VISSL's ``default_hook_generator`` and the user's hook."""

from __future__ import annotations

import json
import os
from typing import Any

import torch
from classy_vision.hooks import ClassyHook
from classy_vision.losses import ClassyLoss, register_loss
from torch import nn
from vissl.hooks import default_hook_generator
from vissl.losses.simclr_info_nce_loss import SimclrInfoNCECriterion
from vissl.models.trunks import register_model_trunk


@register_model_trunk("tiny_trunk")
class TinyTrunk(nn.Module):
    """A convolution, a ReLU and a global pool: 8 features per image."""

    def __init__(self, model_config: Any, model_name: str) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x: torch.Tensor, out_feat_keys: Any = None) -> list[torch.Tensor]:
        return [self.layers(x)]


@register_loss("scaled_info_nce")
class ScaledInfoNCE(ClassyLoss):
    """SimCLR's InfoNCE on the normalized embeddings, times ``scale``."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.scale = config.scale
        self.criterion = SimclrInfoNCECriterion(config.buffer_params, config.temperature)

    @classmethod
    def from_config(cls, config: Any) -> ScaledInfoNCE:
        return cls(config)

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.scale * self.criterion(nn.functional.normalize(output, dim=1, p=2))


class TrunkNormHook(ClassyHook):
    """After each train step: the iteration and the trunk's weight norm, in ``CHECKPOINT.DIR/trunk_norms_rank<R>.jsonl``."""

    on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = ClassyHook._noop
    on_update = on_phase_end = on_end = ClassyHook._noop

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder

    def on_step(self, task: Any) -> None:
        if task.train:
            model = getattr(task.model, "module", task.model)
            norm = sum(p.detach().double().norm().item() for p in model.trunk.parameters())
            rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
            with open(os.path.join(self.folder, f"trunk_norms_rank{rank}.jsonl"), "a") as file:
                file.write(json.dumps({"iteration": task.iteration, "norm": norm}) + "\n")


def hook_generator(config: Any) -> list[Any]:
    return [*default_hook_generator(config), TrunkNormHook(config.CHECKPOINT.DIR)]
