"""mmcv's DistEvalHook in 2 CPU processes (gloo): under mmcv's own ``EpochBasedRunner`` or under Lightning's DDP with
``MMCVAdapter``; each rank writes, as JSON, what the hooks saw and what the dataset evaluated.

Usage: ``python mmcv_dist_eval.py OUT_DIR {mmcv,lightning}``. Lightning's ``strategy="ddp"`` re-executes
this script for rank 1; the mmcv runner's two processes are forked here. ``tests/families/mmcv/test_dist_eval.py`` compares the two.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent)]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from mmcv.runner import DistEvalHook, Hook, OptimizerHook  # noqa: E402
from torch.utils.data import DataLoader, Dataset, DistributedSampler  # noqa: E402

OUT, HOST = Path(sys.argv[1]), sys.argv[2]
N_VAL = 10  # not a multiple of the world size: DistributedSampler pads, collect_results drops the padding


class Scores(Dataset):
    """Val set: sample i is ``x = i``; ``evaluate`` records the results it got and scores them."""

    def __init__(self) -> None:
        self.evaluated: list = []

    def __len__(self) -> int:
        return N_VAL

    def __getitem__(self, i: int) -> dict:
        return dict(x=torch.tensor([float(i)]))

    def evaluate(self, results, logger=None, **kwargs) -> dict:
        self.evaluated.append([round(float(r), 6) for r in results])
        return dict(acc=round(float(sum(results)) / len(results), 6))


class Train(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> dict:
        return dict(x=torch.tensor([float(i)]))


class Model(torch.nn.Module):
    """An mmcv model: ``train_step`` (a loss pulling ``w`` to 1), and the test forward (``return_loss=False``) returning one result per
    sample, as mmcv's ``multi_gpu_test`` calls it."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5]))

    def forward(self, x, return_loss=True, **kwargs):
        return list((x * self.w).flatten().detach()) if not return_loss else (x * self.w).pow(2).mean()

    def train_step(self, data, optimizer=None):
        # the same gradient on every rank's shard: mmcv's runner (no DDP wrapper here) and Lightning's DDP (which
        # averages gradients) take the same steps, so the scores the eval hook gathers rise alike each epoch
        loss = (self.w - 1).pow(2) + 0 * self(data["x"])
        return dict(loss=loss, log_vars=dict(loss=loss.item()), num_samples=len(data["x"]))


class Seen(Hook):
    """What each rank sees after the eval hook ran (priority VERY_LOW: after the LOW eval hook)."""

    def __init__(self) -> None:
        self.seen: list = []

    def after_train_epoch(self, runner) -> None:
        output = {k: v for k, v in runner.log_buffer.output.items() if k in ("acc", "eval_iter_num")}
        self.seen.append([runner.epoch, runner.rank, output, runner.meta.get("hook_msgs", {}).get("best_score")])


def hooks_and_val(rank: int) -> tuple[list, Scores, Seen]:
    """The hooks; the eval hook's loader is built with the adapter, before Lightning's process group exists: its
    sampler is given the rank."""
    val = Scores()
    loader = DataLoader(val, batch_size=2, sampler=DistributedSampler(val, num_replicas=2, rank=rank, shuffle=False))
    seen = Seen()
    evaluation = DistEvalHook(loader, interval=1, save_best="acc", rule="greater")
    evaluation.priority = "LOW"
    seen.priority = "VERY_LOW"
    return [OptimizerHook(), evaluation, seen], val, seen


def train_loader() -> DataLoader:
    dataset = Train()
    return DataLoader(dataset, batch_size=2, sampler=DistributedSampler(dataset, shuffle=False))


def write(rank: int, val: Scores, seen: Seen, work_dir: Path) -> None:
    files = sorted(p.name for p in work_dir.iterdir() if p.suffix == ".pth") if work_dir.exists() else []
    (OUT / f"{HOST}_rank{rank}.json").write_text(json.dumps(dict(evaluated=val.evaluated, seen=seen.seen, files=files)))


def mmcv_process(rank: int) -> None:
    from mmcv.runner import EpochBasedRunner

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["LH_PORT"])
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = Model()
    work_dir = OUT / HOST
    runner = EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), work_dir=str(work_dir),
                              logger=logging.getLogger("mmcv-reference"), max_epochs=2)  # fmt: skip
    hooks, val, seen = hooks_and_val(rank)
    for hook in hooks:
        runner.register_hook(hook, priority=vars(hook).pop("priority", "NORMAL"))
    runner.run([train_loader()], [("train", 1)])
    write(rank, val, seen, work_dir)
    dist.destroy_process_group()


def lightning_main() -> None:
    import lightning.pytorch as pl

    from lightning_hooks import MMCVAdapter
    from lightning_hooks.families.mmcv.module import MMCVModule

    work_dir = OUT / HOST
    hooks, val, seen = hooks_and_val(int(os.environ.get("LOCAL_RANK", 0)))  # Lightning sets it for rank 1
    adapter = MMCVAdapter(hooks, runner=dict(type="EpochBasedRunner", max_epochs=2), work_dir=work_dir, model="model")
    trainer = pl.Trainer(strategy="ddp", accelerator="cpu", devices=2, callbacks=[adapter], default_root_dir=OUT,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, use_distributed_sampler=False, limit_val_batches=0,
                         **adapter.trainer_kwargs())  # fmt: skip
    torch.manual_seed(0)
    model = Model()

    class Module(MMCVModule):
        def train_dataloader(self) -> DataLoader:  # the DistributedSampler needs the process group
            return train_loader()

    trainer.fit(Module(model, torch.optim.SGD(model.parameters(), lr=0.1)))
    write(trainer.global_rank, val, seen, work_dir)


if __name__ == "__main__":
    if HOST == "mmcv":
        import torch.multiprocessing as mp

        # forked: each rank starts with this process's imports (torch, mmcv.runner) instead of importing them again
        mp.start_processes(mmcv_process, nprocs=2, start_method="fork")
    else:
        lightning_main()
