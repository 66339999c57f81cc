"""One rank of iMIX's engine and of Lightning on the same config, in two processes (gloo, CPU), launched by torchrun:

    python -m torch.distributed.run --nproc_per_node 2 imix_engine_ddp.py ROOT

Each rank starts as iMIX's ``launch`` starts its ranks (``_distributed_main``: the process group, a barrier, the
per-machine group ``get_local_rank`` reads; the backend is gloo where iMIX hard-wires nccl, and no
``torch.cuda.set_device``), then runs, seeded as ``default_setup`` seeds a rank (``cfg.seed + rank``) before each run:

- ``imix-fresh``: ``imixEngine(cfg).train()`` (imix_reference.train); ``imix-stopped``: the same, stopped by a hook
  raising after iteration :data:`STOP_AT` (inside epoch 1); ``imix-resumed``: resumed with ``resume_from`` from the
  epoch-0 file the stopped run's CheckPointHook wrote (``Organizer.resume_or_load``);
- ``lightning-fresh``, ``lightning-stopped``, ``lightning-resumed``: the same config under Lightning DDP
  (``strategy="ddp"``, ``devices=2``; imix_reference.fit, the Organizer's hooks and loader in IMIXAdapter), the
  stopped fit keeping Lightning's checkpoint of each epoch (``ModelCheckpoint(save_last=True)``, under ``ROOT/ckpt``)
  and resumed from it (``fit(ckpt_path=...)``).

The config loads its data through iMIX's own loader builder with the ``sampler='DistributedSampler'`` of iMIX's
shipped OSCAR configs, in the main process (``workers_per_gpu=0``; they ship 4: see the test's docstring). Every
run's work dir is
``ROOT/work/<run>``; each rank saves what its runs showed (the Recorder's events, scalars, learning rates and log
buffer history, and the weights) to ``ROOT/rank<N>.pt``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

STOP_AT = 6  # iteration (0-based, across epochs) after which the stopped runs stop: epoch 1's third
EPOCHS = 3
SAMPLES = 16  # 8 a rank: 4 batches of 2
SEED = 7


class Stopped(Exception):
    """What :class:`StopAfter` raises."""


def launch_ranks() -> None:
    """iMIX's ``launch._distributed_main`` for one machine, with gloo where it has nccl and no CUDA device to set."""
    import imix.utils.distributed_info as dist_info

    dist.init_process_group(backend="gloo")
    dist_info.synchronize()
    dist_info._LOCAL_PROCESS_GROUP = dist.new_group(list(range(dist.get_world_size())))


def configure(work_dir: Path, **overrides: Any) -> Any:
    """imix_reference's config on iMIX's shipped loader settings, with the hooks that record (and stop) the run."""
    from imix.engine.hooks import HookBase, PriorityStatus
    from imix_reference import Recorder, config

    class StopAfter(HookBase):
        """Stops the run after iteration ``iteration``'s hooks (it runs last, LOWEST)."""

        def __init__(self, iteration: int) -> None:
            super().__init__()
            self.iteration = iteration

        def after_train_iter(self) -> None:
            if self.trainer.iter == self.iteration:
                raise Stopped(f"stopped after iteration {self.iteration}")

    stop = overrides.pop("stop", False)
    hooks = [dict(type=Recorder, level=PriorityStatus.LOWEST)]
    hooks += [dict(type=StopAfter, iteration=STOP_AT, level=PriorityStatus.LOWEST)] if stop else []
    train_data = dict(samples_per_gpu=2, workers_per_gpu=0, sampler="DistributedSampler",
                      data=dict(type="RegisteredSamples", samples=SAMPLES))  # fmt: skip
    return config(work_dir, dataset_type="IMIXLoader", train_data=train_data, total_epochs=EPOCHS, seed=SEED,
                  find_unused_parameters=False, custom_hooks=hooks, **overrides)  # fmt: skip


def seeded(cfg: Any) -> None:
    """``default_setup``'s seed of this rank."""
    from imix.utils.config import seed_all_rng

    seed_all_rng(cfg.seed + dist.get_rank())


def shown(run: Any, cfg: Any) -> dict[str, Any]:
    """What ``run()`` (returning its hooks and its model) showed on this rank: the Recorder's records, the final
    weights and the imix loggers' lines; only the lines of a stopped run."""
    from imix_reference import logged, recorder

    try:
        (hooks, model), log = logged(run, cfg.work_dir)
    except Stopped:
        return {}
    record = recorder(hooks)
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return dict(events=record.events, scalars=record.scalars, lrs=record.lrs, history=record.history, weights=weights,
                log=log)  # fmt: skip


def run_imix(work: Path, name: str, **overrides: Any) -> dict[str, Any]:
    from imix_reference import train

    def run() -> tuple[list[Any], torch.nn.Module]:
        engine = train(cfg)
        return engine._hooks, engine.model

    cfg = configure(work / name, **overrides)
    seeded(cfg)
    return shown(run, cfg)


def run_lightning(work: Path, name: str, ckpt: Path, **overrides: Any) -> dict[str, Any]:
    from imix_reference import fit
    from lightning.pytorch.callbacks import ModelCheckpoint

    def run() -> tuple[list[Any], torch.nn.Module]:
        organizer = fit(cfg, ckpt_path=ckpt_path, **options)[0]
        return organizer.hooks, organizer.model

    ckpt_path = overrides.pop("ckpt_path", None)
    options: dict[str, Any] = dict(strategy="ddp", devices=2)
    if overrides.get("stop"):
        options.update(enable_checkpointing=True, callbacks=[ModelCheckpoint(dirpath=ckpt, save_last=True)])
    cfg = configure(work / name, **overrides)
    seeded(cfg)
    return shown(run, cfg)


def main(root: Path) -> None:
    launch_ranks()
    work, ckpt = root / "work", root / "ckpt"
    runs = dict(
        imix_fresh=run_imix(work, "imix-fresh"),
        imix_stopped=run_imix(work, "imix-stopped", stop=True),
        imix_resumed=run_imix(work, "imix-resumed", resume_from=str(next((work / "imix-stopped").glob("*epoch0*")))),
        lightning_fresh=run_lightning(work, "lightning-fresh", ckpt),
        lightning_stopped=run_lightning(work, "lightning-stopped", ckpt, stop=True),
        lightning_resumed=run_lightning(work, "lightning-resumed", ckpt, ckpt_path=str(ckpt / "last.ckpt")),
    )
    torch.save(runs, root / f"rank{dist.get_rank()}.pt")
    dist.destroy_process_group()  # iMIX's launch leaves the group to the interpreter's exit, where gloo aborted a rank


if __name__ == "__main__":
    main(Path(sys.argv[1]))
