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
import textwrap
from pathlib import Path

import pytest
import torch
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)

mmcls = pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

SHIPPED = Path(mmcls.__file__).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"

PROJECT = '''
import json

import numpy as np
import torch
from mmcv.parallel import MMDistributedDataParallel, is_module_wrapper
from mmcv.runner import HOOKS, Hook
from mmcls.datasets import DATASETS, BaseDataset


@DATASETS.register_module(force=True)
class TinyCIFAR(BaseDataset):
    """8 (train) or 4 (test) generated 32x32 images of the 10 CIFAR classes."""

    CLASSES = [str(i) for i in range(10)]

    def load_annotations(self):
        rng = np.random.RandomState(1 if self.test_mode else 0)
        n = 4 if self.test_mode else 8
        return [dict(img=rng.randint(0, 255, (32, 32, 3)).astype(np.uint8), gt_label=np.array(i % 10, dtype=np.int64))
                for i in range(n)]


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
    (tmp_path / "tiny_cifar_data.py").write_text(PROJECT)
    path = tmp_path / "tiny_resnet_cifar_dist.py"
    path.write_text(textwrap.dedent(f"""
        _base_ = [{str(SHIPPED)!r}]
        custom_imports = dict(imports=['tiny_cifar_data'])
        model = dict(backbone=dict(base_channels=8, stem_channels=8), head=dict(in_channels=64))
        data = dict(samples_per_gpu=2, workers_per_gpu=0, persistent_workers=False, train=dict(type='TinyCIFAR'),
                    val=dict(type='TinyCIFAR'), test=dict(type='TinyCIFAR'))
        runner = dict(max_epochs=2)
        log_config = dict(interval=1)
        lr_config = dict(policy='step', step=[1])
        evaluation = dict(interval=1, metric='accuracy')
        custom_hooks = [dict(type='RankRecord')]
        dist_params = dict(backend='gloo')
    """))
    return path


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


def _json_log(work_dir: Path) -> list[dict]:
    """The json log's records without the wall-clock fields; the first one's config without the work dir."""
    (path,) = work_dir.glob("*.log.json")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0]["config"] = _without_work_dir(records[0]["config"])
    return [{k: v for k, v in r.items() if k not in ("time", "data_time", "eta", "memory")} for r in records]


def _text_log(work_dir: Path) -> list[str]:
    """The text log's lines after the config, without time stamps and wall-clock fields."""
    (path,) = work_dir.glob("*.log")
    lines = [line.split(" - ", 3)[-1] for line in path.read_text().splitlines() if " - mmcls - " in line]
    keep = [line for line in lines if line.startswith(("Epoch", "Saving checkpoint", "Set random seed", "Distributed"))]
    return [re.sub(r"(eta|time|data_time): [^,]+, ", "", line) for line in keep]


def _checkpoint(path: Path) -> dict:
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    checkpoint["meta"]["time"] = None
    checkpoint["meta"]["config"] = _without_work_dir(checkpoint["meta"]["config"])
    messages = checkpoint["meta"].get("hook_msgs", {})
    if "last_ckpt" in messages:  # the path of the previous checkpoint, in each host's work dir
        messages["last_ckpt"] = os.path.basename(messages["last_ckpt"])
    return checkpoint


def _same_weights(mine: dict, theirs: dict, what: str) -> None:
    assert mine.keys() == theirs.keys(), what
    for key, value in theirs.items():
        assert torch.equal(mine[key], value), (what, key)


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
        _same_weights(*(torch.load(d / f"weights_rank{rank}.pth", weights_only=False) for d in (ours, ref)), f"rank {rank}")
    # runner.iter before it counts the iteration; the sampler's epoch before DistSamplerSeedHook (NORMAL, registered
    # after the custom hooks) sets it: the previous epoch's
    assert [r[1] for r in records[1][0]["iters"]] == [0, 1, 2, 3] and records[1][0]["sampler_epochs"] == [0, 0]
    assert records[1][0]["iters"][0][4] != records[1][1]["iters"][0][4]  # each rank trains its own shard
    assert records[1][0]["iters"][1][6] != records[1][1]["iters"][1][6]  # and keeps its own BN statistics
    assert _json_log(ours) == _json_log(ref)
    assert [r["mode"] for r in _json_log(ref)[1:]] == ["train", "train", "val"] * 2
    assert _text_log(ours) == _text_log(ref) and "Distributed training: True" in _text_log(ref)
    assert _without_work_dir((ours / config.name).read_text()) == _without_work_dir((ref / config.name).read_text())
    for name in ("epoch_1.pth", "epoch_2.pth"):
        mine, theirs = _checkpoint(ours / name), _checkpoint(ref / name)
        assert mine["meta"] == theirs["meta"], name
        _same_weights(mine["state_dict"], theirs["state_dict"], name)
        assert str(mine["optimizer"]) == str(theirs["optimizer"]), name
    assert os.readlink(ours / "latest.pth") == "epoch_2.pth"
