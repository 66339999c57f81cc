"""The OpenMMLab 1.x family's 2-process runs (``lightning-hooks train --devices 2`` against the library's own
``tools/train.py`` under ``torchrun``, tests/helpers/mmcv_dist_train.py) and the one fresh mmcls run that two files
read: tests/families/mmcv/test_train_ddp.py compares it (and resumes it) rank by rank, and
tests/integration/ddp/test_write_audit_mmcv.py compares which rank wrote what in it. Both files run in one pytest
process (tests/helpers/mmcv1_suite.py's ``DDP_FILES``), which makes the run once.

Example::

    root = fresh_mmcls(tmp_path_factory)  # root / "ours", "ref", "writes", "mlflow_clients", CONFIG
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import write_audit
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmcv_train_kit import tiny_resnet_cifar
from write_audit_runs import LOGGERS

#: the derived config of the fresh mmcls run (:func:`mmcls_config`), in its root
CONFIG = "tiny_resnet_cifar_dist_workers.py"

RANK_RECORD = '''
import json

import torch
from mmcv.parallel import MMDistributedDataParallel, is_module_wrapper
from mmcv.runner import HOOKS, Hook


@HOOKS.register_module(force=True)
class RankRecord(Hook):
    """What this rank's runner shows its hooks; written as rank{R}.json, the final weights as weights_rank{R}.pth."""

    def __init__(self):
        self.record = dict(iters=[], sampler_epochs=[])

    def before_train_epoch(self, runner):
        self.record["sampler_epochs"].append(runner.data_loader.sampler.epoch)

    def after_train_iter(self, runner):
        # the rank's own BatchNorm statistics (DistributedDataParallel(broadcast_buffers=False) leaves them its own)
        stats = sum(m.running_mean.sum().item() for m in runner.model.modules() if isinstance(m, torch.nn.BatchNorm2d))
        self.record["iters"].append([runner.epoch, runner.iter, runner.inner_iter, len(runner.data_loader),
                                     runner.outputs["loss"].item(), runner.current_lr()[0], stats])

    def after_run(self, runner):
        model = runner.model
        self.record.update(rank=runner.rank, world_size=runner.world_size, wrapper=is_module_wrapper(model),
                           mmddp=isinstance(model, MMDistributedDataParallel), inner=type(model.module).__name__)
        with open(f"{runner.work_dir}/rank{runner.rank}.json", "w") as f:
            json.dump(self.record, f)
        torch.save(model.module.state_dict(), f"{runner.work_dir}/weights_rank{runner.rank}.pth")
'''

_fresh: dict[str, Path] = {}


def port() -> str:
    """A free local port for torchrun's ``--master_port``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run(command: list[str], cwd: Path, paths: tuple[Path, ...] = (), killed: str | None = None, **variables: str) -> str:
    """Run ``command`` with ``paths`` on ``PYTHONPATH`` and ``variables``; it must succeed, or with ``killed``
    (``KILL_RANK_AT``'s ``RANK:ITER`` for test_train_ddp.py's ``KillRank``) fail. Returns its output."""
    if killed:
        variables["KILL_RANK_AT"] = killed
    environment = subprocess_env(*paths, drop=(*DDP_LAUNCH_VARIABLES, "KILL_RANK_AT"), OMP_NUM_THREADS="1", **variables)
    proc = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)
    assert (proc.returncode != 0) == bool(killed), proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc.stdout + proc.stderr


def mmcls_config(folder: Path) -> Path:
    """The derived config of mmcls's shipped CIFAR ResNet (:func:`mmcv_train_kit.tiny_resnet_cifar`, 8 images, 2 a
    batch: 2 iterations per rank and epoch), 3 epochs, a checkpoint every 3 iterations (epoch_2.pth inside epoch 2),
    test_train_ddp.py's ``RankRecord`` hook, gloo, and loaders with 2 persistent workers a process
    (``workers_per_gpu=2``, mmcls's default ``persistent_workers``): the first train iterator of each fit (fresh, and
    resumed mid-epoch into an epoch whose sampler ``DistSamplerSeedHook`` sets in ``before_epoch``) takes its first
    indices when made, where ``EpochBasedRunner.train`` makes it."""
    (folder / "rank_record.py").write_text(RANK_RECORD)
    base = tiny_resnet_cifar(folder / "tiny_resnet_cifar_dist.py", samples_per_gpu=2, imports=("rank_record",),
                             lines="""
        runner = dict(max_epochs=3)
        checkpoint_config = dict(interval=3, by_epoch=False)
        custom_hooks = [dict(type='RankRecord')]
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call
    path = folder / CONFIG
    path.write_text(f"_base_ = [{str(base)!r}]\ndata = dict(workers_per_gpu=2, persistent_workers=True)\n")
    return path


def mmcls_sides(config: Path, cwd: Path, ours: Path, ref: Path, resumed: tuple[Path, Path] | None = None,
                flags: tuple[str, ...] = (), paths: tuple[Path, ...] = (), **variables: str) -> None:  # fmt: skip
    """``lightning-hooks train CONFIG --devices 2`` (with ``flags``) in ``ours``, then mmcls's ``tools/train.py``
    under torchrun in ``ref`` (``cwd`` on its ``PYTHONPATH``, for the config's imports), both with ``--seed 0``,
    ``paths`` on ``PYTHONPATH`` and ``variables``; with ``resumed`` (ours, the reference's), each with
    ``--resume-from`` its own checkpoint."""
    resume = [["--resume-from", str(path)] for path in resumed] if resumed else [[], []]
    run([sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir", str(ours), "--seed", "0",
         *resume[0], "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", *flags], cwd=cwd, paths=paths,
        **variables)  # fmt: skip
    run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port(),
         str(HELPERS / "mmcv_dist_train.py"), "mmcls", str(config), "--work-dir", str(ref), "--seed", "0", *resume[1],
         "--launcher", "pytorch"], cwd=cwd, paths=(cwd, *paths), **variables)  # fmt: skip


def fresh_mmcls(factory: Any) -> Path:
    """The fresh run of :func:`mmcls_config` in a folder of pytest's ``tmp_path_factory``, made once per process:
    ours with every Lightning logger (write_audit_runs.LOGGERS, their stores under the work dir) and each rank's
    count of MLflow clients (tests/helpers/mmcv_mlflow_clients.py, into ``mlflow_clients``), both sides with each
    process's writes recorded (tests/helpers/write_audit.py, into ``writes``). Returns the folder: ``ours``, ``ref``,
    ``writes``, ``mlflow_clients`` and :data:`CONFIG`."""
    if "mmcls" not in _fresh:
        root = factory.mktemp("mmcls_ddp")
        config = mmcls_config(root)
        variables = write_audit.env(root / "writes", root)
        clients = ("--trainer.callbacks+=mmcv_mlflow_clients.MlflowClientsHeld", "--trainer.callbacks.folder",
                   str(root / "mlflow_clients"))  # fmt: skip
        mmcls_sides(config, root, root / "ours", root / "ref", flags=(*LOGGERS, *clients), paths=(write_audit.SITE,),
                    **variables)  # fmt: skip
        _fresh["mmcls"] = root
    return _fresh["mmcls"]
