"""Per-step cost of Lightning callbacks vs one adapter holding many legacy hooks.

Runs, round-robin in one process: (a) no callbacks, (b) N no-op Lightning callbacks, (c) one MMEngineAdapter holding
N legacy hooks that each override both per-iteration mount points with a no-op. Prints steps/s, the per-step
overhead of (b) and (c) over (a), their ratio, and the target: (c) <= one Lightning callback + 0.5 us per hook per
mount point fired.

Times are process CPU time (``time.process_time``) with single-threaded torch and no loader workers: all the work runs
in this thread, and CPU time is not inflated by other processes sharing the machine as wall time is.

    python benchmarks/dispatch.py [--hooks 20] [--steps 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings

import lightning.pytorch as pl
import torch
from mmengine.hooks import Hook
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import MMEngineAdapter

MOUNTS_PER_STEP = 2  # before_train_iter, after_train_iter


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 32)
        self.elapsed = 0.0

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).square().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

    def on_train_start(self) -> None:
        self.elapsed = time.process_time()

    def on_train_end(self) -> None:
        self.elapsed = time.process_time() - self.elapsed


class NoOpCallback(pl.Callback):
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        pass

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pass


class NoOpHook(Hook):
    def before_train_iter(self, runner, batch_idx, data_batch=None):
        pass

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        pass


def run(callbacks: list[pl.Callback], steps: int, data: DataLoader) -> float:
    """CPU seconds per step between on_train_start and on_train_end."""
    model = Tiny()
    trainer = pl.Trainer(
        max_steps=steps, callbacks=callbacks, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(model, data)
    return model.elapsed / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hooks", type=int, default=20)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    data = DataLoader(TensorDataset(torch.randn(args.steps * 8, 32)), batch_size=8)
    work_dir = tempfile.mkdtemp(prefix="dispatch-")  # the runner facade's log dir
    configs = {
        "a: no callbacks": lambda: [],
        f"b: {args.hooks} Lightning callbacks": lambda: [NoOpCallback() for _ in range(args.hooks)],
        f"c: 1 adapter, {args.hooks} legacy hooks": lambda: [
            MMEngineAdapter([NoOpHook() for _ in range(args.hooks)], work_dir=work_dir)
        ],
    }
    samples: dict[str, list[float]] = {name: [] for name in configs}
    run([], 50, data)  # warm-up
    for _ in range(args.rounds):
        for name, make in configs.items():
            samples[name].append(run(make(), args.steps, data))
    med = {name: statistics.median(s) for name, s in samples.items()}
    base, lightning_cbs, adapter = med.values()
    over_b, over_c = (lightning_cbs - base) * 1e6, (adapter - base) * 1e6
    per_callback = over_b / args.hooks
    budget = per_callback + 0.5 * args.hooks * MOUNTS_PER_STEP
    for name, seconds in med.items():
        print(f"{name:32s} {1 / seconds:8.0f} steps/s  {seconds * 1e6:8.1f} us/step")
    print(f"overhead per step: (b) {over_b:.1f} us = {per_callback:.2f} us per Lightning callback; (c) {over_c:.1f} us")
    print(f"ratio (b)/(c) = {over_b / over_c:.1f}x: one adapter with {args.hooks} hooks costs {over_c / per_callback:.2f} "
          f"Lightning callbacks")
    print(f"target (c) <= 1 callback + 0.5 us x {args.hooks} hooks x {MOUNTS_PER_STEP} mounts = {budget:.1f} us: "
          f"{'met' if over_c <= budget else 'NOT met'}")


if __name__ == "__main__":
    main()
