"""``lightning-hooks demo``: a small real training run with legacy hooks from every family, on synthetic data.

A BatchNorm CNN learns to classify noisy synthetic 3x16x16 images, on CPU. The
legacy hooks are real, unmodified classes from MMEngine, Classy Vision and iMIX, wrapped by ``adapt``; the run ends
with a table of what each hook did.
"""

from __future__ import annotations

import argparse
import logging
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from lightning_hooks import adapt, families
from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.lightning_api import pl


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
        )  # fmt: skip

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


Probe = Callable[[Any, "Run"], str]


class Run:
    """What the demo knows after training: the model, the loaders, the output folder and the adapters."""

    def __init__(self, model: DemoNet, val: DataLoader, out: Path, adapters: list[LegacyHookAdapter]) -> None:
        self.model, self.val, self.out, self.adapters = model, val, out, adapters

    def val_loss(self, state_dict: dict[str, torch.Tensor] | None = None) -> float:
        """Validation loss of the trained model, or of the same architecture holding ``state_dict``."""
        model = self.model
        if state_dict is not None:
            model = DemoNet()
            model.load_state_dict(state_dict)
        model.eval()
        with torch.no_grad():
            losses = [nn.functional.cross_entropy(model(b["input"]), b["target"], reduction="sum") for b in self.val]
        return float(sum(losses) / len(self.val.dataset))

    def adapter(self, family: str) -> LegacyHookAdapter:
        return next(a for a in self.adapters if a.family == family)

    def files(self, folder: str | os.PathLike, pattern: str = "*") -> str:
        paths = sorted(p for p in Path(folder).rglob(pattern) if p.is_file())
        if not paths:
            return "no files"
        shown = ", ".join(p.name for p in paths[:4]) + (f", ... ({len(paths)} files)" if len(paths) > 4 else "")
        return f"{shown} in {os.path.relpath(folder)}"


def run(out: Path, max_epochs: int = 5, progress_bar: bool = True) -> list[list[str]]:
    """Train with every family's demo hooks; return the report rows (hook, family, mount points, produced)."""
    pl.seed_everything(0, verbose=False)
    probes: dict[int, Probe] = {}
    hooks = []
    for family in families.registered():
        for hook, probe in family.demo_hooks(out) if family.demo_hooks else ():
            hooks.append(hook)
            probes[id(hook)] = probe
    adapters = adapt(hooks, work_dir=out, cfg={"log_config": {"period": 8}})
    model, data = DemoNet(), SyntheticData()
    trainer = pl.Trainer(
        max_epochs=max_epochs, callbacks=list(adapters), default_root_dir=out, accelerator="cpu", devices=1, logger=False,
        enable_checkpointing=False, enable_model_summary=False, enable_progress_bar=progress_bar,
    )  # fmt: skip
    trainer.fit(model, data)
    result = Run(model, data.val_dataloader(), out, adapters)
    rows = []
    for adapter in adapters:
        for hook in adapter.hooks:
            fired = ", ".join(f"{m} x{n}" for m, n in adapter.mount_counts(hook).items())
            rows.append([type(hook).__name__, adapter.family, fired, probes[id(hook)](hook, result)])
    return rows


def format_table(header: list[str], rows: list[list[str]], width: int = 60) -> str:
    """A plain-text table; cells longer than ``width`` wrap onto more lines."""
    cells = [[textwrap.wrap(str(c), width) or [""] for c in row] for row in [header, *rows]]
    widths = [max(len(line) for row in cells for line in row[i]) for i in range(len(header))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [rule]
    for n, row in enumerate(cells):
        for k in range(max(map(len, row))):
            out.append("| " + " | ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(row, widths)) + " |")
        if n == 0:
            out.append(rule.replace("-", "="))
    return "\n".join([*out, rule])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lightning-hooks demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo_output"), help="folder for everything the hooks write")
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # device and tip banners
    start = time.perf_counter()
    rows = run(args.out, max_epochs=args.epochs)
    print(f"\nlightning-hooks demo: {args.epochs} epochs in {time.perf_counter() - start:.1f} s, outputs in {args.out}/\n")
    print(format_table(["hook", "family", "mount points fired", "what it produced"], rows))
