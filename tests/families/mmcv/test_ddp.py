"""mmcv 1.x hooks under Lightning DDP (CPU, gloo, 2 processes) against mmcv's single-process runner on the same data:
OptimizerHook's backward goes through DDP's gradient averaging, ranks and loader lengths are each process's, and
CheckpointHook (master only) writes once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from mmcv_testkit import BATCH, mmcv_runner, run_mmcv
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

R = mmcv_runner
ROOT = Path(__file__).resolve().parents[3]


def test_ddp_two_processes_match_the_single_process_runner(tmp_path):
    env = subprocess_env(drop=DDP_LAUNCH_VARIABLES)
    proc = subprocess.run([sys.executable, str(HELPERS / "mmcv_ddp.py"), str(tmp_path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["dist"] == [0, 2] and r1["dist"] == [1, 2]
    assert r0["iters"] == r1["iters"] == [[e, e * 4 + i, i, 4] for e in (0, 1) for i in range(4)]
    assert r0["sampler_epochs"] == r1["sampler_epochs"] == [0, 1]
    real = run_mmcv([R.StepLrUpdaterHook(step=[1]), R.OptimizerHook(grad_clip=dict(max_norm=0.5))],
                    tmp_path / "mmcv", max_epochs=2, train_batches=4, batch_size=2 * BATCH)  # fmt: skip
    for rank in (r0, r1):
        for key, value in real.model.state_dict().items():
            torch.testing.assert_close(torch.tensor(rank["weights"][key]), value, rtol=1e-5, atol=1e-6)
    assert sorted(os.listdir(tmp_path / "work")) == ["epoch_1.pth", "epoch_2.pth", "latest.pth"]
