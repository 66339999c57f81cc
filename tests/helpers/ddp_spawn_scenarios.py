"""One fit with every family's adapter and the native callbacks under ``strategy="ddp_spawn"`` (CPU, gloo, 2 ranks).

Usage: ``python ddp_spawn_scenarios.py OUT_DIR PHASE...``, the phases one after the other in this process (each fit
spawns its ranks afresh): ``first`` trains one epoch and saves a Lightning checkpoint (Lightning's
``ModelCheckpoint``, written by rank 0 in the spawned process); ``resume`` continues it to two epochs with
``fit(ckpt_path=...)``, with callbacks built anew. ddp_spawn pickles the callbacks into
freshly spawned processes (where no instance was ever constructed), so each rank writes what it saw to
``{phase}_rank{r}.json``; ``tests/integration/ddp/test_spawn.py`` reads them and the files the hooks wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    """16 ``{"input", "target"}`` samples: 2 batches of 4 per rank and epoch."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input": self.x[i], "target": self.y[i]}


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.net(batch["input"])

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return F.cross_entropy(self(batch), batch["target"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Record(pl.Callback):
    """Writes, per rank, the restored state of every stateful callback at train start and the counters at the end."""

    def __init__(self, out: Path, phase: str) -> None:
        self.out, self.phase, self.seen = out, phase, {}

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.seen["epoch_at_start"] = trainer.current_epoch
        self.seen["state_keys"] = [c.state_key for c in trainer.callbacks if hasattr(c, "state_dict")]
        self.seen["ema_updates_at_start"] = next(c.num_updates for c in trainer.callbacks if type(c).__name__ == "EMA")
        adapters = {getattr(c, "family", None): c for c in trainer.callbacks}
        self.seen["mmengine_at_start"] = [adapters["mmengine"].runner.epoch, adapters["mmengine"].runner.iter]
        self.seen["imix_at_start"] = adapters["imix"].host.iter

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.seen["global_step"] = trainer.global_step
        (self.out / f"{self.phase}_rank{trainer.global_rank}.json").write_text(json.dumps(self.seen))


def callbacks(out: Path, phase: str) -> list[Any]:
    from classy_vision.hooks import CheckpointHook as ClassyCheckpoint
    from imix.engine.hooks import IterationTimerHook
    from mmengine.hooks import CheckpointHook

    from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter
    from lightning_hooks.callbacks import EMA, LossScaleMonitor, PreciseBN

    (out / "classy").mkdir(parents=True, exist_ok=True)
    return [
        MMEngineAdapter([CheckpointHook(interval=1)], work_dir=str(out / "mmengine")),
        ClassyAdapter([ClassyCheckpoint(str(out / "classy"), phase_types=["train"])]),
        IMIXAdapter([IterationTimerHook()]),
        EMA(decay=0.9), PreciseBN(num_batches=1), LossScaleMonitor(),
        Record(out, phase),
    ]


def main(out: Path, phase: str) -> None:
    resume = phase == "resume"
    trainer = pl.Trainer(
        strategy="ddp_spawn", accelerator="cpu", devices=2, max_epochs=2 if resume else 1,
        callbacks=callbacks(out, phase), default_root_dir=out, logger=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0,
    )
    loader = DataLoader(Data(), batch_size=4)
    ckpt_path = next((out / "checkpoints").glob("epoch=0-*.ckpt")) if resume else None
    trainer.fit(Net(), loader, ckpt_path=ckpt_path)


if __name__ == "__main__":
    for phase in sys.argv[2:]:
        main(Path(sys.argv[1]), phase)
