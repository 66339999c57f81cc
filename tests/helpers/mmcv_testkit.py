"""Differential harness for the mmcv 1.x family: the same model, data and hooks through mmcv's own
``EpochBasedRunner`` / ``IterBasedRunner`` and through ``MMCVAdapter`` in ``lightning.Trainer``.

mmcv 1.x lives in ``.venv-mmcv1`` only (``bash scripts/setup.sh test``; the main venv has mmcv-lite 2.x, whose
``mmcv`` has no ``runner``): importing this module elsewhere skips the test module that imports it.
"""

from __future__ import annotations

import copy
import importlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

mmcv_runner = pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (bash scripts/setup.sh test)")

import lightning.pytorch as pl  # noqa: E402

from lightning_hooks import MMCVAdapter  # noqa: E402


def import_with_stubbed_ops(*modules: str) -> list[Any]:
    """Import OpenMMLab 1.x modules whose import reaches mmcv's compiled ops, with ``mmcv._ext`` stubbed while they
    import (tests/helpers/openmmlab_stubs.py)."""
    from openmmlab_stubs import stubs

    with stubs():
        return [importlib.import_module(module) for module in modules]


def stub_collect_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libraries' ``collect_env`` asks mmcv's compiled ops, once imported with the stubs, for their compiler
    versions: answer "n/a"."""
    import sys

    ops = sys.modules.get("mmcv.ops")
    if ops is not None:
        for name in ("get_compiler_version", "get_compiling_cuda_version"):
            monkeypatch.setattr(ops, name, lambda: "n/a")


def fresh_root_logger(library: str) -> None:
    """mmcv's ``get_logger`` sets a library's logger up once per process: let the next run's ``get_root_logger`` open
    its own log file."""
    from mmcv.utils import logging as mmcv_logging

    logger = logging.getLogger(library)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    mmcv_logging.logger_initialized.pop(library, None)

class RunStopped(Exception):
    """Raised by the ``StopAfterIters`` hook: the run ends there, as if killed (no ``after_run``)."""


@mmcv_runner.HOOKS.register_module(force=True)
class StopAfterIters(mmcv_runner.Hook):
    """Ends a run after its ``iters``-th train iteration (``custom_hooks = [dict(type='StopAfterIters', iters=3,
    priority='LOWEST')]``: after that iteration's checkpoint), to resume from a checkpoint written mid-epoch."""

    def __init__(self, iters: int) -> None:
        self.iters = iters

    def after_train_iter(self, runner: Any) -> None:
        if runner.iter + 1 == self.iters:
            raise RunStopped(f"stopped after iteration {self.iters}")


N_BATCHES = 5
BATCH = 4
TIMESTAMP = "20260101_000000"
#: what the recorder notes at each mount point
MOUNTS = ("before_run", "before_epoch", "before_train_epoch", "before_train_iter", "after_train_iter",
          "after_train_epoch", "before_val_epoch", "before_val_iter", "after_val_iter", "after_val_epoch",
          "after_epoch", "after_run")  # fmt: skip


class ToyModel(torch.nn.Module):
    """An mmcv model: ``train_step`` / ``val_step`` return mmcv's output dict."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)

    def train_step(self, data: Any, optimizer: Any = None) -> dict[str, Any]:
        x, y = data
        loss = torch.nn.functional.mse_loss(self(x), y)
        return dict(loss=loss, log_vars=OrderedDict(loss=loss.item()), num_samples=len(x))

    def val_step(self, data: Any, optimizer: Any = None) -> dict[str, Any]:
        return self.train_step(data, optimizer)


class Module(pl.LightningModule):
    """The LightningModule a user of ``ToyModel`` writes: its steps call mmcv's."""

    def __init__(self, model: ToyModel, optimizer: Callable[..., torch.optim.Optimizer]) -> None:
        super().__init__()
        self.model = model
        self.make_optimizer = optimizer

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        return self.model.train_step(batch, None)

    def validation_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        return self.model.val_step(batch, None)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.make_optimizer(self.model.parameters())


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def loader(n_batches: int = N_BATCHES, seed: int = 1, batch_size: int = BATCH) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batches * batch_size, 4, generator=g)
    y = x.sum(1, keepdim=True) + 0.1 * torch.randn(n_batches * batch_size, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=False)


class Recorder(mmcv_runner.Hook):
    """Notes, at every mount point, the counters, mode, loader length, learning rate and momentum it sees."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def _note(self, mount: str, runner: Any) -> None:
        optimizer = runner.optimizer
        lr = round(optimizer.param_groups[0]["lr"], 10)
        momentum = round(optimizer.param_groups[0].get("momentum", 0.0), 10)
        length = len(runner.data_loader) if mount not in ("before_run", "after_run", "before_epoch") else None
        self.seen.append((mount, runner.epoch, runner.iter, runner.inner_iter, runner.mode, length, lr, momentum))


for _mount in MOUNTS:
    setattr(Recorder, _mount, lambda self, runner, _m=_mount: self._note(_m, runner))


def quiet_logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger


def run_mmcv(hooks: list[Any] | Callable[[Any], None], work_dir: Path, *, runner: str = "EpochBasedRunner",
             max_epochs: int | None = 2, max_iters: int | None = None, val: bool = False, seed: int = 0,
             optimizer: Callable[..., torch.optim.Optimizer] = sgd, meta: dict | None = None,
             train_batches: int = N_BATCHES, resume_from: Path | None = None, batch_size: int = BATCH) -> Any:  # fmt: skip
    """mmcv's own runner on :class:`ToyModel`; ``hooks``: hooks registered at their ``priority`` attribute (NORMAL
    without one), or a function that registers them (``lambda r: r.register_training_hooks(...)``)."""
    torch.manual_seed(seed)
    model = ToyModel()
    kind = getattr(mmcv_runner, runner)
    limits = dict(max_epochs=max_epochs) if runner == "EpochBasedRunner" else dict(max_iters=max_iters)
    real = kind(model, optimizer=optimizer(model.parameters()), work_dir=str(work_dir),
                logger=quiet_logger("mmcv-reference"), meta=copy.deepcopy(meta), **limits)  # fmt: skip
    real.timestamp = TIMESTAMP
    if callable(hooks):
        hooks(real)
    else:
        for hook in hooks:
            priority = vars(hook).pop("priority", "NORMAL")
            real.register_hook(hook, priority=priority)
    if resume_from is not None:
        real.resume(str(resume_from), map_location="cpu")
    loaders = [loader(train_batches, batch_size=batch_size)] + ([loader(2, seed=2)] if val else [])
    workflow = [("train", 1)] + ([("val", 1)] if val else [])
    with mock.patch("time.sleep"):
        real.run(loaders, workflow)
    return real


def run_lightning(adapter: MMCVAdapter, work_dir: Path, *, seed: int = 0, val: bool = False,
                  optimizer: Callable[..., torch.optim.Optimizer] = sgd, train_batches: int = N_BATCHES,
                  model: type[torch.nn.Module] = ToyModel, configure: Callable[[pl.Trainer], None] | None = None,
                  **trainer_kwargs: Any) -> pl.Trainer:  # fmt: skip
    """``adapter`` in a Lightning fit of the same model and data as :func:`run_mmcv`."""
    torch.manual_seed(seed)
    module = Module(model(), optimizer)
    adapter.runner.timestamp = TIMESTAMP
    options = dict(logger=False, enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                   default_root_dir=work_dir, accelerator="cpu", num_sanity_val_steps=0,
                   limit_val_batches=None if val else 0)  # fmt: skip
    options = {k: v for k, v in options.items() if v is not None}
    options.update(adapter.trainer_kwargs())
    options.update(trainer_kwargs)
    trainer = pl.Trainer(callbacks=[adapter], **options)
    if configure is not None:
        configure(trainer)
    trainer.fit(module, loader(train_batches), loader(2, seed=2) if val else None)
    return trainer


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6, msg=key)
