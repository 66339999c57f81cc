"""Cheap per-step NaN/Inf detection with a precise report on the first anomaly."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from typing import Any, Literal

import torch
from torch import Tensor, nn
from typing_extensions import override

from lightning_hooks.core import lightning_api
from lightning_hooks.core.lightning_api import Callback, isolate_rng, move_data_to_device, pl, rank_zero_warn
from lightning_hooks.core.state_keys import UniqueStateKey

_POLICIES = ("raise", "skip", "save")
_OP_RE = re.compile(r"Function '(\w+)' returned nan values in its (\w+) output")


class AnomalyDetector(UniqueStateKey, Callback):
    r"""Detect non-finite losses and gradients every step for about the cost of one fused kernel.

    Each step the training loss (``on_before_backward``) and all dense gradients of the optimizer's parameters
    (``on_before_optimizer_step``, where Lightning has already unscaled them) are checked with
    ``torch._amp_foreach_non_finite_check_and_unscale_`` (one fused call per device/dtype group, ``inv_scale=1``)
    and a single host sync. ``Trainer(detect_anomaly=True)`` instead runs autograd anomaly mode on every step.

    On the first non-finite value the callback builds a report: the global step, whether the loss and the input
    batch were finite, the names of the parameters with non-finite gradients, and, by replaying the step's
    batches (kept from ``on_train_batch_start``; with gradient accumulation, every micro-batch of the step)
    through ``training_step`` with forward hooks on all modules and
    ``torch.autograd.detect_anomaly(check_nan=True)``: the first module whose output was non-finite and the
    backward function that produced NaN. The replay leaves gradients, buffers and the RNG state untouched, but
    ``training_step``'s other side effects (``self.log`` calls, metric updates) happen a second time for the
    replayed batches. It is skipped under manual optimization (``training_step`` would step the optimizers).

    With a ``GradScaler`` (fp16 mixed precision) non-finite gradients are expected now and then: the scaler skips
    those steps and lowers the scale (see ``LossScaleMonitor``), so only the loss is checked.

    Policies:

    * ``"raise"``: raise ``FloatingPointError`` with the report.
    * ``"skip"``: undo the step: set the optimizer's gradients to ``None`` (torch optimizers then leave those
      parameters and their state, e.g. momentum or Adam moments and step counts, untouched; LR schedulers still
      step) and restore the module's buffers (BatchNorm running statistics, which the non-finite forward already
      overwrote) to their values before the step's first batch; count it in ``skipped_steps`` (saved in
      checkpoints) and warn (full report the first time). This costs one ``torch._foreach_copy_`` of the buffers
      per step, into tensors allocated once.
    * ``"save"``: write ``batch.pt`` (the step's batches, on CPU), ``checkpoint.ckpt`` (``trainer.save_checkpoint``,
      state before the step: the buffers are restored as for ``"skip"``) and ``report.txt`` to
      ``dirpath/step=<global_step>/``, then raise as above. Under DDP every rank writes its own ``batch.pt`` and
      ``report.txt`` to ``step=<global_step>/rank=<global_rank>/``, the checkpoint once to ``step=<global_step>/``.

    Under DDP (``world_size > 1``) the "all finite" flag is all-reduced each step (one tiny collective), so when
    any rank sees a non-finite loss or gradient every rank raises, skips or saves that step: the replicas stay equal.

    Args:
        policy: ``"raise"``, ``"skip"`` or ``"save"``.
        dirpath: where ``"save"`` writes; default ``<trainer.default_root_dir>/anomaly``.

    Example::

        >>> import lightning.pytorch as pl
        >>> from lightning.pytorch.demos.boring_classes import BoringModel
        >>> from lightning_hooks.callbacks import AnomalyDetector
        >>> trainer = pl.Trainer(max_steps=2, limit_val_batches=0, callbacks=[AnomalyDetector(policy="skip")],
        ...                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
        ...                      enable_model_summary=False)
        >>> trainer.fit(BoringModel())

    """

    def __init__(self, policy: Literal["raise", "skip", "save"] = "raise", dirpath: str | None = None) -> None:
        if policy not in _POLICIES:
            raise ValueError(f"AnomalyDetector: `policy` must be one of {_POLICIES}, got {policy!r}.")
        if dirpath is not None and policy != "save":
            raise ValueError(f"AnomalyDetector: `dirpath` is only used with policy='save', got policy={policy!r}.")
        self._init_state_key(type(self).__qualname__)
        self.policy = policy
        self.dirpath = dirpath
        self.skipped_steps = 0
        self.report: str | None = None  # the first anomaly's report
        self._window: list[tuple[Any, int]] = []  # (batch, batch_idx) of the current optimizer step
        self._loss_ok: Tensor | None = None
        self._flags: dict[torch.device, tuple[Tensor, Tensor]] = {}  # device -> (found_inf, inv_scale=1)
        self._buffers: list[Tensor] = []  # "skip" and "save": the module's buffers ...
        self._saved: list[Tensor] = []  # ... and their values at the start of the current optimizer step

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._key_by_position(trainer)

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if not pl_module.automatic_optimization:
            self._window.clear()  # no replay in manual mode: keep only the current batch
        if self.policy != "raise" and not self._window:
            self._save_buffers(pl_module)
        self._window.append((batch, batch_idx))

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: Tensor) -> None:
        ok = torch.isfinite(loss.detach()).all()
        self._loss_ok = ok if self._loss_ok is None else self._loss_ok & ok

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        check_grads = getattr(trainer.precision_plugin, "scaler", None) is None
        grads_ok = self._grads_finite(optimizer) if check_grads else True
        loss_ok = self._loss_ok is None or bool(self._loss_ok)
        window, self._window, self._loss_ok = self._window, [], None
        ok = grads_ok and loss_ok
        if trainer.world_size > 1:  # DDP syncs the gradients, not the loss: every rank must take the same decision
            ok = trainer.strategy.reduce_boolean_decision(ok, all=True)
        if ok:
            return
        first = self.report is None
        if first or self.policy != "skip":
            self.report = self._build_report(trainer, pl_module, window, loss_ok, check_grads)
        report = self.report
        assert report is not None  # built above at the first anomaly
        if self._buffers:  # "skip" and "save": undo what the step's forwards wrote into the buffers
            with torch.no_grad():
                torch._foreach_copy_(self._buffers, self._saved)
        if self.policy == "skip":
            optimizer.zero_grad(set_to_none=True)
            self.skipped_steps += 1
            rank_zero_warn(
                report + "\nAnomalyDetector(policy='skip'): this optimizer step is skipped."
                if first
                else f"AnomalyDetector: non-finite loss/gradients at global step {trainer.global_step}; step skipped "
                f"({self.skipped_steps} skipped so far)."
            )
            return
        if self.policy == "save":
            self.report = report + "\n" + self._save(trainer, window)
        raise FloatingPointError(self.report)

    def _save_buffers(self, pl_module: pl.LightningModule) -> None:
        live = list(pl_module.buffers())
        if len(live) != len(self._buffers) or any(a is not b for a, b in zip(live, self._buffers, strict=True)):
            self._buffers, self._saved = live, [b.detach().clone() for b in live]
        elif live:
            with torch.no_grad():
                torch._foreach_copy_(self._saved, live)

    def _grads_finite(self, optimizer: torch.optim.Optimizer) -> bool:
        groups: dict[tuple[torch.device, torch.dtype], list[Tensor]] = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None and g.layout == torch.strided:
                    groups.setdefault((g.device, g.dtype), []).append(g)
        flags = []
        for (device, _), grads in groups.items():
            if device not in self._flags:
                self._flags[device] = (torch.zeros(1, device=device), torch.ones(1, device=device))
            found, one = self._flags[device]
            found.zero_()
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, one)
            flags.append(found)
        return not any(bool(f.item()) for f in flags)

    # ------------------------------------------------------------------ report
    def _build_report(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        window: list[tuple[Any, int]],
        loss_ok: bool,
        grads_checked: bool,
    ) -> str:
        lines = [
            f"AnomalyDetector: non-finite values at global step {trainer.global_step} "
            f"(epoch {trainer.current_epoch}, batch_idx {[i for _, i in window]}).",
            f"  loss finite: {loss_ok}",
            *([f"  rank {trainer.global_rank} of {trainer.world_size} (a step is undone on every rank when any rank "
               "sees a non-finite value)"] if trainer.world_size > 1 else []),
            f"  input batch finite: {all(_finite(b) for b, _ in window)}",
        ]
        if grads_checked:
            bad = [n for n, p in pl_module.named_parameters() if p.grad is not None and not _finite(p.grad)]
            shown = ", ".join(bad[:20]) + (f", ... ({len(bad) - 20} more)" if len(bad) > 20 else "")
            lines.append(f"  parameters with non-finite gradients ({len(bad)}): {shown or '-'}")
        if not pl_module.automatic_optimization:
            lines.append("  replay: skipped (manual optimization)")
            return "\n".join(lines)
        module, op, where = None, None, None
        for batch, batch_idx in window:
            module, op, where = _replay(trainer, pl_module, batch, batch_idx)
            if module is not None or op is not None:
                break
        lines.append(f"  first module with non-finite output (replay): {module or 'none (replay stayed finite)'}")
        lines.append(f"  backward op that returned NaN (anomaly mode): {op or 'none'}")
        if where:
            lines.append(f"  forward call of that op: {where}")
        return "\n".join(lines)

    def _save(self, trainer: pl.Trainer, window: list[tuple[Any, int]]) -> str:
        root = self.dirpath or os.path.join(trainer.default_root_dir, "anomaly")
        out = os.path.join(root, f"step={trainer.global_step}")
        own = os.path.join(out, f"rank={trainer.global_rank}") if trainer.world_size > 1 else out
        os.makedirs(own, exist_ok=True)
        torch.save([(move_data_to_device(b, "cpu"), i) for b, i in window], os.path.join(own, "batch.pt"))
        trainer.save_checkpoint(os.path.join(out, "checkpoint.ckpt"))  # a collective: every rank calls it
        with open(os.path.join(own, "report.txt"), "w") as f:
            f.write(self.report or "")
        if own == out:
            return f"  saved batch.pt, checkpoint.ckpt and report.txt to {out}"
        return f"  saved checkpoint.ckpt to {out}, this rank's batch.pt and report.txt to {own}"

    # ------------------------------------------------------------------ state
    @override
    def state_dict(self) -> dict[str, Any]:
        return {"skipped_steps": self.skipped_steps}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if set(state_dict) != {"skipped_steps"}:
            raise KeyError(
                f"AnomalyDetector: unexpected state keys {sorted(state_dict)}; expected ['skipped_steps']. "
                "The checkpoint was not written by lightning_hooks.callbacks.AnomalyDetector."
            )
        self.skipped_steps = int(state_dict["skipped_steps"])


def _tensors(obj: Any) -> list[Tensor]:
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


def _finite(obj: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in _tensors(obj) if t.is_floating_point() or t.is_complex())


def _replay(
    trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
) -> tuple[str | None, str | None, str | None]:
    """Re-run ``training_step`` + backward; return (first non-finite module, NaN backward op, forward call site)."""
    names = {m: (n or "<root>") for n, m in pl_module.named_modules()}
    first: list[str] = []

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if not first and not _finite(output):
            first.append(f"{names[module]} ({type(module).__name__})")

    handles = [m.register_forward_hook(hook) for m in pl_module.modules()]
    buffers = [(b, b.detach().clone()) for b in pl_module.buffers()]
    params = [p for p in pl_module.parameters() if p.requires_grad]
    op = where = None
    try:
        with isolate_rng(), torch.enable_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autograd.detect_anomaly(check_nan=True):
                with trainer.precision_plugin.train_step_context():
                    out = pl_module.training_step(batch, batch_idx)
                loss = out["loss"] if isinstance(out, Mapping) else out
                if isinstance(loss, Tensor) and loss.requires_grad:
                    try:
                        torch.autograd.grad(loss.sum(), params, allow_unused=True)
                    except RuntimeError as err:
                        match = _OP_RE.search(str(err))
                        if match is None:
                            raise
                        op = f"{match.group(1)} ({match.group(2)} output)"
        if op is not None:
            where = _forward_site([str(w.message) for w in caught])
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    return (first[0] if first else None), op, where


def _forward_site(messages: list[str]) -> str | None:
    """Innermost frame outside torch/lightning of the forward traceback that anomaly mode attaches to its warning."""
    library = tuple(os.path.dirname(file) for m in (torch, *lightning_api.NAMESPACES, *lightning_api.FABRICS)
                    if (file := m.__file__) is not None)  # fmt: skip  # the filter reads with the tuple
    for msg in messages:
        if "Traceback of forward call" not in msg:
            continue
        lines = msg.splitlines()
        for i in reversed(range(len(lines))):
            frame = lines[i].strip()
            if frame.startswith("File ") and not frame[6:].startswith(library):
                code = lines[i + 1].strip() if i + 1 < len(lines) else ""
                return f"{frame}: {code}"
    return None
