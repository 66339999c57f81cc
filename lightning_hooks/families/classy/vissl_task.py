"""VISSL's ``SelfSupervisionTask``: the ``task`` facade VISSL hooks receive, where it differs from Classy's."""

from __future__ import annotations

from typing import Any

import torch

from lightning_hooks.families.classy.state import VisslTaskState
from lightning_hooks.families.classy.task import Task, batch_size, distributed
from lightning_hooks.families.classy.vissl import DDPView


class VisslTask(VisslTaskState, Task):
    """VISSL's ``SelfSupervisionTask`` as its hooks see it (VISSL hooks or a VISSL config): ``losses`` holds loss x batch
    size with the loss averaged over ranks at each step, a single model output is unwrapped from its list, meters are
    updated without ``is_train`` (in train phases only with ``METERS.enable_training_meter``), ``perf_stats`` gets
    the step's timings, ``where`` is VISSL's, and ``get_classy_state`` uses VISSL's checkpoint layout.

    Example::

        adapter = ClassyAdapter([], vissl=["config=test/cpu_test/test_cpu_regnet_moco"])
        isinstance(adapter.task, VisslTask)  # True
    """

    vissl = True

    @property
    def model(self) -> torch.nn.Module:
        """VISSL's ``task.model``: on several processes, the model as VISSL's DDP wrapper shows it (:class:`DDPView`:
        ``.module``, ``module.``-prefixed parameter names); on one, the model itself (VISSL wraps it only then)."""
        model = super().model
        if self.model_path is None or not (distributed() and torch.distributed.get_world_size() > 1):
            return model
        return DDPView(model)

    @property
    def where(self) -> float:
        """VISSL's ``task.where`` (the one its param schedulers read): ``num_updates`` over the global batch size, over
        ``num_train_phases`` x ``num_batches_per_phase``, so that a run started from a VISSL checkpoint continues
        VISSL's schedule; 0.0 outside ``fit``."""
        if self.test_only:
            return 0.0
        current_step = self.num_updates / self.get_global_batchsize()
        return current_step / (self.num_train_phases * self.num_batches_per_phase)

    def model_output(self, output: Any) -> Any:
        """VISSL's train step unwraps a single output."""
        return output[0] if isinstance(output, (list, tuple)) and len(output) == 1 else output

    def record_loss(self, loss: torch.Tensor, target: Any) -> None:
        """VISSL's: the loss averaged over ranks, and ``losses`` gets it times the batch size."""
        last = self.last_batch
        assert last is not None, "record_loss runs in a step, once last_batch holds its batch"
        last.loss = _all_reduce_mean(loss.detach().clone())
        size = target.size(0) if isinstance(target, torch.Tensor) else batch_size(last.sample)
        self.losses.append(last.loss.item() * size)

    def meters_on(self) -> bool:
        """VISSL updates meters in train phases only with ``METERS.enable_training_meter``."""
        if not self.train:
            return True
        meters = self.config.get("METERS", {}) if hasattr(self, "config") else {}
        return bool(meters.get("enable_training_meter", True))

    def update_meters(self, output: Any, target: torch.Tensor) -> None:
        """VISSL's step: each meter gets the model output on the CPU (a list of outputs, one per head, as a list; a
        single output as a tensor) and the target, without ``is_train``."""
        if not isinstance(output, list):
            super().update_meters(output, target)
            return
        outputs = [x.detach().cpu() for x in output]
        for meter in self.meters:
            meter.update(outputs, target.detach().cpu())

    def _meter_arguments(self) -> dict[str, Any]:
        return {}  # VISSL's step passes no is_train

    def synchronize_losses(self) -> None:
        """Nothing: VISSL averages each step's loss over ranks instead."""


def _all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    if distributed() and torch.distributed.get_world_size() > 1:
        torch.distributed.all_reduce(tensor)
        tensor /= torch.distributed.get_world_size()
    return tensor
