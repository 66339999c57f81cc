"""Exponential moving average (EMA) of the weights, used for validation, test and predict."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback


class EMA(Callback):
    r"""Keep an exponential moving average of the weights and evaluate with it.

    After an optimizer step, the average is updated with one fused ``torch._foreach_lerp_`` per device/dtype
    group over tensor lists that are built once (they are rebuilt only when the module's parameters change,
    e.g. a new parameter object, dtype or device; this is checked at train/eval start, not per step)::

        ema = d * ema + (1 - d) * weight,   d = min(decay, (1 + n) / (10 + n)) if warmup else decay

    ``n`` is the number of updates already done. The first update copies the weights (nothing exists before it),
    so ``n = 1`` at the second update. Updates happen after the optimizer steps ``start_step + 1``,
    ``start_step + 1 + every_n_steps``, ... as counted by ``trainer.global_step``; gradient-accumulation
    micro-batches never update.

    Validation (including the sanity check), test and predict run on the EMA weights: they are swapped in at
    ``on_{validation,test,predict}_start`` and swapped back at the matching ``*_end`` (and on an exception).
    Before the first update nothing is swapped. When the EMA lives on the model's device the swap exchanges the
    tensors' storage (``.data``), which copies nothing. With ``cpu=True`` and an accelerator model it is a
    ``torch._foreach_copy_`` through pinned host buffers. Callbacks listed before this one see EMA weights in their
    ``on_validation_end``; callbacks after it (and every ``Checkpoint``) see the raw weights.

    The EMA tensors are in this callback's ``state_dict`` (so in checkpoints) and are restored exactly on resume;
    ``checkpoint["state_dict"]`` keeps the raw weights. Use :meth:`export_state_dict` for an EMA-only
    ``state_dict``. Not for sharded strategies (FSDP, DeepSpeed ZeRO-3), whose parameters are shards.

    Args:
        decay: EMA decay ``d`` in ``[0, 1)``.
        warmup: use ``min(decay, (1 + n) / (10 + n))`` so early weights are forgotten quickly.
        every_n_steps: update after every ``every_n_steps``-th optimizer step.
        start_step: number of optimizer steps to take before the first update.
        include_buffers: also average floating-point buffers (e.g. BatchNorm running stats); otherwise the live
            buffers are used at evaluation.
        cpu: keep the EMA in host memory; each update copies the weights to pinned memory (non-blocking) and
            averages on the CPU. Saves accelerator memory at the cost of a device-to-host copy per update.

    Example::

        >>> import lightning.pytorch as pl
        >>> from lightning.pytorch.demos.boring_classes import BoringModel
        >>> from lightning_hooks.callbacks import EMA
        >>> ema = EMA(decay=0.99)
        >>> trainer = pl.Trainer(max_steps=4, limit_val_batches=1, callbacks=[ema], logger=False,
        ...                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(BoringModel())
        >>> sorted(ema.export_state_dict(trainer.lightning_module))
        ['layer.bias', 'layer.weight']

    """

    def __init__(
        self,
        decay: float = 0.999,
        warmup: bool = True,
        every_n_steps: int = 1,
        start_step: int = 0,
        include_buffers: bool = False,
        cpu: bool = False,
    ) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"EMA: `decay` must be in [0, 1), got {decay!r}. Typical values are 0.99-0.9999.")
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ValueError(f"EMA: `every_n_steps` must be an int >= 1, got {every_n_steps!r}.")
        if not isinstance(start_step, int) or start_step < 0:
            raise ValueError(f"EMA: `start_step` must be an int >= 0, got {start_step!r}.")
        self.decay = decay
        self.warmup = warmup
        self.every_n_steps = every_n_steps
        self.start_step = start_step
        self.include_buffers = include_buffers
        self.cpu = cpu
        self.num_updates = 0
        self._names: list[str] = []
        self._live: list[Tensor] = []  # model tensors, same order as self._ema
        self._ema: list[Tensor] = []
        self._offloaded: list[bool] = []  # EMA tensor on another device than its model tensor
        self._signature: list[tuple[Any, ...]] = []
        # (ema tensors, model tensors, pinned staging or None) per (device, dtype) group
        self._groups: list[tuple[list[Tensor], list[Tensor], list[Tensor] | None]] = []
        self._loaded: dict[str, Tensor] | None = None
        self._last_step: int | None = None
        self._swapped = False

    # ------------------------------------------------------------------ tensor bookkeeping
    def _collect(self, pl_module: pl.LightningModule) -> list[tuple[str, Tensor]]:
        named = list(pl_module.named_parameters())
        if self.include_buffers:
            named += [(n, b) for n, b in pl_module.named_buffers() if b.is_floating_point()]
        return named

    def _prepare(self, pl_module: pl.LightningModule) -> None:
        """(Re)build the tensor lists if the module's tensors changed; carry EMA values over by name."""
        named = self._collect(pl_module)
        signature = [(id(t), t.device, t.dtype, t.shape) for _, t in named]
        if signature == self._signature and self._loaded is None:
            return
        values = self._loaded if self._loaded is not None else dict(zip(self._names, self._ema))
        if values:
            names = [n for n, _ in named]
            missing, unexpected = set(names) - set(values), set(values) - set(names)
            bad_shape = [n for n, t in named if n in values and values[n].shape != t.shape]
            if missing or unexpected or bad_shape:
                raise RuntimeError(
                    "EMA: the stored EMA does not match the module's "
                    f"{'parameters and float buffers' if self.include_buffers else 'parameters'} "
                    f"(missing: {sorted(missing)}, unexpected: {sorted(unexpected)}, shape changed: {bad_shape}). "
                    "Resume with the same model and the same `include_buffers`, or remove the EMA entry from the "
                    "checkpoint's 'callbacks' to start a fresh average."
                )
        self._names = [n for n, _ in named]
        self._live = [t for _, t in named]
        self._ema, self._offloaded = [], []
        groups: dict[tuple[torch.device, torch.dtype], tuple[list[Tensor], list[Tensor], list[Tensor] | None]] = {}
        for name, t in named:
            device = torch.device("cpu") if self.cpu else t.device
            ema = torch.empty_like(t, device=device, memory_format=torch.preserve_format).requires_grad_(False)
            if name in values:
                ema.copy_(values[name])
            offload = device != t.device
            self._ema.append(ema)
            self._offloaded.append(offload)
            group = groups.setdefault((t.device, t.dtype), ([], [], [] if offload else None))
            group[0].append(ema)
            group[1].append(t)
            if offload:
                group[2].append(torch.empty_like(ema, pin_memory=torch.cuda.is_available()))  # type: ignore[union-attr]
        self._groups = list(groups.values())
        self._signature = signature
        self._loaded = None

    def _update(self, pl_module: pl.LightningModule) -> None:
        if not self._groups:
            self._prepare(pl_module)
        n = self.num_updates
        d = min(self.decay, (1 + n) / (10 + n)) if self.warmup else self.decay
        with torch.no_grad():
            for ema, live, staging in self._groups:
                src = live
                if staging is not None:
                    torch._foreach_copy_(staging, live, non_blocking=True)
                    if live[0].device.type == "cuda":
                        torch.cuda.current_stream(live[0].device).synchronize()
                    src = staging
                if n == 0:
                    torch._foreach_copy_(ema, src)
                else:
                    torch._foreach_lerp_(ema, src, 1.0 - d)
        self.num_updates = n + 1

    def _swap(self) -> None:
        """Exchange model and EMA values (called in matched pairs)."""
        with torch.no_grad():
            for ema, live, staging in self._groups:
                if staging is None:
                    for e, t in zip(ema, live):
                        data = t.data
                        t.data = e.data
                        e.data = data
                elif not self._swapped:
                    torch._foreach_copy_(staging, live, non_blocking=True)
                    torch._foreach_copy_(live, ema, non_blocking=True)
                else:
                    torch._foreach_copy_(live, staging, non_blocking=True)
        self._swapped = not self._swapped

    def _current_ema(self) -> list[Tensor]:
        """EMA values in ``self._names`` order, whether or not they are swapped into the model."""
        if not self._swapped:
            return self._ema
        return [t if not off else e for t, e, off in zip(self._live, self._ema, self._offloaded)]

    def _swap_in(self, pl_module: pl.LightningModule) -> None:
        if self.num_updates == 0 or self._swapped:
            return
        self._prepare(pl_module)
        self._swap()

    def _swap_out(self) -> None:
        if self._swapped:
            self._swap()

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last_step = trainer.global_step

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.num_updates:
            self._prepare(pl_module)

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self._last_step:
            return  # accumulation micro-batch: no optimizer step happened
        self._last_step = step
        if step > self.start_step and (step - self.start_step - 1) % self.every_n_steps == 0:
            self._update(pl_module)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._swap_out()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        if self._loaded is not None:
            ema = self._loaded
        else:
            ema = dict(zip(self._names, self._current_ema()))
        return {"num_updates": self.num_updates, "ema": ema}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"num_updates", "ema"}:
            raise KeyError(
                f"EMA: unexpected state keys {sorted(state_dict)}; expected ['ema', 'num_updates']. "
                "The checkpoint was not written by lightning_hooks.callbacks.EMA."
            )
        self._swap_out()
        self.num_updates = int(state_dict["num_updates"])
        self._loaded = dict(state_dict["ema"]) if self.num_updates else None
        if not self.num_updates:
            self._names, self._live, self._ema, self._offloaded = [], [], [], []
            self._groups, self._signature = [], []

    def export_state_dict(self, pl_module: pl.LightningModule) -> dict[str, Tensor]:
        """Return ``pl_module.state_dict()`` with the averaged tensors replaced by (cloned) EMA values.

        Load it into a plain copy of the model for inference or export.

        """
        if self.num_updates == 0:
            raise RuntimeError(
                "EMA.export_state_dict: no EMA update has happened yet "
                f"(start_step={self.start_step}, every_n_steps={self.every_n_steps}). Train past `start_step` first."
            )
        if not self._swapped:
            self._prepare(pl_module)
        by_id = {id(t): e for t, e in zip(self._live, self._current_ema())}
        return {
            k: by_id[id(v)].detach().clone() if id(v) in by_id else v.detach()
            for k, v in pl_module.state_dict(keep_vars=True).items()
        }
