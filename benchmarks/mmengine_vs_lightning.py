"""Train speed of MMEngine's Runner vs lightning.Trainer + MMEngineAdapter on the same model, data and hooks.

Both hosts run MMEngine's default hooks (RuntimeInfo, IterTimer, DistSamplerSeed, Logger, ParamScheduler,
Checkpoint every epoch) plus EMAHook; a timing hook (highest priority, in both) measures ``before_train`` to
``after_train``, single-threaded torch. Prints it/s of both and their ratio (median of interleaved repeats), and
both hosts without hooks, to separate the hooks' cost from each loop's own per-step cost.

    python benchmarks/mmengine_vs_lightning.py [--epochs 3] [--samples 1024] [--repeats 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings

import lightning.pytorch as pl
import torch
from mmengine.hooks import Hook
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks

DEFAULT_HOOKS = dict(logger=dict(type="LoggerHook", interval=50))
CUSTOM_HOOKS = [dict(type="EMAHook")]


class MLP(BaseModel):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, 1))

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = "tensor"):
        pred = self.net(inputs)
        if mode == "loss":
            return {"loss_mse": torch.nn.functional.mse_loss(pred, labels)}
        return pred


class LitMLP(pl.LightningModule):
    def __init__(self, model: MLP) -> None:
        super().__init__()
        self.model = model

    def training_step(self, batch, batch_idx):
        inputs, labels = batch
        _, log_vars = self.model.parse_losses(self.model(inputs, labels, mode="loss"))
        return log_vars

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class MMLoader(DataLoader):
    """Batches as keyword dicts for ``BaseModel.train_step`` (the Runner side)."""

    def __iter__(self):
        for inputs, labels in super().__iter__():
            yield {"inputs": inputs, "labels": labels}


class Clock(Hook):
    priority = "HIGHEST"

    def before_train(self, runner) -> None:
        self.start = time.perf_counter()

    def after_train(self, runner) -> None:
        self.seconds = time.perf_counter() - self.start


def data(samples: int) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(samples, 32, generator=g)
    return TensorDataset(x, x.sum(1, keepdim=True))


def run_runner(epochs: int, samples: int, width: int, work_dir: str, hooks: bool = True) -> float:
    torch.manual_seed(0)
    clock = Clock()
    no_hooks = dict.fromkeys(("runtime_info", "timer", "sampler_seed", "logger", "param_scheduler", "checkpoint"))
    runner = Runner(
        model=MLP(width), work_dir=work_dir, train_dataloader=MMLoader(data(samples), batch_size=8),
        train_cfg=dict(by_epoch=True, max_epochs=epochs), optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.01)),
        default_hooks=DEFAULT_HOOKS if hooks else no_hooks, custom_hooks=[*CUSTOM_HOOKS, clock] if hooks else [clock],
        log_level="WARNING",
        experiment_name=f"bench-runner-{time.monotonic_ns()}",
    )
    runner.train()
    return epochs * len(runner.train_dataloader) / clock.seconds


class LightningClock(pl.Callback):
    def on_train_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()

    def on_train_end(self, trainer, pl_module) -> None:
        self.seconds = time.perf_counter() - self.start


def run_bare_lightning(epochs: int, samples: int, width: int, work_dir: str) -> float:
    """Lightning alone, no adapter and no hooks: its own per-step cost, for reference."""
    torch.manual_seed(0)
    clock = LightningClock()
    trainer = pl.Trainer(
        callbacks=[clock], max_epochs=epochs, default_root_dir=work_dir, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    loader = DataLoader(data(samples), batch_size=8)
    trainer.fit(LitMLP(MLP(width)), loader)
    return epochs * len(loader) / clock.seconds


def run_lightning(epochs: int, samples: int, width: int, work_dir: str) -> float:
    torch.manual_seed(0)
    clock = Clock()
    adapter = MMEngineAdapter(
        build_hooks(default_hooks=DEFAULT_HOOKS, custom_hooks=[*CUSTOM_HOOKS, clock]), work_dir=work_dir,
        log_level="WARNING",
    )
    trainer = pl.Trainer(
        callbacks=[adapter], max_epochs=epochs, default_root_dir=work_dir, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )
    loader = DataLoader(data(samples), batch_size=8)
    trainer.fit(LitMLP(MLP(width)), loader)
    return epochs * len(loader) / clock.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=int, default=64, help="hidden width of the MLP (compute per step)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # tiny model: intra-op threads only add contention noise to both hosts
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    MMLogger.get_current_instance().setLevel(logging.WARNING)

    hosts = {
        "runner": run_runner,
        "lightning": run_lightning,
        "bare runner": lambda *a: run_runner(*a, hooks=False),
        "bare lightning": run_bare_lightning,
    }
    speeds: dict[str, list[float]] = {name: [] for name in hosts}
    with tempfile.TemporaryDirectory() as tmp:
        for name, run in hosts.items():
            run(1, 64, args.width, f"{tmp}/warm-{name}")
        for i in range(args.repeats):
            for name, run in hosts.items():
                speeds[name].append(run(args.epochs, args.samples, args.width, f"{tmp}/{name}{i}"))
    runner, lightning, bare_runner, bare = (statistics.median(speeds[name]) for name in hosts)
    iters = args.epochs * (args.samples // 8)
    print(f"hooks: MMEngine default hooks + EMAHook; MLP width {args.width}; {iters} iterations per run, "
          f"median of {args.repeats}")
    print(f"mmengine Runner:              {runner:8.1f} it/s")
    print(f"lightning + MMEngineAdapter:  {lightning:8.1f} it/s")
    print(f"ratio lightning/runner:       {lightning / runner:8.2f}")
    print(f"without hooks: Runner {bare_runner:.1f} it/s, Lightning {bare:.1f} it/s; the hooks cost "
          f"{1e6 / runner - 1e6 / bare_runner:.0f} us/it under the Runner, "
          f"{1e6 / lightning - 1e6 / bare:.0f} us/it under Lightning + adapter")


if __name__ == "__main__":
    main()
