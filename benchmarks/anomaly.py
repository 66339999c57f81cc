"""AnomalyDetector step-time overhead in a real Lightning run, next to ``Trainer(detect_anomaly=True)``.

Same MLP (784-1024-1024-1024-10, batch 64, SGD momentum) trained by ``Trainer.fit`` three ways, round-robin:
plain, with ``AnomalyDetector()`` and with ``detect_anomaly=True``. Step time = steady-state time per training
batch (timestamps at ``on_train_batch_start`` after ``WARMUP`` steps); ratios are against the plain run of
the same round.

    .venv/bin/python benchmarks/anomaly.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from _common import median, round_robin  # noqa: E402
from lightning.pytorch.callbacks import Callback  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from lightning_hooks.callbacks import AnomalyDetector  # noqa: E402

WARMUP = 10


class MLP(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

    def training_step(self, batch, batch_idx):  # noqa: ANN001, ANN201
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):  # noqa: ANN201
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


class StepTimer(Callback):
    def __init__(self) -> None:
        self.stamps: list[float] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:  # noqa: ANN001
        self.stamps.append(time.perf_counter())

    def on_train_end(self, trainer, pl_module) -> None:  # noqa: ANN001
        self.stamps.append(time.perf_counter())

    def step_time(self) -> float:
        return (self.stamps[-1] - self.stamps[WARMUP]) / (len(self.stamps) - 1 - WARMUP)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="40 steps x 3 rounds instead of 80 x 7")
    args = parser.parse_args()
    torch.set_num_threads(2)
    warnings.filterwarnings("ignore")
    import logging

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    steps, rounds = (40, 3) if args.quick else (80, 7)
    data = DataLoader(TensorDataset(torch.randn(64 * steps, 784), torch.randint(0, 10, (64 * steps,))), batch_size=64)

    def run(callbacks: list[Callback], detect_anomaly: bool = False) -> float:
        timer = StepTimer()
        trainer = pl.Trainer(max_steps=steps, callbacks=[*callbacks, timer], detect_anomaly=detect_anomaly,
                             accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0)
        trainer.fit(MLP(), data)
        return timer.step_time()

    variants = {
        "plain Lightning": lambda: run([]),
        "AnomalyDetector()": lambda: run([AnomalyDetector()]),
        "Trainer(detect_anomaly=True)": lambda: run([], detect_anomaly=True),
    }
    run([])  # warm-up
    samples = round_robin(variants, rounds)
    print(f"MLP 784-1024x3-10 (2.91M params), batch 64, {steps} steps per fit ({WARMUP} warm-up), {rounds} rounds")
    print(f"{'variant':30s} {'median ms/step':>15s} {'x plain':>8s}")
    for name, ts in samples.items():
        ratio = median([t / p for t, p in zip(ts, samples["plain Lightning"])])
        print(f"{name:30s} {median(ts) * 1e3:15.2f} {ratio:8.3f}")


if __name__ == "__main__":
    main()
