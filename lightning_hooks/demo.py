"""``lightning-hooks demo``: a small real training run with legacy hooks from every family, on synthetic data.

A BatchNorm CNN learns to classify noisy synthetic 3x16x16 images, on CPU. The
legacy hooks are real, unmodified classes from MMEngine, Classy Vision and iMIX, wrapped by ``adapt``; the run ends
with a table of what each hook did.
"""

from __future__ import annotations

import argparse
import logging
import textwrap
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from typing_extensions import override

from lightning_hooks import adapt, families
from lightning_hooks.console import ProgressBar, configure_logging, quiet_upstream_notices
from lightning_hooks.core.demo import Probe, Run
from lightning_hooks.core.lightning_api import pl, submodule

if TYPE_CHECKING:  # the type checker reads `lightning.pytorch`; at run time the namespace lightning_api picked
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
else:
    CSVLogger, TensorBoardLogger = submodule("loggers").CSVLogger, submodule("loggers").TensorBoardLogger


class DemoNet(pl.LightningModule):
    """Two conv + BatchNorm blocks and a linear classifier.

    Batches are Classy-style ``{"input", "target"}`` dicts, which hooks of every family accept. Steps follow the
    convention every adapter understands: ``training_step`` returns the loss; ``validation_step`` and
    ``test_step`` return ``{"loss", "output", "target"}``.
    """

    def __init__(self, lr: float = 0.2) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4),
        )  # fmt: skip  # one block a line

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch["input"], batch["target"]
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        return self._evaluate(batch, "val")

    def test_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        return self._evaluate(batch, "test")

    def _evaluate(self, batch: dict[str, torch.Tensor], stage: str) -> dict[str, torch.Tensor]:
        x, y = batch["input"], batch["target"]
        output = self(x)
        loss = nn.functional.cross_entropy(output, y)
        self.log(f"{stage}_loss", loss, prog_bar=True)
        self.log(f"{stage}_acc", (output.argmax(1) == y).float().mean())
        return {"loss": loss, "output": output, "target": y}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)

    @torch.no_grad()
    def evaluate(self, loader: Iterable[dict[str, torch.Tensor]]) -> dict[str, float]:
        """Mean loss and accuracy over every sample of ``loader`` with the weights the model holds now."""
        training, total, loss, correct = self.training, 0, 0.0, 0.0
        self.eval()
        for batch in loader:
            x, y = batch["input"].to(self.device), batch["target"].to(self.device)
            output = self(x)
            loss += float(nn.functional.cross_entropy(output, y, reduction="sum"))
            correct += float((output.argmax(1) == y).sum())
            total += len(y)
        self.train(training)
        return {"loss": loss / total, "acc": correct / total}


class _Samples(Dataset):
    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input": self.x[i], "target": self.y[i]}


class SyntheticData(pl.LightningDataModule):
    """Noisy 3x16x16 images whose class (of 4) sets the mean of each colour channel; deterministic."""

    def __init__(self, n_train: int = 1024, n_val: int = 256, batch_size: int = 32, noise: float = 6.0) -> None:
        super().__init__()
        self.n_train, self.n_val, self.batch_size = n_train, n_val, batch_size
        g = torch.Generator().manual_seed(0)
        centers = torch.randn(4, 3, generator=g)
        self.y = torch.randint(0, 4, (n_train + n_val,), generator=g)
        self.x = torch.randn(n_train + n_val, 3, 16, 16, generator=g) * noise + centers[self.y][:, :, None, None]

    def train_dataloader(self) -> DataLoader:
        data = _Samples(self.x[: self.n_train], self.y[: self.n_train])
        return DataLoader(data, batch_size=self.batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(_Samples(self.x[self.n_train :], self.y[self.n_train :]), batch_size=self.batch_size)

    test_dataloader = val_dataloader


class ValidationCurves(pl.Callback):
    """Log the validation metrics of the EMA weights and of the raw weights side by side, every validation.

    For an EMA that validates on its weights and swaps the raw ones back by ``on_validation_end`` (MMEngine's
    ``EMAHook``, :class:`lightning_hooks.callbacks.EMA`); list it after them. The model's own ``val_loss`` and
    ``val_acc`` are then the EMA weights'; when validation ends the raw weights are measured on the same loader with
    the model's ``evaluate`` (as :class:`DemoNet` has). Every Lightning logger gets ``val_loss/ema``,
    ``val_loss/raw``, ``val_acc/ema`` and ``val_acc/raw`` at the global step; :attr:`history` keeps them for
    :func:`plot_curves`.
    """

    def __init__(self) -> None:
        self.history: list[dict[str, float]] = []

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        loader = trainer.val_dataloaders
        assert loader is not None, "validation has ended: its loader is set"
        raw = cast(DemoNet, pl_module).evaluate(loader)  # or any model with DemoNet's evaluate
        metrics: dict[str, float] = {"epoch": trainer.current_epoch + 1}
        for name in ("loss", "acc"):
            metrics[f"val_{name}/ema"] = float(trainer.callback_metrics[f"val_{name}"])
            metrics[f"val_{name}/raw"] = raw[name]
        self.history.append(metrics)
        for logger in trainer.loggers:
            logger.log_metrics({k: v for k, v in metrics.items() if k != "epoch"}, step=trainer.global_step)


def plot_curves(history: list[dict[str, float]], path: Path) -> None:
    """Write a PNG of the raw and EMA validation loss and accuracy per epoch (matplotlib's Agg canvas, no display)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 3.4), layout="constrained")
    epochs = [m["epoch"] for m in history]
    panels = zip(figure.subplots(1, 2), ("loss", "acc"), ("validation loss", "validation accuracy"), strict=True)
    for ax, name, label in panels:
        ax.plot(epochs, [m[f"val_{name}/raw"] for m in history], marker="o", label="raw weights")
        ax.plot(epochs, [m[f"val_{name}/ema"] for m in history], marker="o", label="EMA weights (MMEngine EMAHook)")
        ax.set(xlabel="epoch", ylabel=label, xticks=epochs)
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle("lightning-hooks demo: raw vs EMA weights on the validation set")
    figure.savefig(path, dpi=100)


def run(out: Path, max_epochs: int = 5) -> tuple[list[list[str]], ValidationCurves]:
    """Train with every family's demo hooks; return the report rows (hook, family, mount points, produced) and the
    validation curves (also logged to CSV and TensorBoard under ``out/lightning_logs``)."""
    pl.seed_everything(0, verbose=False)
    probes: dict[int, Probe] = {}
    hooks = []
    for family in families.registered():
        for hook, probe in family.demo_hooks(out) if family.demo_hooks else ():
            hooks.append(hook)
            probes[id(hook)] = probe
    adapters = adapt(hooks, work_dir=out, cfg={"log_config": {"period": 8}})
    curves = ValidationCurves()
    model, data = DemoNet(), SyntheticData()
    loggers = [CSVLogger(out, name="lightning_logs", version=0), TensorBoardLogger(out, name="lightning_logs", version=0)]
    trainer = pl.Trainer(
        max_epochs=max_epochs, callbacks=[*adapters, curves, ProgressBar()], default_root_dir=out, accelerator="cpu",
        devices=1, logger=loggers, log_every_n_steps=8, enable_checkpointing=False, enable_model_summary=False,
    )  # fmt: skip  # the Trainer's options on two lines, not one a line
    configure_logging(trainer)
    trainer.fit(model, data)
    result = Run(model, data.val_dataloader(), out, adapters)
    rows = []
    for adapter in adapters:
        for hook in adapter.hooks:
            fired = ", ".join(f"{m} x{n}" for m, n in adapter.mount_counts(hook).items())
            rows.append([type(hook).__name__, adapter.family, fired, probes[id(hook)](hook, result)])
    return rows, curves


LOSSES = """Which loss is which:
  MMEngine log lines  loss: mean training loss of the last 8 iterations (LoggerHook's window)
  progress bar        train_loss: the last batch's; val_loss: the last validation's, on the EMA weights
  table (EMAHook)     validation loss over all 256 validation samples after training, EMA vs raw weights
  plot                validation loss and accuracy after each epoch, EMA vs raw weights"""


def format_table(header: list[str], rows: list[list[str]], width: int = 60) -> str:
    """A plain-text table; cells longer than ``width`` wrap onto more lines."""
    cells = [[textwrap.wrap(str(c), width) or [""] for c in row] for row in [header, *rows]]
    widths = [max(len(line) for row in cells for line in row[i]) for i in range(len(header))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [rule]
    for n, row in enumerate(cells):
        for k in range(max(map(len, row))):
            padded = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(row, widths, strict=False)]
            out.append("| " + " | ".join(padded) + " |")
        if n == 0:
            out.append(rule.replace("-", "="))
    return "\n".join([*out, rule])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lightning-hooks demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo_output"), help="folder for everything the hooks write")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    quiet_upstream_notices()
    logging.getLogger(pl.__name__).setLevel(logging.WARNING)  # device banners
    start = time.perf_counter()
    rows, curves = run(args.out, max_epochs=args.epochs)
    plot = args.out / "val_curves.png"
    plot_curves(curves.history, plot)
    print(f"\nlightning-hooks demo: {args.epochs} epochs in {time.perf_counter() - start:.1f} s, outputs in {args.out}/\n")
    print(format_table(["hook", "family", "mount points fired", "what it produced"], rows))
    print(f"\n{LOSSES}\n\nRaw vs EMA validation curves: {plot} (and CSV/TensorBoard in {args.out / 'lightning_logs'})")
