"""Precise BatchNorm: recompute BatchNorm running statistics from many training batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm
from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, isolate_rng, pl, rank_zero_warn

ForwardFn = Callable[["pl.LightningModule", Any], Any]


def _default_forward(pl_module: pl.LightningModule, batch: Any) -> Any:
    tuple_like = isinstance(batch, (list, tuple))
    try:
        return pl_module(batch[0] if tuple_like else batch)
    except (TypeError, AttributeError) as err:
        call = "pl_module(batch[0])" if tuple_like else "pl_module(batch)"
        raise TypeError(
            f"PreciseBN: the default forward called {call} on a {type(batch).__name__} batch and the model raised "
            f"{type(err).__name__} (above). Pass `forward_fn(pl_module, batch)` that runs your model on one batch, "
            'e.g. PreciseBN(forward_fn=lambda pl_module, batch: pl_module(batch["x"])).'
        ) from err


class PreciseBN(Callback):
    r"""Recompute BatchNorm running statistics at the end of training epochs ("precise BN").

    The running mean/var that BatchNorm keeps during training lag behind the weights. At the end of every
    ``every_n_epochs``-th training epoch this callback runs ``num_batches`` fresh batches of the train dataloader
    through the model (train mode, ``torch.no_grad()``, inside ``trainer.precision_plugin.forward_context()``) and
    sets each BatchNorm's ``running_mean``/``running_var`` to the pooled population statistics of all those
    batches. This is the estimator of ``fvcore.nn.precise_bn.update_bn_stats`` (per batch of ``n`` values per
    channel: mean ``m`` and unbiased variance ``v``; result ``mean = sum(n m) / sum(n)``,
    ``var = sum(n m^2 + (n - 1) v) / sum(n) - mean^2``), accumulated in float64 with fused foreach ops instead of
    per-layer Python work. Under ``torch.distributed`` the sums are all-reduced, so every rank gets the statistics
    of all ranks' batches.

    When: at the last training batch's ``on_train_batch_end`` (``trainer.is_last_batch``), i.e. before that
    epoch's validation and before epoch-end checkpoints (Lightning validates before ``on_train_epoch_end``). An
    epoch cut short by ``max_steps`` is not followed by a recomputation.

    Which layers: ``BatchNorm{1,2,3}d``/``SyncBatchNorm`` that are in training mode and track running stats
    (frozen, eval-mode BN layers are left alone). A layer that does not run in any of the batches keeps its
    statistics. Module modes, BN momenta, the global RNG state and the state of the dataloader's and its
    sampler's ``torch.Generator`` are restored afterwards, so training continues exactly as without this callback
    apart from the BN statistics. If the recomputation raises, the BN statistics are restored too.

    Batches come from ``trainer.train_dataloader`` (a new iterator; a single dataloader; when it has a length,
    ``on_train_start`` checks that it holds at least ``num_batches`` batches), are moved with
    ``trainer.strategy.batch_to_device`` (so ``transfer_batch_to_device`` and the batch-transfer hooks apply) and
    become model input by this rule: a ``tuple``/``list`` batch calls ``pl_module(batch[0])``; any other batch
    calls ``pl_module(batch)``. Pass ``forward_fn(pl_module, batch)`` for anything else (a ``dict`` batch, say).

    Args:
        num_batches: number of training batches to estimate the statistics from.
        every_n_epochs: recompute after every ``every_n_epochs``-th epoch.
        forward_fn: ``forward_fn(pl_module, batch)`` runs the model on one (device) batch.

    Example::

        >>> import torch, lightning.pytorch as pl
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> from lightning.pytorch.demos.boring_classes import BoringModel
        >>> from lightning_hooks.callbacks import PreciseBN
        >>> class Net(BoringModel):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.layer = torch.nn.Sequential(torch.nn.Linear(32, 2), torch.nn.BatchNorm1d(2))
        ...     def train_dataloader(self):
        ...         return DataLoader(TensorDataset(torch.randn(64, 32)), batch_size=8)
        ...     def training_step(self, batch, batch_idx):
        ...         return self(batch[0]).sum()
        >>> trainer = pl.Trainer(max_epochs=1, callbacks=[PreciseBN(num_batches=4)], logger=False,
        ...                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        >>> trainer.fit(Net())

    """

    def __init__(self, num_batches: int = 200, every_n_epochs: int = 1, forward_fn: ForwardFn | None = None) -> None:
        if not isinstance(num_batches, int) or num_batches < 1:
            raise ValueError(f"PreciseBN: `num_batches` must be an int >= 1, got {num_batches!r}.")
        if not isinstance(every_n_epochs, int) or every_n_epochs < 1:
            raise ValueError(f"PreciseBN: `every_n_epochs` must be an int >= 1, got {every_n_epochs!r}.")
        if forward_fn is not None and not callable(forward_fn):
            raise TypeError(
                f"PreciseBN: `forward_fn` must be callable as forward_fn(pl_module, batch), got {forward_fn!r}."
            )
        self.num_batches = num_batches
        self.every_n_epochs = every_n_epochs
        self.forward_fn = forward_fn or _default_forward
        self._warned_no_bn = False

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        loader = _train_loader(trainer)
        if not isinstance(loader, Sized):
            return  # no length: checked while recomputing
        try:
            available = len(loader)
        except TypeError:
            return  # a length that raises (an iterable dataset's): checked while recomputing
        if available < self.num_batches:
            raise ValueError(
                f"PreciseBN: the train dataloader has only {available} batches but `num_batches={self.num_batches}`. "
                f"Lower `num_batches` to at most {available} or use a longer dataloader."
            )

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.is_last_batch and (trainer.current_epoch + 1) % self.every_n_epochs == 0:
            self.recompute(trainer, pl_module)

    def recompute(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Recompute the statistics now from ``num_batches`` batches of ``trainer.train_dataloader``."""
        loader = _train_loader(trainer)
        with isolate_rng(), _keep_generator_states(loader):
            batches = (trainer.strategy.batch_to_device(b) for b in loader)
            self._recompute(pl_module, batches, trainer.precision_plugin.forward_context, "the train dataloader")

    def recompute_from(
        self,
        pl_module: pl.LightningModule,
        batches: Iterable[Any],
        forward_context: Callable[[], Any] | None = None,
    ) -> None:
        """Recompute the statistics from the first ``num_batches`` of ``batches`` (already on the device)."""
        self._recompute(pl_module, batches, forward_context, "`batches`")

    def _recompute(
        self,
        pl_module: pl.LightningModule,
        batches: Iterable[Any],
        forward_context: Callable[[], Any] | None,
        source: str,
    ) -> None:
        bns = [
            m for m in pl_module.modules() if isinstance(m, _BatchNorm) and m.training and m.running_mean is not None
        ]
        if not bns:
            if not self._warned_no_bn:
                rank_zero_warn("PreciseBN: the model has no BatchNorm layer in training mode; nothing to recompute.")
                self._warned_no_bn = True
            return
        modes = [(m, m.training) for m in pl_module.modules()]
        momenta = [bn.momentum for bn in bns]
        stats = [[t.clone() for t in _running_stats(bn)] for bn in bns]
        sizes = [0] * len(bns)
        names = {m: n for n, m in pl_module.named_modules()}
        handles = [bn.register_forward_pre_hook(_size_hook(sizes, i, names[bn])) for i, bn in enumerate(bns)]
        try:
            for bn in bns:
                bn.momentum = 1.0  # running stats := this batch's stats
            s1, s2, counts = self._accumulate(pl_module, bns, sizes, batches, forward_context, source)
            if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
                s1, s2, counts = _all_reduce(s1, s2, counts)
        except BaseException:
            with torch.no_grad():
                for bn, saved in zip(bns, stats, strict=True):
                    torch._foreach_copy_(_running_stats(bn), saved)
            raise
        finally:
            for h in handles:
                h.remove()
            for bn, momentum in zip(bns, momenta, strict=True):
                bn.momentum = momentum
            for m, training in modes:
                m.training = training
        with torch.no_grad():
            for bn, a, b, n in zip(bns, s1, s2, counts, strict=True):
                if n == 0:
                    continue  # layer never ran: keep its statistics
                mean = a / n
                running_mean, running_var = _mean_and_var(bn)
                running_mean.copy_(mean)
                running_var.copy_(b / n - mean * mean)

    @torch.no_grad()
    def _accumulate(
        self,
        pl_module: pl.LightningModule,
        bns: list[_BatchNorm],
        sizes: list[int],
        batches: Iterable[Any],
        forward_context: Callable[[], Any] | None,
        source: str,
    ) -> tuple[list[Tensor], list[Tensor], list[float]]:
        stats = [_mean_and_var(bn) for bn in bns]
        means, variances = [mean for mean, _ in stats], [var for _, var in stats]
        s1 = [torch.zeros_like(m, dtype=torch.float64) for m in means]
        s2 = [torch.zeros_like(m, dtype=torch.float64) for m in means]
        m64 = [torch.empty_like(m, dtype=torch.float64) for m in means]
        v64 = [torch.empty_like(m, dtype=torch.float64) for m in means]
        counts = [0.0] * len(bns)
        it = iter(batches)
        for k in range(self.num_batches):
            try:
                batch = next(it)
            except StopIteration:
                raise ValueError(
                    f"PreciseBN: {source} produced only {k} batches but `num_batches={self.num_batches}`. "
                    "Lower `num_batches` or provide more batches."
                ) from None
            sizes[:] = [0] * len(sizes)
            if forward_context is None:
                self.forward_fn(pl_module, batch)
            else:
                with forward_context():
                    self.forward_fn(pl_module, batch)
            n = [float(s) for s in sizes]
            torch._foreach_copy_(m64, means)
            torch._foreach_copy_(v64, variances)
            torch._foreach_addcmul_(s2, m64, m64, n)  # += n * m^2
            torch._foreach_mul_(v64, [max(x - 1.0, 0.0) for x in n])
            torch._foreach_add_(s2, v64)  # += (n - 1) * v
            torch._foreach_mul_(m64, n)
            torch._foreach_add_(s1, m64)  # += n * m
            counts = [c + x for c, x in zip(counts, n, strict=True)]
        return s1, s2, counts


def _train_loader(trainer: pl.Trainer) -> Iterable[Any]:
    loader = trainer.train_dataloader
    if loader is None or isinstance(loader, (Mapping, list, tuple)) or not isinstance(loader, Iterable):
        raise TypeError(
            f"PreciseBN: needs a single train dataloader, got {type(loader).__name__}. "
            "Use one DataLoader for training or call `recompute_from` with your own batches."
        )
    return loader


@contextmanager
def _keep_generator_states(loader: Iterable[Any]) -> Iterator[None]:
    """Restore the ``torch.Generator``s that a new ``iter(loader)`` advances (worker seed, shuffle order)."""
    sampler = getattr(loader, "sampler", None)
    batch_sampler = getattr(loader, "batch_sampler", None)
    owners = (loader, sampler, getattr(batch_sampler, "sampler", None))
    generators = {id(g): g for g in (getattr(o, "generator", None) for o in owners) if isinstance(g, torch.Generator)}
    states = [(g, g.get_state()) for g in generators.values()]
    try:
        yield
    finally:
        for g, state in states:
            g.set_state(state)


def _mean_and_var(bn: _BatchNorm) -> tuple[Tensor, Tensor]:
    """A layer's running mean and variance: PreciseBN keeps only layers that track them."""
    assert bn.running_mean is not None and bn.running_var is not None, "a BatchNorm layer without running statistics"
    return bn.running_mean, bn.running_var


def _running_stats(bn: _BatchNorm) -> list[Tensor]:
    return [t for t in (bn.running_mean, bn.running_var, bn.num_batches_tracked) if t is not None]


def _size_hook(sizes: list[int], i: int, name: str) -> Callable[[nn.Module, tuple[Any, ...]], None]:
    def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
        if sizes[i]:
            raise RuntimeError(
                f"PreciseBN: BatchNorm layer {name!r} ran more than once in one forward pass; its statistics cannot "
                "be estimated. Give each use its own BatchNorm layer."
            )
        x = args[0]
        sizes[i] = x.numel() // x.shape[1]

    return hook


def _all_reduce(
    s1: list[Tensor], s2: list[Tensor], counts: list[float]
) -> tuple[list[Tensor], list[Tensor], list[float]]:
    flat = torch.cat([t.flatten() for t in s1 + s2] + [torch.tensor(counts, dtype=torch.float64, device=s1[0].device)])
    dist.all_reduce(flat)
    out, offset = [], 0
    for t in s1 + s2:
        out.append(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()
    return out[: len(s1)], out[len(s1) :], flat[offset:].tolist()
