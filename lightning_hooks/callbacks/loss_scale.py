"""Log the fp16 GradScaler's loss scale, skipped steps and non-finite-gradient steps."""

from __future__ import annotations

from typing import Any

import torch
from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, pl, rank_zero_warn
from lightning_hooks.core.state_keys import UniqueStateKey


class LossScaleMonitor(UniqueStateKey, Callback):
    r"""Monitor the ``GradScaler`` of fp16 mixed precision (``trainer.precision_plugin.scaler``).

    After every optimizer step it logs, through ``pl_module.log`` (so to all of the trainer's loggers, honouring
    ``log_every_n_steps``):

    * ``loss_scale``: the scale after ``scaler.update()``;
    * ``loss_scale/skipped_steps``: steps after which the scale went down, i.e. steps the scaler skipped;
    * ``loss_scale/nonfinite_steps``: optimizer steps whose unscaled gradients held inf/NaN, read from the
      scaler's own per-device check in ``on_before_optimizer_step`` (no extra pass over the gradients).

    The two counters agree unless the scaler's ``backoff_factor`` is 1 or an optimizer unscales inside
    ``step()`` (fused optimizers; then the scaler records nothing before the step). Both are in the callback's
    ``state_dict``. Without a scaler (fp32, bf16) the callback warns once and does nothing.

    Example::

        >>> import torch, lightning.pytorch as pl
        >>> from lightning.pytorch.demos.boring_classes import BoringModel
        >>> from lightning.pytorch.plugins.precision import MixedPrecision
        >>> from lightning_hooks.callbacks import LossScaleMonitor
        >>> monitor = LossScaleMonitor()
        >>> scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)  # on CUDA just use precision="16-mixed"
        >>> trainer = pl.Trainer(max_steps=3, limit_val_batches=0, callbacks=[monitor], accelerator="cpu",
        ...                      plugins=[MixedPrecision("16-mixed", "cpu", scaler)], logger=False,
        ...                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(BoringModel())
        >>> monitor.skipped_steps
        0

    """

    def __init__(self) -> None:
        self._init_state_key(type(self).__qualname__)
        self.skipped_steps = 0
        self.nonfinite_steps = 0
        self._scaler: torch.amp.GradScaler | None = None
        self._last_scale: float | None = None
        self._last_step: int | None = None
        self._warned = False

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._key_by_position(trainer)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._scaler = getattr(trainer.precision_plugin, "scaler", None)
        if self._scaler is None:
            if not self._warned:
                rank_zero_warn(
                    f"LossScaleMonitor: precision={trainer.precision!r} has no GradScaler, so there is no loss scale "
                    "to monitor; the callback does nothing. It is useful with precision='16-mixed' on CUDA."
                )
                self._warned = True
            return
        self._last_scale = self._scaler.get_scale()
        self._last_step = trainer.global_step

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if self._scaler is None:
            return
        found = self._scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"]
        if found and sum(v.item() for v in found.values()):
            self.nonfinite_steps += 1

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._scaler is None or trainer.global_step == self._last_step:
            return
        self._last_step = trainer.global_step
        scale = self._scaler.get_scale()
        if self._last_scale is not None and scale < self._last_scale:
            self.skipped_steps += 1
        self._last_scale = scale
        pl_module.log("loss_scale", scale, on_step=True, on_epoch=False)
        pl_module.log("loss_scale/skipped_steps", float(self.skipped_steps), on_step=True, on_epoch=False)
        pl_module.log("loss_scale/nonfinite_steps", float(self.nonfinite_steps), on_step=True, on_epoch=False)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"skipped_steps": self.skipped_steps, "nonfinite_steps": self.nonfinite_steps}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"skipped_steps", "nonfinite_steps"}:
            raise KeyError(
                f"LossScaleMonitor: unexpected state keys {sorted(state_dict)}; expected ['nonfinite_steps', "
                "'skipped_steps']. The checkpoint was not written by lightning_hooks.callbacks.LossScaleMonitor."
            )
        self.skipped_steps = int(state_dict["skipped_steps"])
        self.nonfinite_steps = int(state_dict["nonfinite_steps"])
