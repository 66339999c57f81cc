"""A DDP fit (CPU, gloo, 2 processes) of mmcv 1.x hooks; writes what each rank's hooks saw as JSON.

Usage: ``python mmcv_ddp.py OUT_DIR``. Lightning's ``strategy="ddp"`` re-executes this script for rank 1, so everything
here is the same on both ranks. ``tests/families/mmcv/test_ddp.py`` runs it and compares with mmcv's single-process runner.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent)]

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler  # noqa: E402
from mmcv.runner import CheckpointHook, DistSamplerSeedHook, Hook, OptimizerHook, StepLrUpdaterHook  # noqa: E402
from mmcv_testkit import BATCH, Module, ToyModel, loader, sgd  # noqa: E402

from lightning_hooks import MMCVAdapter  # noqa: E402

OUT = Path(sys.argv[1])


class Ranks(Hook):
    def __init__(self) -> None:
        self.seen: dict = {"iters": []}

    def before_run(self, runner) -> None:
        self.seen["dist"] = [runner.rank, runner.world_size]

    def before_train_epoch(self, runner) -> None:
        self.seen.setdefault("sampler_epochs", []).append(runner.data_loader.sampler.epoch)  # DistSamplerSeedHook

    def after_train_iter(self, runner) -> None:
        self.seen["iters"].append([runner.epoch, runner.iter, runner.inner_iter, len(runner.data_loader)])


class Shards(Module):
    """mmcv's distributed loaders: a DistributedSampler without shuffling, built once the process group exists (and
    Trainer(use_distributed_sampler=False): Lightning's own would shuffle the train set). 4 batches of BATCH per rank
    make together the 4 batches of 2 * BATCH a single process sees."""

    def train_dataloader(self) -> DataLoader:
        dataset = loader(n_batches=8).dataset
        return DataLoader(dataset, batch_size=BATCH, sampler=DistributedSampler(dataset, shuffle=False))


def main() -> None:
    ranks = Ranks()
    hooks = [StepLrUpdaterHook(step=[1]), OptimizerHook(grad_clip=dict(max_norm=0.5)), DistSamplerSeedHook(),
             CheckpointHook(interval=1), ranks]  # fmt: skip
    adapter = MMCVAdapter(hooks, runner=dict(type="EpochBasedRunner", max_epochs=2), work_dir=OUT / "work")
    trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, callbacks=[adapter], default_root_dir=OUT,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False, **adapter.trainer_kwargs())  # fmt: skip
    torch.manual_seed(0)
    module = Shards(ToyModel(), sgd)
    trainer.fit(module)
    ranks.seen["weights"] = {k: v.tolist() for k, v in module.model.state_dict().items()}
    (OUT / f"rank{trainer.global_rank}.json").write_text(json.dumps(ranks.seen))


if __name__ == "__main__":
    main()
