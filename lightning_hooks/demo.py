"""``lightning-hooks demo``: a small real training run with legacy hooks from every family, on synthetic data.

A BatchNorm CNN learns to classify random 3x16x16 images labelled by a fixed random teacher network, on CPU. The
legacy hooks are real, unmodified classes from MMEngine, Classy Vision and iMIX, wrapped by ``adapt``; the run ends
with a table of what each hook did.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks import adapt
from lightning_hooks.core.adapter import LegacyHookAdapter


class DemoNet(pl.LightningModule):
    """Two conv + BatchNorm blocks and a linear classifier.

    Steps follow the convention every adapter understands: ``training_step`` returns the loss;
    ``validation_step`` returns ``{"loss", "output", "target"}``.
    """

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 4),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        x, y = batch
        output = self(x)
        loss = nn.functional.cross_entropy(output, y)
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", (output.argmax(1) == y).float().mean())
        return {"loss": loss, "output": output, "target": y}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


class SyntheticData(pl.LightningDataModule):
    """Random 3x16x16 images labelled (4 classes) by a fixed random teacher network; deterministic."""

    def __init__(self, n_train: int = 512, n_val: int = 128, batch_size: int = 32) -> None:
        super().__init__()
        self.n_train, self.n_val, self.batch_size = n_train, n_val, batch_size
        g = torch.Generator().manual_seed(0)
        teacher = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 4))
        with torch.no_grad():
            for p in teacher.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
            self.x = torch.randn(n_train + n_val, 3, 16, 16, generator=g) * 2 + 0.5
            self.y = teacher(self.x).argmax(1)

    def train_dataloader(self) -> DataLoader:
        data = TensorDataset(self.x[: self.n_train], self.y[: self.n_train])
        return DataLoader(data, batch_size=self.batch_size, shuffle=True, generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.x[self.n_train :], self.y[self.n_train :]), batch_size=self.batch_size)

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
            losses = [nn.functional.cross_entropy(model(x), y, reduction="sum") for x, y in self.val]
        return float(sum(losses) / len(self.val.dataset))

    def files(self, folder: str | os.PathLike) -> str:
        paths = sorted(p for p in Path(folder).rglob("*") if p.is_file())
        if not paths:
            return "no files"
        shown = ", ".join(p.name for p in paths[:4]) + (f", ... ({len(paths)} files)" if len(paths) > 4 else "")
        return f"{shown} in {os.path.relpath(folder)}"


def mmengine_hooks(out: Path) -> list[tuple[Any, Probe]]:
    from mmengine.hooks import EMAHook

    def ema(hook: Any, run: Run) -> str:
        ema_weights = {k.removeprefix("module."): v for k, v in hook.ema_model.state_dict().items() if k != "steps"}
        return f"EMA val loss {run.val_loss(ema_weights):.3f} vs raw {run.val_loss():.3f}"

    return [(EMAHook(momentum=0.01), ema)]


FAMILIES: dict[str, Callable[[Path], list[tuple[Any, Probe]]]] = {
    "mmengine": mmengine_hooks,
}


def run(out: Path, max_epochs: int = 3, progress_bar: bool = True) -> list[list[str]]:
    """Train with every family's demo hooks; return the report rows (hook, family, mount points, produced)."""
    pl.seed_everything(0, verbose=False)
    probes: dict[int, Probe] = {}
    hooks = []
    for build in FAMILIES.values():
        for hook, probe in build(out):
            hooks.append(hook)
            probes[id(hook)] = probe
    adapters = adapt(hooks, work_dir=out)
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


def format_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="lightning-hooks demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo_output"), help="folder for everything the hooks write")
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))
    start = time.perf_counter()
    rows = run(args.out, max_epochs=args.epochs)
    print(f"\nlightning-hooks demo: {args.epochs} epochs in {time.perf_counter() - start:.1f} s, outputs in {args.out}/\n")
    print(format_table(["hook", "family", "mount points fired", "what it produced"], rows))
