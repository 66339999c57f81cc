"""``lightning-hooks train --devices 2`` on an OpenMMLab 1.x config (issue #33): Lightning's DDP (CPU, gloo) against
mmcls 0.x's own ``tools/train.py --launcher pytorch`` under ``torchrun`` with 2 processes, as its ``dist_train.sh``
runs it (tests/helpers/mmcv_dist_train.py bridges that script's two CUDA-only calls), on a derived config of the
shipped ``resnet18_8xb16_cifar10.py``: a narrow ResNet, 8 generated images (2 iterations per rank and epoch), 2
epochs, ``DistEvalHook`` each epoch. Rank by rank: each iteration's loss, learning rate and counters, the sampler's
epoch (``DistSamplerSeedHook``), the model wrapper hooks see (``MMDistributedDataParallel``, ``runner.model.module``)
and the final weights, bitwise; rank 0's json and text logs, checkpoints (written once) and config dump."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)
from mmcv_train_kit import assert_same_weights, checkpoint, json_log, text_log, tiny_resnet_cifar

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

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


@pytest.fixture
def config(tmp_path):
    (tmp_path / "rank_record.py").write_text(RANK_RECORD)
    return tiny_resnet_cifar(tmp_path / "tiny_resnet_cifar_dist.py", samples_per_gpu=2, imports=("rank_record",),
                             lines="""
        custom_hooks = [dict(type='RankRecord')]
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _run(command: list[str], cwd: Path, paths: tuple[Path, ...] = ()) -> None:
    environment = subprocess_env(*paths, drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1")
    proc = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


def _without_work_dir(config: str) -> str:
    return re.sub(r"(?m)^work_dir = .*$", "", config)


def test_two_processes_train_as_dist_train_sh_rank_by_rank(config, tmp_path):
    ours, ref = tmp_path / "ours", tmp_path / "ref"
    _run([sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir", str(ours), "--seed", "0",
          "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp"], cwd=tmp_path)  # fmt: skip
    _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", _port(),
          str(HELPERS / "mmcv_dist_train.py"), "mmcls", str(config), "--work-dir", str(ref), "--seed", "0",
          "--launcher", "pytorch"], cwd=tmp_path, paths=(tmp_path,))  # fmt: skip
    names = [sorted(re.sub(r"^\d{8}_\d{6}", "TS", p.name) for p in d.iterdir()) for d in (ours, ref)]
    assert names[0] == names[1] == sorted(["TS.log", "TS.log.json", config.name, "epoch_1.pth", "epoch_2.pth",
                                           "latest.pth", "rank0.json", "rank1.json", "weights_rank0.pth",
                                           "weights_rank1.pth"])  # fmt: skip
    records = [[json.loads((d / f"rank{r}.json").read_text()) for r in (0, 1)] for d in (ours, ref)]
    for rank in (0, 1):
        mine, theirs = records[0][rank], records[1][rank]
        for i, (a, b) in enumerate(zip(mine["iters"], theirs["iters"])):
            assert a == b, (f"{config.name}: rank {rank}, iteration {i}: [epoch, iter, inner_iter, batches, loss, lr, "
                            f"BN running means] {a} != {b}")
        assert mine == theirs, f"rank {rank}"
        assert theirs["rank"] == rank and theirs["world_size"] == 2
        assert theirs["wrapper"] and theirs["mmddp"] and theirs["inner"] == "ImageClassifier"
        assert_same_weights(*(torch.load(d / f"weights_rank{rank}.pth", weights_only=False) for d in (ours, ref)),
                            f"rank {rank}")  # fmt: skip  # arguments aligned under the call
    # runner.iter before it counts the iteration; the sampler's epoch before DistSamplerSeedHook (NORMAL, registered
    # after the custom hooks) sets it: the previous epoch's
    assert [r[1] for r in records[1][0]["iters"]] == [0, 1, 2, 3] and records[1][0]["sampler_epochs"] == [0, 0]
    assert records[1][0]["iters"][0][4] != records[1][1]["iters"][0][4]  # each rank trains its own shard
    assert records[1][0]["iters"][1][6] != records[1][1]["iters"][1][6]  # and keeps its own BN statistics
    assert json_log(ours) == json_log(ref)
    assert [r["mode"] for r in json_log(ref)[1:]] == ["train", "train", "val"] * 2
    starts = ("Epoch", "Saving checkpoint", "Set random seed", "Distributed")
    assert text_log(ours, "mmcls", starts) == text_log(ref, "mmcls", starts)
    assert "Distributed training: True" in text_log(ref, "mmcls", starts)
    assert _without_work_dir((ours / config.name).read_text()) == _without_work_dir((ref / config.name).read_text())
    for name in ("epoch_1.pth", "epoch_2.pth"):
        mine, theirs = checkpoint(ours / name), checkpoint(ref / name)
        assert mine["meta"] == theirs["meta"], name
        assert_same_weights(mine["state_dict"], theirs["state_dict"], name)
        assert str(mine["optimizer"]) == str(theirs["optimizer"]), name
    assert os.readlink(ours / "latest.pth") == "epoch_2.pth"
