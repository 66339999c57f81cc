"""Write a checkpoint, then get SIGKILLed halfway through writing the next one to the same path; run by the tests.

    python reliability_kill_during_save.py PATH atomic|default

``atomic`` saves through ``AtomicCheckpointIO``: the kill lands while ``torch.save`` writes its temporary file.
``default`` saves through Lightning's ``TorchCheckpointIO``, which stages the file in ``$TMPDIR`` and moves it into
place; the script simulates a ``$TMPDIR`` on another filesystem (``os.rename`` fails with EXDEV, as it does there),
so the move copies, and the kill lands halfway through that copy.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import signal
import sys
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_hooks.callbacks import AtomicCheckpointIO


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(64, 64)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _half_then_die(data: bytes, path_or_file: Any) -> None:
    with contextlib.nullcontext(path_or_file) if hasattr(path_or_file, "write") else open(path_or_file, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        os.fsync(f.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def main(path: str, io_kind: str) -> None:
    plugins = [AtomicCheckpointIO()] if io_kind == "atomic" else []
    trainer = pl.Trainer(max_steps=1, plugins=plugins, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=os.path.dirname(path))
    model = Tiny()
    trainer.fit(model, torch.utils.data.DataLoader(torch.randn(4, 64), batch_size=2))
    trainer.save_checkpoint(path)  # complete
    with torch.no_grad():
        model.layer.weight.fill_(7.0)
    if io_kind == "atomic":
        save = torch.save

        def torch_save(obj, f, *args, **kwargs):
            buffer = io.BytesIO()
            save(obj, buffer, *args, **kwargs)
            _half_then_die(buffer.getvalue(), f)

        torch.save = torch_save
    else:
        def rename(src, dst, *args, **kwargs):
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        def copyfile(src, dst, *args, **kwargs):
            with open(src, "rb") as f:
                _half_then_die(f.read(), dst)

        os.rename, shutil.copyfile = rename, copyfile
    trainer.save_checkpoint(path)


if __name__ == "__main__":
    main(*sys.argv[1:])
