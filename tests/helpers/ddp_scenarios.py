"""Runs one small DDP fit per family (CPU, gloo, 2 processes) and writes what every rank's hooks saw as JSON.

Usage: ``python ddp_scenarios.py OUT_DIR``. Lightning's ``strategy="ddp"`` re-executes this script for rank 1, so
everything here is importable and the same on both ranks. ``test_ddp.py`` runs it once and asserts on the output.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

OUT = Path(sys.argv[1])
N, BATCH = 16, 4  # 2 batches per rank and epoch, no DistributedSampler padding


class Data(Dataset):
    """``{"input", "target"}`` samples; ``as_tuple`` gives ``(x, y)`` pairs for the regression families."""

    def __init__(self, n: int = N, seed: int = 0, as_tuple: bool = False) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 4, generator=g) * 3 + torch.arange(n).unsqueeze(1) / 4  # ranks see different stats
        self.y = torch.randint(0, 3, (n,), generator=g)
        self.as_tuple = as_tuple

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> Any:
        if self.as_tuple:
            return self.x[i], self.x[i].sum(0, keepdim=True)
        return {"input": self.x[i], "target": self.y[i]}


def loader(as_tuple: bool = False, n: int = N) -> DataLoader:
    return DataLoader(Data(n, as_tuple=as_tuple), batch_size=BATCH)


class Net(pl.LightningModule):
    """Linear-BN-ReLU-Linear, 3 classes on dict batches; ``regression`` trains MSE on ``(x, y)`` batches."""

    def __init__(self, regression: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1 if regression else 3))
        self.regression = regression

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def _step(self, batch: Any) -> dict[str, torch.Tensor]:
        if self.regression:
            x, y = batch
            return {"loss": F.mse_loss(self(x), y)}
        out = self(batch["input"])
        return {"loss": F.cross_entropy(out, batch["target"]), "output": out}

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return self._step(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        return self._step(batch)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def trainer(root: Path, callbacks: list[Any], max_epochs: int = 2, **kwargs: Any) -> pl.Trainer:
    return pl.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_epochs=max_epochs, callbacks=callbacks,
        default_root_dir=root, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, **kwargs,
    )


def bn_stats(module: nn.Module) -> list[list[float]]:
    bn = next(m for m in module.modules() if isinstance(m, nn.BatchNorm1d))
    return [bn.running_mean.tolist(), bn.running_var.tolist()]


def weights(module: nn.Module) -> list[float]:
    return [float(p.detach().double().sum()) for p in module.parameters()]


def dump(family: str, trainer: pl.Trainer, seen: dict[str, Any]) -> None:
    (OUT / f"{family}_rank{trainer.global_rank}.json").write_text(json.dumps(seen))


# ------------------------------------------------------------------------------------------------------ MMEngine
def mmengine_run() -> None:
    import mmengine.dist
    from mmengine.hooks import Hook

    from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks

    seen: dict[str, Any] = {"buffers": {}, "loaded": []}

    class Probe(Hook):
        def __init__(self, priority: str, tag: str) -> None:
            self.priority, self.tag = priority, tag

        def before_run(self, runner: Any) -> None:
            seen["dist"] = [mmengine.dist.get_rank(), mmengine.dist.get_world_size(), mmengine.dist.is_main_process()]
            seen["runner"] = [runner.rank, runner.world_size, runner.distributed]
            seen.setdefault("log_dir", []).append(runner.log_dir)

        def before_train(self, runner: Any) -> None:
            seen.setdefault("model", []).append(
                [type(runner.model).__name__, isinstance(getattr(runner.model, "module", None), Net)])
            seen.setdefault("weights_at_start", []).append(weights(runner.model))

        def after_load_checkpoint(self, runner: Any, checkpoint: dict) -> None:
            seen["loaded"].append(checkpoint["meta"]["epoch"])

        def before_save_checkpoint(self, runner: Any, checkpoint: dict) -> None:
            if self.tag == "before":
                seen.setdefault("saved", []).append(checkpoint["meta"]["epoch"])

        def after_train_epoch(self, runner: Any) -> None:
            seen["buffers"].setdefault(self.tag, []).append(bn_stats(runner.model))

        def after_val_epoch(self, runner: Any, metrics: dict | None = None) -> None:
            if self.tag == "before":
                seen.setdefault("val_metrics", []).append(metrics)

    class RankMetricNet(Net):
        """Logs its rank as a validation metric, without ``sync_dist``: the value differs per rank."""

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("rank_metric", float(self.global_rank))

    def adapter(work: Path) -> MMEngineAdapter:
        hooks = build_hooks(
            default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1),
                               logger=dict(type="LoggerHook", interval=1)),
            custom_hooks=[dict(type="SyncBuffersHook")],
        )
        return MMEngineAdapter([*hooks, Probe("ABOVE_NORMAL", "before"), Probe("BELOW_NORMAL", "after")], work_dir=work)

    model = Net(regression=True)
    fit = trainer(OUT / "mmengine", [adapter(OUT / "mmengine" / "run1")])
    fit.fit(model, loader(as_tuple=True))
    # resume on every rank from the file rank 0 wrote
    resume = trainer(OUT / "mmengine", [adapter(OUT / "mmengine" / "run2")], max_epochs=3)
    model = RankMetricNet(regression=True)
    resume.fit(model, loader(as_tuple=True), loader(as_tuple=True, n=8), ckpt_path=str(OUT / "mmengine" / "run1" / "epoch_2.pth"),
               weights_only=False)  # MMEngine checkpoints pickle MessageHub buffers
    saved = torch.load(OUT / "mmengine" / "run1" / "epoch_2.pth", weights_only=False)
    seen["saved_weights"] = [float(v.double().sum()) for k, v in saved["state_dict"].items() if "running" not in k
                             and "num_batches" not in k]
    seen["final"] = weights(model)
    dump("mmengine", resume, seen)


# ------------------------------------------------------------------------------------------- mmpretrain SwAVHook
#: 4 samples per rank and batch: the global batch is 8, so the queue is cut to 8 rows, 4 per rank
SWAV = dict(type="mmpretrain.SwAVHook", batch_size=BATCH, crops_for_assign=[0, 1], feat_dim=3, queue_length=12,
            epoch_queue_starts=0)  # fmt: skip


def swav_adapter() -> Any:
    """An adapter with SwAVHook, built before any fit starts the process group (as a script builds its callbacks):
    the hook reads the world size in ``__init__``."""
    sys.path.insert(0, str(Path(__file__).parent))  # mmpretrain imports with the test stubs
    from openmmlab_stubs import import_openmmlab

    import_openmmlab(["mmpretrain"])
    from lightning_hooks.families.mmengine import MMEngineAdapter

    return MMEngineAdapter.from_config(custom_hooks=[dict(SWAV)], work_dir=OUT / "swav")


def swav_run(adapter: Any) -> None:
    from mmengine.registry import HOOKS
    from mmpretrain.models.losses import SwAVLoss

    class SwAVNet(Net):
        """``Net`` plus mmpretrain's ``SwAVLoss`` as ``head.loss_module``, where SwAVHook puts its queue: the
        swapped assignment of the outputs for a batch and for its inputs reversed."""

        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Module()
            self.head.loss_module = SwAVLoss(feat_dim=3, num_prototypes=3, epsilon=0.5)

        def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
            crops = torch.cat([self(batch["input"]), self(batch["input"].flip(-1))])
            return {"loss": self._step(batch)["loss"] + self.head.loss_module(F.normalize(crops))}

    fit = trainer(OUT / "swav", [adapter], max_epochs=1)
    model = SwAVNet()
    fit.fit(model, loader())
    (hook,) = [h for h in adapter.hooks if type(h).__name__ == "SwAVHook"]
    reference = HOOKS.build(dict(SWAV))  # built in the process group, as the Runner builds hooks after init_dist
    reference.before_run(SimpleNamespace(work_dir=str(OUT / "swav" / f"reference{fit.global_rank}")))
    seen = {name: [getattr(hook, name), getattr(reference, name)] for name in ("batch_size", "queue_length")}
    seen.update(queue=list(model.head.loss_module.queue.shape), queue_file=Path(hook.queue_path).name)
    dump("swav", fit, seen)


# -------------------------------------------------------------------------------------------------------- Classy
def classy_run() -> None:
    from classy_vision.generic import distributed_util
    from classy_vision.hooks import CheckpointHook, ClassyHook, TensorboardPlotHook
    from torch.utils.tensorboard import SummaryWriter

    from lightning_hooks import ClassyAdapter

    seen: dict[str, Any] = {"local": [], "synced": []}

    class Probe(ClassyHook):
        on_phase_start = on_end = ClassyHook._noop

        def on_start(self, task: Any) -> None:
            seen["env"] = [os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")]
            seen["classy"] = [distributed_util.get_rank(), distributed_util.get_world_size(),
                              distributed_util.is_primary()]
            seen["models"] = [type(task.model).__name__, type(task.distributed_model).__name__,
                              type(task.base_model).__name__]

        def on_step(self, task: Any) -> None:
            if task.train:
                seen["local"].append(task.losses[-1])
                batch = task.last_batch
                seen.setdefault("correct", []).append(int((batch.output.argmax(1) == batch.target).sum()))

        def on_phase_end(self, task: Any) -> None:
            if task.train:
                seen["synced"].append(list(task.losses))
                seen.setdefault("accuracy", []).append(task.meters[0].value["top_1"])  # Classy's AccuracyMeter

    root = OUT / "classy"
    rank = int(os.environ.get("LOCAL_RANK", 0))  # only for a per-rank tensorboard folder
    writer = SummaryWriter(str(root / f"tb{rank}"))
    hooks = [CheckpointHook(str(root), phase_types=["train"]), TensorboardPlotHook(writer, log_period=1), Probe()]
    model = Net()
    fit = trainer(root, [ClassyAdapter(hooks, meters={"accuracy": {"topk": [1]}})])
    fit.fit(model, loader(), loader(n=8))
    writer.close()
    fit.strategy.barrier()
    state = torch.load(root / "checkpoint.torch", weights_only=False)["classy_state_dict"]
    trunk = state["base_model"]["model"]["trunk"]  # Classy's layout
    seen["checkpoint_matches"] = all(torch.equal(v, model.state_dict()[k]) for k, v in trunk.items())
    dump("classy", fit, seen)


# ---------------------------------------------------------------------------------------------------------- iMIX
class IMIXNet(pl.LightningModule):
    """Linear regression whose optimizer exists before the Trainer (iMIX hooks are built with it)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.05)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return self.optimizer


def imix_run() -> None:
    import imix.utils.distributed_info as comm
    from imix.engine.hooks import CheckPointHook, HookBase, JSONLoggerHook, OptimizerHook, PeriodicLogger
    from imix.utils.checkpoint import Checkpointer

    from lightning_hooks import IMIXAdapter

    seen: dict[str, Any] = {}

    class Probe(HookBase):
        def before_train(self) -> None:
            seen["comm"] = [comm.get_rank(), comm.get_world_size(), comm.is_main_process()]
            seen["model"] = type(self.trainer.model).__name__

    root = OUT / "imix"
    root.mkdir(parents=True, exist_ok=True)
    module = IMIXNet()
    checkpoint = CheckPointHook(Checkpointer(module.net, save_dir=str(root)), prefix="tiny", epoch_period=1)
    periodic = PeriodicLogger([JSONLoggerHook(str(root / "training_status.json"))], 1)
    adapter = IMIXAdapter([OptimizerHook(), checkpoint, periodic, Probe()], cfg=dict(log_config=dict(period=1)))
    fit = trainer(root, [adapter])
    fit.fit(module, loader(as_tuple=True))
    seen["ran"] = {type(h).__name__: adapter.mount_counts(h) for h in adapter.hooks}
    fit.strategy.barrier()  # rank 0 writes the final model in after_train, without a barrier (as in iMIX)
    final = torch.load(root / "tiny_model_final.pth")
    seen["checkpoint_matches"] = all(torch.equal(v, module.net.state_dict()[k]) for k, v in final["model"].items())
    seen["final"] = weights(module)
    dump("imix", fit, seen)


# -------------------------------------------------------------------------------------------------------- native
class InfLossOnRank0(Net):
    """Rank 0's loss at global step 1 is +inf through a constant term: its gradients, synced by DDP, stay finite."""

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        out = super().training_step(batch, batch_idx)
        if self.global_rank == 0 and self.global_step == 1:
            out["loss"] = out["loss"] + float("inf")
        return out


def native_run() -> None:
    from lightning_hooks.callbacks import EMA, AnomalyDetector, PreciseBN

    seen: dict[str, Any] = {}

    class Probe(pl.Callback):
        def on_train_batch_end(self, trainer: pl.Trainer, module: Any, outputs: Any, batch: Any, i: int) -> None:
            if trainer.is_last_batch:
                with torch.no_grad():  # plain-PyTorch reference: BN input statistics over the whole dataset
                    h = module.net[0](Data(N).x)
                seen.setdefault("bn", []).append(bn_stats(module))
                seen.setdefault("reference", []).append([h.mean(0).tolist(), h.var(0, unbiased=False).tolist()])

    ema, anomaly = EMA(), AnomalyDetector(policy="skip")
    model = InfLossOnRank0(regression=True)
    fit = trainer(OUT / "native", [PreciseBN(num_batches=2), Probe(), ema, anomaly])
    fit.fit(model, loader(as_tuple=True))
    seen["ema"] = [float(v.double().sum()) for v in ema.export_state_dict(model).values()]
    seen["skipped"] = anomaly.skipped_steps
    seen["final"] = weights(model)
    dump("native", fit, seen)


if __name__ == "__main__":
    runs = sys.argv[2:] or ["mmengine", "swav", "classy", "imix", "native"]
    swav = swav_adapter() if "swav" in runs else None
    for run in runs:
        globals()[f"{run}_run"](*([swav] if run == "swav" else []))
