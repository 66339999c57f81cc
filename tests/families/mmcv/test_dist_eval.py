"""mmcv.runner's DistEvalHook in 2 CPU processes (gloo) under Lightning DDP with MMCVAdapter, against mmcv's own
EpochBasedRunner in 2 processes (tests/helpers/mmcv_dist_eval.py runs both): each rank tests its shard, rank 0 gathers
the results in dataset order (the sampler's padding dropped), evaluates once, logs the score and saves the best
checkpoint; rank 1 evaluates nothing. mmdet 2.x's DistEvalHook (a subclass, its ``_do_evaluate`` ending in this
one's ``evaluate`` and ``_save_ckpt``) is compared with mmdet's own ``tools/train.py`` under torchrun in
test_train_ddp.py's mmdet case, each rank's records and the COCO mAPs rank 0 logs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env
from mmcv_testkit import mmcv_runner  # noqa: F401  (skips outside .venv-mmcv1)

SCRIPT = HELPERS / "mmcv_dist_eval.py"


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _run(out: Path, host: str) -> list[dict]:
    env = subprocess_env(drop=DDP_LAUNCH_VARIABLES, LH_PORT=_free_port())
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), host], cwd=out, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return [json.loads((out / f"{host}_rank{rank}.json").read_text()) for rank in (0, 1)]


def test_dist_eval_hook_in_two_processes_matches_mmcvs_runner(tmp_path):
    real = _run(tmp_path, "mmcv")
    ours = _run(tmp_path, "lightning")
    for rank in (0, 1):
        assert ours[rank]["evaluated"] == real[rank]["evaluated"]
        assert ours[rank]["seen"] == real[rank]["seen"]
    assert real[1]["evaluated"] == [] and len(real[0]["evaluated"]) == 2 and len(real[0]["evaluated"][0]) == 10
    assert real[0]["seen"][1][3] > real[0]["seen"][0][3]  # the score rose: the best checkpoint is epoch 2's
    files = [sorted(os.listdir(tmp_path / host)) for host in ("mmcv", "lightning")]
    assert files[0] == files[1] == ["best_acc_epoch_2.pth"]  # saved once (rank 0), the worse one removed
    best = [torch.load(tmp_path / host / "best_acc_epoch_2.pth", weights_only=False) for host in ("mmcv", "lightning")]
    assert torch.equal(best[0]["state_dict"]["w"], best[1]["state_dict"]["w"])
    messages = [dict(b["meta"]["hook_msgs"], best_ckpt=os.path.basename(b["meta"]["hook_msgs"]["best_ckpt"]))
                for b in best]  # its path names each host's work dir
    assert messages[0] == messages[1] == dict(best_score=real[0]["seen"][1][3], best_ckpt="best_acc_epoch_2.pth")
