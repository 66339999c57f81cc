"""``MMCVModule``: an OpenMMLab 1.x model (``train_step`` / ``val_step``) and its optimizer as a LightningModule."""

from __future__ import annotations

from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.core.lightning_api import pl


class MMCVModule(pl.LightningModule):
    """Plays mmcv's ``EpochBasedRunner.run_iter``: ``training_step`` returns ``model.train_step(batch, optimizer)``
    (mmcv's output dict, which :class:`~lightning_hooks.families.mmcv.adapter.MMCVAdapter` hands to the hooks), and
    ``validation_step`` ``model.val_step``. The optimizer is the one given (built by ``build_optimizer``); the
    adapter's ``OptimizerHook`` steps it. Batches stay as the loader collates them (``DataContainer`` included): the
    model, or its ``MMDataParallel`` wrapper, scatters them as under mmcv's runner.

    Example::

        module = MMCVModule(build_classifier(cfg.model), build_optimizer(model, cfg.optimizer))
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        super().__init__()
        self.model: Any = model  # an mmcv model: train_step / val_step are its own (mmcv: no types)
        self._optimizer = optimizer

    @override
    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self._optimizer

    @override
    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return self.model.train_step(batch, self._optimizer)

    @override
    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        return self.model.val_step(batch, self._optimizer)

    @override
    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        """The batch as collated: the model (``MMDataParallel``) moves it, as under mmcv's runner."""
        return batch
