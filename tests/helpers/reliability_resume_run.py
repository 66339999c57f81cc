"""One training run with hooks of every family and the native callbacks; run as a script by the resume tests.

    python reliability_resume_run.py OUT --ema mmengine|classy|native [--kill-at STEP] [--resume CKPT]

Trains 3 epochs of 6 batches with hooks of every family, ``AnomalyDetector`` and one EMA: MMEngine's
``EMAHook``, Classy's ``ExponentialMovingAverageModelHook`` or the native ``EMA`` (EMAs that put their average into
the model during validation cannot be stacked: each writes into the tensors another one swapped in). MMEngine's
``CheckpointHook`` writes ``OUT/iter_4.pth``, ``OUT/iter_8.pth``, ... through ``AtomicCheckpointIO``; ``--kill-at``
sends SIGKILL to the process before that global step runs; ``--resume`` continues from a checkpoint with
``trainer.fit(ckpt_path=..., weights_only=True)``. At the end the final state of the model and of every hook is
written to ``OUT/final.pt``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from lightning_hooks import adapt
from lightning_hooks.callbacks import EMA, AnomalyDetector, AtomicCheckpointIO

BATCHES, BATCH_SIZE, EPOCHS, NAN_STEP = 6, 4, 3, 2


class Net(pl.LightningModule):
    """A BatchNorm MLP classifier on Classy-style ``{"input", "target"}`` batches; the loss is NaN at ``nan_step``."""

    def __init__(self, nan_step: int | None = None) -> None:
        super().__init__()
        self.nan_step = nan_step
        self.net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = nn.functional.cross_entropy(self(batch["input"]), batch["target"])
        return loss * float("nan") if self.global_step == self.nan_step else loss

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> dict[str, torch.Tensor]:
        output = self(batch["input"])
        loss = nn.functional.cross_entropy(output, batch["target"])
        self.log("val_loss", loss)
        return {"loss": loss, "output": output, "target": batch["target"]}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class ResumableLoader(DataLoader):
    """A DataLoader that Lightning can restore mid-epoch (it implements ``state_dict`` / ``load_state_dict``).

    Lightning 2.6 saves a loader's position only for loaders with that interface; for plain DataLoaders a mid-epoch
    resume restarts the epoch's data from the first batch (with a warning). For a sized loader Lightning fetches a
    batch only when it runs it, so the batches handed out are the batches consumed.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed_out, self.skip = 0, 0

    def __iter__(self) -> Any:
        skip, self.skip = (self.skip if self.skip < len(self) else 0), 0
        self.handed_out = skip
        for i, batch in enumerate(super().__iter__()):
            if i >= skip:
                self.handed_out += 1
                yield batch

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self.handed_out}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.skip = state["consumed"]


def loader(n: int, seed: int, resumable: bool) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    data = [{"input": x[i], "target": x[i, :3].argmax(), "id": torch.tensor(i)} for i in range(n)]
    return (ResumableLoader if resumable else DataLoader)(data, batch_size=BATCH_SIZE)


class Killer(pl.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


def build_hooks(out: str, ema: str) -> dict[str, Any]:
    from classy_vision.hooks import ClassyHook, ExponentialMovingAverageModelHook
    from imix.engine.hooks import HookBase, IterationTimerHook
    from mmengine.hooks import CheckpointHook, EMAHook, RuntimeInfoHook

    class LogBufferProbe(HookBase):
        """Records iMIX's log buffer counters when training ends."""

        def after_train(self) -> None:
            info = self.trainer.log_buffer.train_info
            torch.save({k: getattr(info, k) for k in ("iter", "epoch", "epoch_inner_iter")}, f"{out}/imix.pt")

    class Noop(ClassyHook):
        """Keeps a Classy adapter (and its phase counters) in the run when the EMA is not Classy's."""

        on_start = on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

    return {
        "mmengine": [RuntimeInfoHook(), CheckpointHook(interval=4, by_epoch=False)]
        + ([EMAHook(momentum=0.1)] if ema == "mmengine" else []),
        "classy": [ExponentialMovingAverageModelHook(decay=0.8, device="cpu") if ema == "classy" else Noop()],
        "imix": [IterationTimerHook(), LogBufferProbe()],
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--ema", choices=["mmengine", "classy", "native"], required=True)
    parser.add_argument("--kill-at", type=int)
    parser.add_argument("--resume")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    pl.seed_everything(0, verbose=False)
    hooks = build_hooks(args.out, args.ema)
    # a fixed experiment_name: by default it is the start time, which RuntimeInfoHook puts in the message hub
    adapters = adapt([h for family in hooks.values() for h in family], work_dir=args.out, experiment_name="resume")
    anomaly = AnomalyDetector(policy="skip")
    native = [EMA(decay=0.7, include_buffers=True)] if args.ema == "native" else []
    mmengine = next(a for a in adapters if a.family == "mmengine")
    # MMEngine's CheckpointHook saves from on_train_batch_end: its adapter goes last, so the file holds the state
    # every other callback reaches at that batch's end (Lightning moves only its own ModelCheckpoint last)
    others = [a for a in adapters if a is not mmengine]
    callbacks = [*others, *native, anomaly, mmengine] + ([Killer(args.kill_at)] if args.kill_at is not None else [])
    trainer = pl.Trainer(
        max_epochs=EPOCHS, callbacks=callbacks, plugins=[AtomicCheckpointIO()], default_root_dir=args.out,
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, deterministic=True,
    )  # fmt: skip
    model = Net(NAN_STEP)
    train, val = loader(BATCHES * BATCH_SIZE, 0, True), loader(8, 1, False)
    trainer.fit(model, train, val, ckpt_path=args.resume, weights_only=True if args.resume else None)
    ema = {
        "mmengine": lambda: hooks["mmengine"][-1].ema_model.state_dict(),  # EMAHook keeps it out of the state
        "classy": dict,  # in the adapter's hook state
        "native": lambda: native[0].state_dict(),
    }[args.ema]()
    torch.save(
        {
            "model": model.state_dict(),
            "ema": ema,
            "anomaly": anomaly.state_dict(),
            "adapters": {a.family: a.state_dict() for a in adapters},
            "global_step": trainer.global_step,
        },
        f"{args.out}/final.pt",
    )


if __name__ == "__main__":
    main(sys.argv[1:])
