"""Train with one family's checkpoint hook and get SIGKILLed halfway through its second checkpoint write.

    python reliability_kill_family_save.py OUT mmengine|classy|imix

Checkpoints of epoch 0 are written completely; in the first ``torch.save`` of epoch 1 half of the serialized bytes
reach the file it was given and the process kills itself, as a crash or ``kill -9`` would.
Each family writes with its own code: MMEngine's ``CheckpointHook`` through ``runner.save_checkpoint`` (the facade),
Classy's ``CheckpointHook`` and iMIX's ``CheckPointHook`` with the libraries' own writers.
"""

from __future__ import annotations

import io
import os
import signal
import sys

import lightning.pytorch as pl
import torch
from reliability_kit import fit
from reliability_resume_run import Net

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter


class DieHalfwayFromEpoch1(pl.Callback):
    def __init__(self) -> None:
        self.armed = False
        save = torch.save

        def torch_save(obj, f, *args, **kwargs):
            if not self.armed:
                return save(obj, f, *args, **kwargs)
            _write_half_and_die(save, obj, f, *args, **kwargs)

        torch.save = torch_save

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.armed = trainer.current_epoch == 1


def _write_half_and_die(save, obj, f, *args, **kwargs) -> None:
    buffer = io.BytesIO()
    save(obj, buffer, *args, **kwargs)
    data = buffer.getvalue()
    if hasattr(f, "write"):
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
    else:
        with open(f, "wb") as out:
            out.write(data[: len(data) // 2])
    os.kill(os.getpid(), signal.SIGKILL)


def main(out: str, family: str) -> None:
    model = Net()
    if family == "mmengine":
        from mmengine.hooks import CheckpointHook

        adapter = MMEngineAdapter([CheckpointHook(interval=1)], work_dir=out)
    elif family == "classy":
        from classy_vision.hooks import CheckpointHook

        adapter = ClassyAdapter([CheckpointHook(out)])
    else:
        from imix.engine.hooks import CheckPointHook
        from imix.utils.checkpoint import Checkpointer

        adapter = IMIXAdapter([CheckPointHook(Checkpointer(model, save_dir=out), prefix="net", epoch_period=1)])
    fit(out, [DieHalfwayFromEpoch1(), adapter], model=model, max_epochs=2)


if __name__ == "__main__":
    main(*sys.argv[1:])
