"""Shared helpers for the Classy / VISSL adapter tests: a tiny BN classifier, dict batches, a trainer factory, and
the Lightning side of the differential tests against Classy's real ClassificationTask (``ClassyNet``,
``lightning_run``; the Classy side is classy_real.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from classy_data import DictData


def loader(n: int = 16, seed: int = 0, batch_size: int = 4) -> DataLoader:
    return DataLoader(DictData(n, seed), batch_size=batch_size, shuffle=False)


class DictSteps(pl.LightningModule):
    """Cross-entropy steps on :class:`DictData` batches; the subclass's ``forward`` is the model."""

    def _step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        out = self(batch["input"])
        return {"loss": F.cross_entropy(out, batch["target"]), "output": out}

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        return self._step(batch)

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        return self._step(batch)

    def test_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        return self._step(batch)


class Net(DictSteps):
    """Linear-BN-ReLU-Linear on 4 features, 3 classes; records the weights every validation step sees."""

    def __init__(self, lr: float = 0.1, bn: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        layers = [nn.Linear(4, 8)] + ([nn.BatchNorm1d(8)] if bn else []) + [nn.ReLU(), nn.Linear(8, 3)]
        self.net = nn.Sequential(*layers)
        self.lr = lr
        self.input_shape = (4,)
        self.seen: list[dict[str, torch.Tensor]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        self.seen.append({k: v.clone() for k, v in self.net.state_dict().items()})
        return super().validation_step(batch, batch_idx)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def make_trainer(tmp_path: Any, callbacks: Sequence[Any], max_epochs: int = 2, **kwargs: Any) -> pl.Trainer:
    options = dict(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
    )
    options.update(kwargs)
    return pl.Trainer(callbacks=list(callbacks), **options)


class ClassyNet(DictSteps):
    """A LightningModule holding a real ``ClassyModel`` (``classy_real.TinyClassy``) as a Classy user would, with
    Classy's optimizer layout (SGD, momentum 0.9, non-BatchNorm parameters then BatchNorm ones, as
    ``ClassificationTask.prepare_optimizer``) and the spec's Classy LR schedule, per step or per epoch."""

    def __init__(self, spec: dict[str, Any]) -> None:
        from classy_real import TinyClassy

        super().__init__()
        self.model = TinyClassy()
        self.spec = spec
        self.input_shape = (4,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def configure_optimizers(self) -> dict[str, Any]:
        from classy_real import lr_scheduler, total_steps
        from classy_vision.generic.util import split_batchnorm_params

        bn, other = split_batchnorm_params(self.model)
        schedule, lr = lr_scheduler(self.spec), self.spec["lr"]
        base = schedule(0.0)
        opt = torch.optim.SGD([{"params": other}, {"params": bn}], lr=base, momentum=0.9)
        if lr["interval"] == "step":
            steps = total_steps(self.spec)
            factor, interval = (lambda s: schedule(min(s / steps, 1 - 1e-5)) / base), "step"
        else:
            epochs = self.spec["epochs"]
            factor, interval = (lambda e: schedule(min(e / epochs, 1 - 1e-5)) / base), "epoch"
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": scheduler, "interval": interval}}


def lightning_run(spec: dict[str, Any], folder: Any, ckpt_path: Any = None, **trainer_options: Any) -> dict[str, Any]:
    """Run ``spec`` under ``lightning.Trainer`` with ``ClassyAdapter`` (hooks and meters from the spec's Classy
    configs); return what the same ``classy_real.Recorder`` saw, the log lines, the hooks and the adapter."""
    import logging

    from classy_real import Recorder

    from lightning_hooks import ClassyAdapter

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    recorder = Recorder()
    adapter = ClassyAdapter([recorder, *spec.get("hooks", [])], meters=spec.get("meters"))
    train, test = spec.get("train", {"n": 16, "bs": 4}), spec.get("test", {"n": 8, "bs": 4})
    try:
        make_trainer(folder, [adapter], max_epochs=spec["epochs"], **trainer_options).fit(
            ClassyNet(spec),
            DataLoader(DictData(train["n"], 0), batch_size=train["bs"]),
            DataLoader(DictData(test["n"], 1), batch_size=test["bs"]),
            ckpt_path=ckpt_path,
        )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    return {"phases": recorder.phases, "start": recorder.start, "end": recorder.end, "log": lines, "adapter": adapter}
