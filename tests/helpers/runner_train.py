"""``tools/train.py CONFIG --work-dir DIR`` for the tests: ``Runner.from_cfg(cfg).train()``; launched by torchrun
(``RANK`` set) it runs as ``--launcher pytorch`` on CPU with gloo.

MMEngine's Runner assumes a GPU per process under a launcher: ``init_dist`` sets the CUDA device and the model wrapper
gets ``device_ids=[LOCAL_RANK]``. Here the CUDA call is a no-op and the wrapper ``MMDistributedDataParallel`` with
``device_ids=None`` (a CPU module), with the Runner's other defaults (``broadcast_buffers=False``).

Usage: ``python -m torch.distributed.run --nproc_per_node 2 runner_train.py CONFIG WORK_DIR [--resume]``
"""

from __future__ import annotations

import os
import sys

import torch
from mmengine.config import Config
from mmengine.runner import Runner

if __name__ == "__main__":
    cfg = Config.fromfile(sys.argv[1])
    cfg.work_dir = sys.argv[2]
    if "--resume" in sys.argv[3:]:  # tools/train.py --resume: the work dir's latest checkpoint
        cfg.resume, cfg.load_from = True, None
    if "RANK" in os.environ:
        cfg.launcher = "pytorch"
        cfg.env_cfg = dict(cfg.get("env_cfg") or {}, dist_cfg=dict(backend="gloo"))
        cfg.model_wrapper_cfg = dict(  # Runner.wrap_model's default wrapper, on CPU (device_ids=None)
            type="MMDistributedDataParallel", device_ids=None, broadcast_buffers=False,
            find_unused_parameters=cfg.get("find_unused_parameters", False))
        torch.cuda.set_device = lambda device: None
    Runner.from_cfg(cfg).train()
    if torch.distributed.is_initialized():  # tools/train.py leaves the group to the interpreter's exit, where gloo's
        torch.distributed.destroy_process_group()  # threads once aborted a rank after a finished run (SIGABRT)
