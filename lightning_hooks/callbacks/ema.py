"""Exponential moving average (EMA) of the weights, used for validation, test and predict."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, pl
from lightning_hooks.core.state_keys import UniqueStateKey
from lightning_hooks.core.weight_swaps import check_one_weight_swap


def _dense(t: Tensor) -> bool:
    """Whether ``t`` covers ``numel`` consecutive elements of its storage (any dimension order, no gaps)."""
    expected = 1
    for stride, size in sorted((st, sz) for st, sz in zip(t.stride(), t.shape, strict=True) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _flat_view(tensors: list[Tensor]) -> Tensor | None:
    """A 1-D tensor over the storage that ``tensors`` tile, in order and without gaps; None if they do not."""
    first = tensors[0]
    ptr, start = first.untyped_storage().data_ptr(), first.storage_offset()
    offset = start
    for t in tensors:
        if t.untyped_storage().data_ptr() != ptr or t.storage_offset() != offset or not _dense(t):
            return None
        offset += t.numel()
    return first.detach().as_strided((offset - start,), (1,), start)


class _Group(NamedTuple):
    """EMA and model tensors of one (device, dtype); the flat buffers when the model tensors tile one."""

    ema: list[Tensor]
    live: list[Tensor]
    staging: list[Tensor] | None  # pinned host buffers when the EMA is offloaded
    flat_ema: Tensor | None
    flat_live: Tensor | None
    ptrs: list[int]  # model tensors' data_ptr when built: the flat path is used only while they still match


class EMA(UniqueStateKey, Callback):
    r"""Keep an exponential moving average of the weights and evaluate with it.

    At fit start the averaged tensors are re-homed, per device/dtype group, into one contiguous buffer: each
    tensor's ``.data`` becomes a view of it (same strides), so ``Parameter`` objects, optimizers and the
    user's references to the parameters stay valid. The EMA is one buffer with the same layout, and after an
    optimizer step it is updated with a single ``lerp_`` per group (one pass over memory, at the bandwidth
    bound). Groups that cannot be flattened (tensors sharing storage, a tensor that is a view into a larger
    storage, ``flatten=False``) use one fused ``torch._foreach_lerp_`` over tensor lists built once; so does an
    update after a tensor stopped being a view of the buffer (``p.data = ...``, checked before every update).
    The lists and buffers are rebuilt, EMA values carried over, when the module's tensors changed (a replaced
    parameter object, new storage, dtype or device), which is checked at train/eval start::

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
            Accelerator tensors are then not flattened.
        flatten: re-home the averaged tensors into one buffer per group at fit start (see above). Turn it off
            if code keeps the parameters' old ``.data`` tensors (or views of them) from before fit start, if you
            save subsets of the parameters with ``torch.save`` (a view saves its whole buffer, so the file holds
            every flattened tensor; full ``state_dict`` checkpoints do not grow), or if the moment of one extra
            copy of the parameters at fit start does not fit in memory.

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
        flatten: bool = True,
    ) -> None:
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0.0 <= decay < 1.0:
            raise ValueError(
                f"EMA: `decay` must be a number in [0, 1), got {decay!r}. Typical values are 0.99-0.9999 "
                "(a number, not a string: EMA(decay=0.999))."
            )
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ValueError(f"EMA: `every_n_steps` must be an int >= 1, got {every_n_steps!r}.")
        if not isinstance(start_step, int) or start_step < 0:
            raise ValueError(f"EMA: `start_step` must be an int >= 0, got {start_step!r}.")
        self._init_state_key(type(self).__qualname__)
        self.decay = decay
        self.warmup = warmup
        self.every_n_steps = every_n_steps
        self.start_step = start_step
        self.include_buffers = include_buffers
        self.cpu = cpu
        self.flatten = flatten
        self.num_updates = 0
        self._names: list[str] = []
        self._live: list[Tensor] = []  # model tensors, same order as self._ema
        self._ema: list[Tensor] = []
        self._offloaded: list[bool] = []  # EMA tensor on another device than its model tensor
        self._signature: list[tuple[Any, ...]] = []
        self._groups: list[_Group] = []
        self._loaded: dict[str, Tensor] | None = None
        self._last_step: int | None = None
        self._swapped = False

    # ------------------------------------------------------------------ tensor bookkeeping
    def _collect(self, pl_module: pl.LightningModule) -> list[tuple[str, Tensor]]:
        named: list[tuple[str, Tensor]] = list(pl_module.named_parameters())
        if self.include_buffers:
            named += [(n, b) for n, b in pl_module.named_buffers() if b.is_floating_point()]
        return named

    def _flatten(self, pl_module: pl.LightningModule) -> None:
        """Re-home each device/dtype group of averaged tensors into one buffer (``t.data`` becomes a view)."""
        tensors = [t for _, t in self._collect(pl_module)]
        if len({t.untyped_storage().data_ptr() for t in tensors}) != len(tensors):
            return  # tensors share storage (tied through .data, already flat, ...): leave them alone
        groups: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
        for t in tensors:
            if not self.cpu or t.device.type == "cpu":  # offloaded groups keep the staging path
                groups.setdefault((t.device, t.dtype), []).append(t)
        with torch.no_grad():
            for (device, dtype), group in groups.items():
                if not all(t.storage_offset() == 0 and _dense(t) for t in group) or any(
                    t.untyped_storage().nbytes() != t.numel() * t.element_size() for t in group
                ):
                    continue  # a tensor is a view into a larger storage (someone else's flat buffer)
                flat = torch.empty(sum(t.numel() for t in group), device=device, dtype=dtype)
                offset = 0
                for t in group:
                    view = flat[offset : offset + t.numel()].as_strided(t.shape, t.stride())
                    view.copy_(t)
                    t.data = view
                    offset += t.numel()

    def _prepare(self, pl_module: pl.LightningModule) -> None:
        """(Re)build the tensor lists if the module's tensors changed; carry EMA values over by name."""
        named = self._collect(pl_module)
        signature = [(id(t), t.device, t.dtype, t.shape, t.data_ptr()) for _, t in named]
        if signature == self._signature and self._loaded is None:
            return
        values = self._loaded if self._loaded is not None else dict(zip(self._names, self._ema, strict=True))
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
        by_group: dict[tuple[torch.device, torch.dtype], list[tuple[str, Tensor]]] = {}
        for name, t in named:
            by_group.setdefault((t.device, t.dtype), []).append((name, t))
        ema_of: dict[str, Tensor] = {}
        self._groups = []
        for (device, _dtype), members in by_group.items():
            live = [t for _, t in members]
            ema_device = torch.device("cpu") if self.cpu else device
            offload = ema_device != device
            flat_live = None if offload else _flat_view(live)
            flat_ema = None if flat_live is None else torch.empty_like(flat_live)
            ema, offset = [], 0
            for name, t in members:
                if flat_ema is not None:
                    e = flat_ema[offset : offset + t.numel()].as_strided(t.shape, t.stride())
                    offset += t.numel()
                else:
                    e = torch.empty_like(t, device=ema_device, memory_format=torch.preserve_format)
                if name in values:
                    e.copy_(values[name])
                ema.append(e.requires_grad_(False))
                ema_of[name] = e
            staging = [torch.empty_like(e, pin_memory=torch.cuda.is_available()) for e in ema] if offload else None
            ptrs = [t.data_ptr() for t in live]
            self._groups.append(_Group(ema, live, staging, flat_ema, flat_live, ptrs))
        self._names = [n for n, _ in named]
        self._live = [t for _, t in named]
        self._ema = [ema_of[n] for n in self._names]
        self._offloaded = [self.cpu and t.device.type != "cpu" for t in self._live]
        self._signature = signature
        self._loaded = None

    def _update(self, pl_module: pl.LightningModule) -> None:
        if self._loaded is not None or not self._groups:  # a restored state (resume) is applied here at the latest
            self._prepare(pl_module)
        n = self.num_updates
        d = min(self.decay, (1 + n) / (10 + n)) if self.warmup else self.decay
        with torch.no_grad():
            for g in self._groups:
                flat_ema, flat_live = g.flat_ema, g.flat_live  # both set, or both None (offloaded)
                if flat_ema is not None and flat_live is not None and list(map(Tensor.data_ptr, g.live)) == g.ptrs:
                    if n == 0:
                        flat_ema.copy_(flat_live)
                    else:
                        flat_ema.lerp_(flat_live, 1.0 - d)
                    continue
                src = g.live
                if g.staging is not None:
                    torch._foreach_copy_(g.staging, g.live, non_blocking=True)
                    if g.live[0].device.type == "cuda":
                        torch.cuda.current_stream(g.live[0].device).synchronize()
                    src = g.staging
                if n == 0:
                    torch._foreach_copy_(g.ema, src)
                else:
                    torch._foreach_lerp_(g.ema, src, 1.0 - d)
        self.num_updates = n + 1

    def _swap(self) -> None:
        """Exchange model and EMA values (called in matched pairs)."""
        with torch.no_grad():
            for g in self._groups:
                if g.staging is None:
                    for e, t in zip(g.ema, g.live, strict=True):
                        data = t.data
                        t.data = e.data
                        e.data = data
                elif not self._swapped:
                    torch._foreach_copy_(g.staging, g.live, non_blocking=True)
                    torch._foreach_copy_(g.live, g.ema, non_blocking=True)
                else:
                    torch._foreach_copy_(g.live, g.staging, non_blocking=True)
        self._swapped = not self._swapped

    def _current_ema(self) -> list[Tensor]:
        """EMA values in ``self._names`` order, whether or not they are swapped into the model."""
        if not self._swapped:
            return self._ema
        return [t if not off else e for t, e, off in zip(self._live, self._ema, self._offloaded, strict=True)]

    def _swap_in(self, pl_module: pl.LightningModule) -> None:
        if self.num_updates == 0 or self._swapped:
            return
        self._prepare(pl_module)
        self._swap()

    def _swap_out(self) -> None:
        if self._swapped:
            self._swap()

    # ------------------------------------------------------------------ hooks
    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._key_by_position(trainer)
        check_one_weight_swap(trainer)

    def weight_swappers(self) -> list[str]:
        """This callback swaps its average into the model for evaluation (see :func:`check_one_weight_swap`)."""
        return ["lightning_hooks.callbacks.EMA"]

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # after the strategy moved/converted the module (a move would undo the flattening); optimizers hold the
        # Parameter objects, whose identity the re-homing keeps
        if self.flatten:
            self._flatten(pl_module)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._last_step = trainer.global_step

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.num_updates:
            self._prepare(pl_module)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if step == self._last_step:
            return  # accumulation micro-batch: no optimizer step happened
        self._last_step = step
        if step > self.start_step and (step - self.start_step - 1) % self.every_n_steps == 0:
            self._update(pl_module)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    @override
    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    @override
    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    @override
    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_in(pl_module)

    @override
    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._swap_out()

    @override
    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._swap_out()

    # ------------------------------------------------------------------ state
    @override
    def state_dict(self) -> dict[str, Any]:
        ema = self._loaded if self._loaded is not None else dict(zip(self._names, self._current_ema(), strict=True))
        return {"num_updates": self.num_updates, "ema": ema}

    @override
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
        by_id = {id(t): e for t, e in zip(self._live, self._current_ema(), strict=True)}
        return {
            k: by_id[id(v)].detach().clone() if id(v) in by_id else v.detach()
            for k, v in pl_module.state_dict(keep_vars=True).items()
        }
