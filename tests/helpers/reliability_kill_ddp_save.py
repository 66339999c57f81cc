"""Two ranks (CPU, gloo) train with MMEngine's ``CheckpointHook``; rank 0 is SIGKILLed halfway through its second
checkpoint write, or the run resumes from the first checkpoint. Run by the fault-injection tests.

    python reliability_kill_ddp_save.py OUT ddp|ddp_spawn kill|resume

``kill``: epoch 1's checkpoint is written completely; in epoch 2 half of the serialized bytes reach the file and rank
0 kills itself, as a crash or ``kill -9`` would (rank 1 is then left waiting: the test ends it). ``resume``: both
ranks continue from ``OUT/epoch_1.pth`` with ``trainer.fit(ckpt_path=...)`` to epoch 3 and write ``OUT/resumed.json``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class DieHalfwayInEpoch2OnRank0(pl.Callback):
    """Arms a ``torch.save`` that writes half its bytes and SIGKILLs the process, on rank 0 in the second epoch."""

    def __init__(self) -> None:
        self.armed = False

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.global_rank == 0 and trainer.current_epoch == 1 and not self.armed:
            self.armed = True
            save = torch.save

            def half_then_die(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
                buffer = io.BytesIO()
                save(obj, buffer, *args, **kwargs)
                data = buffer.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)

            torch.save = half_then_die


class Record(pl.Callback):
    def __init__(self, out: Path) -> None:
        self.out, self.seen = out, {}

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        runner = next(c for c in trainer.callbacks if getattr(c, "family", None) == "mmengine").runner
        self.seen["start"] = [trainer.current_epoch, runner.epoch, runner.iter]

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.seen["end"] = [trainer.current_epoch, trainer.global_step]
        if trainer.global_rank == 0:
            (self.out / "resumed.json").write_text(json.dumps(self.seen))


def main(out: Path, strategy: str, phase: str) -> None:
    from mmengine.hooks import CheckpointHook

    from lightning_hooks import MMEngineAdapter

    resume = phase == "resume"
    callbacks = [MMEngineAdapter([CheckpointHook(interval=1)], work_dir=str(out))]
    callbacks.append(Record(out) if resume else DieHalfwayInEpoch2OnRank0())
    trainer = pl.Trainer(
        strategy=strategy, accelerator="cpu", devices=2, max_epochs=3, callbacks=callbacks, default_root_dir=out,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    g = torch.Generator().manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)), batch_size=4)
    trainer.fit(Net(), data, ckpt_path=out / "epoch_1.pth" if resume else None)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
