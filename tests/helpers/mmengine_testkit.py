"""Shared fixtures: one tiny mmengine ``BaseModel``, run under MMEngine's ``Runner`` and under Lightning + adapter."""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from mmengine.evaluator import BaseMetric, Evaluator
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.registry import DATASETS, HOOKS, METRICS, MODELS
from mmengine.runner import Runner
from lh_testing import load_options
from torch.utils.data import DataLoader, Dataset

from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks
from lightning_hooks.families.mmengine.module import MMEngineModule

_runs = itertools.count()

MOUNTS = (
    "before_run", "after_load_checkpoint", "before_train", "before_train_epoch", "before_train_iter",
    "after_train_iter", "after_train_epoch", "before_val", "before_val_epoch", "before_val_iter", "after_val_iter",
    "after_val_epoch", "after_val", "before_save_checkpoint", "after_train", "before_test", "before_test_epoch",
    "before_test_iter", "after_test_iter", "after_test_epoch", "after_test", "after_run",
)


@DATASETS.register_module(force=True)
class Points(Dataset):
    """``n`` fixed samples ``dict(inputs, labels)`` of a noisy linear function."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g)
        self.y = self.x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"inputs": self.x[i], "labels": self.y[i]}


@MODELS.register_module(force=True)
class Toy(BaseModel):
    """Linear regression as an MMEngine model: ``loss`` mode returns a loss dict, ``predict`` mode a list."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 1)
        self.register_buffer("seen", torch.zeros(()))

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = "tensor") -> Any:
        pred = self.linear(inputs)
        if mode == "loss":
            self.seen += len(inputs)
            return {"loss_mse": torch.nn.functional.mse_loss(pred, labels)}
        if mode == "predict":
            return [{"pred": p, "label": t} for p, t in zip(pred, labels)]
        return pred


@METRICS.register_module(force=True)
class ToyMSE(BaseMetric):
    default_prefix = "toy"

    def process(self, data_batch: Any, data_samples: list[dict]) -> None:
        self.results += [float((s["pred"] - s["label"]).pow(2).sum()) for s in data_samples]

    def compute_metrics(self, results: list[float]) -> dict[str, float]:
        return {"mse": sum(results) / len(results)}


@HOOKS.register_module(force=True)
class RecorderHook(Hook):
    """Records (mount point, runner.epoch, runner.iter, batch_idx) for every mount point, as the runner calls it."""

    priority = "VERY_HIGH"

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.metrics: list[dict] = []
        self.checkpoint_keys: list[list[str]] = []


def _recorder(mount: str) -> Callable[..., None]:
    def record(self: RecorderHook, runner: Any, **kwargs: Any) -> None:
        self.events.append((mount, runner.epoch, runner.iter, kwargs.get("batch_idx")))
        if "metrics" in kwargs:
            self.metrics.append(dict(kwargs["metrics"] or {}))
        if "checkpoint" in kwargs:
            self.checkpoint_keys.append(sorted(kwargs["checkpoint"]))

    return record


for _mount in MOUNTS:
    setattr(RecorderHook, _mount, _recorder(_mount))


class MMEngineSteps(pl.LightningModule):
    """Steps as MMEngine's loops run them on ``self.model``, with ``self.evaluator`` over each evaluation epoch."""

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        data = self.model.data_preprocessor(batch, True)
        _, log_vars = self.model.parse_losses(self.model._run_forward(data, mode="loss"))
        return log_vars

    def validation_step(self, batch: Any, batch_idx: int) -> list[dict]:
        outputs = self.model.val_step(batch)
        self.evaluator.process(data_samples=outputs, data_batch=batch)
        return outputs

    test_step = validation_step

    def on_validation_epoch_end(self) -> None:
        loader = self.trainer.test_dataloaders if self.trainer.testing else self.trainer.val_dataloaders
        self.log_dict(self.evaluator.evaluate(len(loader.dataset)))

    on_test_epoch_end = on_validation_epoch_end


class LitToy(MMEngineModule):
    """The same ``Toy`` trained by Lightning as MMEngine's loops train it (lightning-hooks' ``MMEngineModule``): the
    model's ``train_step`` with an MMEngine ``OptimWrapper`` of SGD, the ``ToyMSE`` evaluator in validation and test."""

    def __init__(self, model: Toy, lr: float = 0.1, momentum: float = 0.0) -> None:
        evaluator = Evaluator([ToyMSE()])
        super().__init__(model, optim_wrapper=dict(optimizer=dict(type="SGD", lr=lr, momentum=momentum)),
                         val_evaluator=evaluator, test_evaluator=evaluator)  # fmt: skip
        self.lr, self.momentum = lr, momentum


def make_model(seed: int = 0) -> Toy:
    torch.manual_seed(seed)
    return Toy()


def loaders(n_train: int = 16, n_val: int = 8, batch_size: int = 4) -> tuple[DataLoader, DataLoader]:
    return (
        DataLoader(Points(n_train, 1), batch_size=batch_size, shuffle=False),
        DataLoader(Points(n_val, 2), batch_size=batch_size, shuffle=False),
    )


def run_mmengine(
    work_dir: str | os.PathLike,
    default_hooks: dict | None = None,
    custom_hooks: list | None = None,
    max_epochs: int = 3,
    param_scheduler: Any = None,
    model: Toy | None = None,
    resume_from: str | None = None,
    val: bool = True,
    train: DataLoader | None = None,
    train_cfg: dict | None = None,
    log_processor: dict | None = None,
    load_from: str | None = None,
) -> Runner:
    """Train ``Toy`` with MMEngine's own Runner and return it (hooks in ``runner.hooks``); ``train`` replaces the
    train loader of :func:`loaders`, ``train_cfg`` the epoch-based loop of ``max_epochs``; ``load_from`` loads
    weights only, ``resume_from`` resumes."""
    default_train, val_loader = loaders()
    train = train or default_train
    runner = Runner(
        model=copy.deepcopy(model) if model is not None else make_model(),
        work_dir=os.fspath(work_dir),
        train_dataloader=train,
        val_dataloader=val_loader if val else None,
        val_cfg=dict() if val else None,
        val_evaluator=dict(type="ToyMSE") if val else None,
        train_cfg=train_cfg or dict(by_epoch=True, max_epochs=max_epochs, val_interval=1),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1, momentum=0.0)),
        param_scheduler=param_scheduler,
        default_hooks=copy.deepcopy(default_hooks),
        custom_hooks=copy.deepcopy(custom_hooks),
        load_from=resume_from or load_from,
        resume=resume_from is not None,
        experiment_name=f"mm-{next(_runs)}",
        log_processor=log_processor,
    )
    runner.train()
    return runner


def run_lightning(
    work_dir: str | os.PathLike,
    default_hooks: dict | None = None,
    custom_hooks: list | None = None,
    max_epochs: int = 3,
    param_schedulers: Any = None,
    model: Toy | None = None,
    resume_from: str | None = None,
    val: bool = True,
    train: DataLoader | None = None,
    train_cfg: dict | None = None,
    log_processor: dict | None = None,
    load_from: str | None = None,
    **trainer_kwargs: Any,
) -> tuple[pl.Trainer, MMEngineAdapter, LitToy]:
    """Train the same ``Toy`` with Lightning + adapter, built from the same hook config; with ``train_cfg`` the
    Trainer's loop arguments are the adapter's (``trainer_kwargs()``) instead of ``max_epochs``."""
    default_train, val_loader = loaders()
    train = train or default_train
    adapter = MMEngineAdapter(
        build_hooks(default_hooks=default_hooks, custom_hooks=custom_hooks),
        work_dir=work_dir,
        param_schedulers=param_schedulers,
        train_cfg=train_cfg,
        log_processor=log_processor,
        load_from=load_from,
    )
    if train_cfg is not None:
        trainer_kwargs = {**adapter.trainer_kwargs(), **trainer_kwargs}
    else:
        trainer_kwargs.setdefault("max_epochs", max_epochs)
    module = LitToy(copy.deepcopy(model) if model is not None else make_model())
    trainer = pl.Trainer(
        callbacks=[adapter],
        default_root_dir=work_dir,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_kwargs,
    )
    # checkpoints hold MMEngine objects (MessageHub history buffers): torch.load needs weights_only=False
    trainer.fit(module, train, val_loader if val else None, ckpt_path=resume_from, **load_options(resume_from and False))
    return trainer, adapter, module


def hook_of(hooks: list, cls: type) -> Any:
    return next(h for h in hooks if type(h) is cls)


def files(directory: str | os.PathLike, suffix: str = ".pth") -> set[str]:
    return {f for f in os.listdir(directory) if f.endswith(suffix)}


def unprefixed(state: dict[str, Any]) -> dict[str, Any]:
    """A Lightning-side state dict keyed like the MMEngine side (``LitToy`` holds ``Toy`` as ``.model``)."""
    out = {}
    for k, v in state.items():
        if k.startswith("model."):
            k = k[len("model."):]
        elif k.startswith("module.model."):
            k = "module." + k[len("module.model."):]
        out[k] = v
    return out


def assert_same_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-6, atol=1e-7, msg=k)
