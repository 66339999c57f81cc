"""mmdet ``SyncNormHook`` in 2-process CPU DDP (gloo): MMEngine's ``Runner`` (``launcher="pytorch"``), then
Lightning (``strategy="ddp"``) + ``MMEngineAdapter``, same model, per-rank data and hooks, in the same 2 processes.

Usage: ``python -m torch.distributed.run --standalone --nproc-per-node=2 sync_norm_ddp.py OUT_DIR`` (torchrun, the
launcher ``launcher="pytorch"`` stands for). Each rank writes ``OUT_DIR/rank{r}.json``: per host, the BatchNorm
buffers at every validation (before and after ``SyncNormHook``, and after the validation epoch), the hook events and
the final weights. ``tests/families/mmengine/test_downstream.py`` runs this and compares.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy
from mmengine.evaluator import Evaluator
from mmengine.hooks import Hook
from mmengine.model import BaseModel, MMDistributedDataParallel
from mmengine.registry import HOOKS, MODEL_WRAPPERS, MODELS
from mmengine.runner import Runner
from mmengine_testkit import MMEngineSteps, Points, RecorderHook, ToyMSE
from openmmlab_stubs import import_openmmlab
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine import MMEngineAdapter

import_openmmlab(["mmdet"])


@MODELS.register_module(force=True)
class NormNet(BaseModel):
    """Linear, BatchNorm, linear regression: each rank's data gives its BN layer its own running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = "tensor") -> Any:
        pred = self.net(inputs)
        if mode == "loss":
            return {"loss_mse": torch.nn.functional.mse_loss(pred, labels)}
        if mode == "predict":
            return [{"pred": p, "label": t} for p, t in zip(pred, labels)]
        return pred


@MODEL_WRAPPERS.register_module(force=True)
class CPUDistributedDataParallel(MMDistributedDataParallel):
    """MMEngine's DDP wrapper on CPU: the Runner passes ``device_ids=[LOCAL_RANK]``, which DDP refuses for a CPU
    module; everything else is ``MMDistributedDataParallel``."""

    def __init__(self, module: torch.nn.Module, device_ids: list[int] | None = None, **kwargs: Any) -> None:
        super().__init__(module=module, **kwargs)


@HOOKS.register_module(force=True)
class NormProbeHook(Hook):
    """Records the model's BatchNorm buffers under ``tag`` in ``before_val_epoch`` (its configured priority places it
    before or after ``SyncNormHook``) and, with ``at_val_end``, in ``after_val_epoch``."""

    def __init__(self, tag: str, at_val_end: bool = False) -> None:
        self.tag, self.at_val_end = tag, at_val_end
        self.seen: dict[str, list] = {}

    def _record(self, runner: Any, tag: str) -> None:
        buffers = {name.split("net.", 1)[1]: b.tolist() for name, b in runner.model.named_buffers() if "running" in name}
        self.seen.setdefault(tag, []).append(buffers)

    def before_val_epoch(self, runner: Any) -> None:
        self._record(runner, self.tag)

    def after_val_epoch(self, runner: Any, metrics: dict | None = None) -> None:
        if self.at_val_end:
            self._record(runner, "after_val")


HOOKS_CFG = [
    dict(type="RecorderHook"),
    dict(type="NormProbeHook", priority="ABOVE_NORMAL", tag="unsynced", at_val_end=True),
    dict(type="mmdet.SyncNormHook"),
    dict(type="NormProbeHook", priority="BELOW_NORMAL", tag="synced"),
]
TRAIN_CFG = dict(by_epoch=True, max_epochs=2, val_interval=1)


def rank_loaders(rank: int) -> tuple[DataLoader, DataLoader]:
    """This rank's share of the data (as a distributed sampler would hand it): other samples on each rank."""
    return DataLoader(Points(16, 1 + rank), batch_size=4), DataLoader(Points(8, 10 + rank), batch_size=4)


class LitNormNet(MMEngineSteps):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.model = NormNet()
        self.evaluator = Evaluator([ToyMSE()])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def seen_by(hooks: list[Hook], weights: dict[str, torch.Tensor]) -> dict[str, Any]:
    recorder = next(h for h in hooks if isinstance(h, RecorderHook))
    probes = [h for h in hooks if isinstance(h, NormProbeHook)]
    return {
        "norms": {k: v for p in probes for k, v in p.seen.items()},
        "events": recorder.events,
        "weights": {k: v.tolist() for k, v in weights.items() if "running" not in k and "num_batches" not in k},
    }


def main(out: Path) -> None:
    # MMEngine's init_dist("pytorch") calls torch.cuda.set_device, which a CPU build of torch lacks: the group is
    # created here from torchrun's environment, and the Runner (launcher="pytorch") finds it initialized
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    train, val = rank_loaders(rank)
    torch.manual_seed(0)
    runner = Runner(
        model=NormNet(), work_dir=os.fspath(out / "mm"), train_dataloader=train, val_dataloader=val, val_cfg=dict(),
        val_evaluator=dict(type="ToyMSE"), train_cfg=TRAIN_CFG, optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1)),
        default_hooks=dict(checkpoint=None), custom_hooks=copy.deepcopy(HOOKS_CFG), launcher="pytorch",
        env_cfg=dict(dist_cfg=dict(backend="gloo")), experiment_name="mm-sync-norm",
        # a config's model_wrapper_cfg: MMDistributedDataParallel without device_ids, broadcast_buffers as by default
        cfg=dict(model_wrapper_cfg=dict(type="CPUDistributedDataParallel", broadcast_buffers=False)),
    )  # fmt: skip
    runner.train()
    mm = seen_by(runner.hooks, runner.model.module.state_dict())

    adapter = MMEngineAdapter.from_config(default_hooks=dict(checkpoint=None), custom_hooks=copy.deepcopy(HOOKS_CFG),
                                          work_dir=out / "lt", experiment_name="lt-sync-norm", train_cfg=TRAIN_CFG)
    module = LitNormNet()
    trainer = pl.Trainer(
        # MMEngine's DDP wrapper does not broadcast buffers; each rank keeps its own loader, as under the Runner
        strategy=DDPStrategy(broadcast_buffers=False), accelerator="cpu", devices=2, use_distributed_sampler=False,
        callbacks=[adapter], default_root_dir=out / "lt", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0, **adapter.trainer_kwargs(),
    )  # fmt: skip
    trainer.fit(module, *rank_loaders(rank))
    lt = seen_by(adapter.hooks, {k.removeprefix("model."): v for k, v in module.state_dict().items()})
    (out / f"rank{rank}.json").write_text(json.dumps({"runner": mm, "lightning": lt, "world_size": trainer.world_size}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
