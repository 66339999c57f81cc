"""Only rank 0 writes, OpenMMLab 1.x (mmcv.runner), in ``.venv-mmcv1`` (run from the main suite by
tests/families/mmcv/test_venv_ddp.py, with the family's other 2-process tests): ``lightning-hooks train --devices 2``
with every Lightning logger against mmcls 0.x's own ``tools/train.py --launcher pytorch`` under torchrun
(tests/helpers/mmcv_dist_train.py, as its ``dist_train.sh``), on mmcv_train_kit's tiny ResNet CIFAR config (one epoch,
evaluation, a checkpoint), each rank's writes under its work dir (tests/helpers/write_audit.py) compared rank by
rank."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import write_audit
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)
from write_audit_runs import LOGGERS

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")
from mmcv_train_kit import tiny_resnet_cifar


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_mmcv_ranks_write_what_dist_train_sh_ranks_write(tmp_path):
    config = tiny_resnet_cifar(tmp_path / "tiny_resnet_cifar_dist.py", samples_per_gpu=2, lines="""
        runner = dict(max_epochs=1)
        checkpoint_config = dict(interval=1)
        dist_params = dict(backend='gloo')
    """)  # fmt: skip  # the config's lines under the call
    records = tmp_path / "writes"
    env = subprocess_env(tmp_path, write_audit.SITE, drop=DDP_LAUNCH_VARIABLES, OMP_NUM_THREADS="1",
                         **write_audit.env(records, tmp_path))  # fmt: skip
    commands = {
        "ours": [sys.executable, "-m", "lightning_hooks", "train", str(config), "--work-dir", str(tmp_path / "ours"),
                 "--seed", "0", "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp", *LOGGERS],
        "ref": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", _port(),
                str(HELPERS / "mmcv_dist_train.py"), "mmcls", str(config), "--work-dir", str(tmp_path / "ref"),
                "--seed", "0", "--launcher", "pytorch"],
    }  # fmt: skip
    for side, command in commands.items():
        proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (side, proc.stdout[-3000:] + proc.stderr[-6000:])
    sides = write_audit.by_side(write_audit.writes(records))
    assert "write epoch_1.pth" in sides["ref"][0] and 1 in sides["ref"]  # the host's rank 1 ran here
    assert write_audit.differences(sides["ref"], sides["ours"]) == {}
