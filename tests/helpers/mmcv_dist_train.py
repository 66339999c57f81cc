"""An OpenMMLab 1.x library's own ``tools/train.py`` under ``torchrun`` (``--launcher pytorch``), as its
``tools/dist_train.sh`` runs it, on CPU with gloo.

Usage: ``torchrun --nproc_per_node 2 mmcv_dist_train.py PACKAGE CONFIG [tools/train.py arguments ...]``.

The scripts only run distributed on GPUs; two CPU gaps are bridged here, each the smallest change a CPU user makes:
mmcv's ``init_dist('pytorch')`` calls ``torch.cuda.set_device(rank % device_count())`` (a division by zero without a
GPU) before ``init_process_group``, and the training API's ``wrap_distributed_model`` / ``build_ddp`` refuses the
``cpu`` device; here the process group is initialised without a CUDA device, and the model is wrapped in mmcv's
``MMDistributedDataParallel`` without ``device_ids`` (the CPU form of the same wrapper, with the arguments the API
passes: ``broadcast_buffers=False``, ``find_unused_parameters``), the batch scattered to the CPU as mmcv scatters it
to the GPU (:class:`CPUDistributedDataParallel`). And one gap of mmcv 1.7 with torch 2.x, on any
device: ``MMDistributedDataParallel``'s forward (``DistEvalHook``'s test) reads ``_use_replicated_tensor_module``,
which torch 1.13's DDP had and torch 2 dropped; it is False here, as torch 1.13 set it without that experimental flag.
``IterBasedRunner.resume`` (``resume_from`` of an iteration-based config) loads onto ``torch.cuda.current_device()``
unless given a ``map_location``: it resumes with ``map_location="cpu"``, as a CPU user passes it.
mmdet and mmseg import mmcv's compiled ops, which this CPU build lacks: stubbed (tests/helpers/mmcv_cpu_ops.py).
"""

from __future__ import annotations

import functools
import importlib
import runpy
import sys
from pathlib import Path

import torch.distributed as dist
from mmcv.parallel import MMDistributedDataParallel, scatter_kwargs
from mmcv.runner import IterBasedRunner, dist_utils
from mmcv_cpu_ops import without_compiled_ops

WRAPPERS = {"mmcls": "wrap_distributed_model", "mmdet": "build_ddp", "mmseg": "build_ddp"}


def init_pytorch_on_cpu(backend: str, **kwargs) -> None:
    dist.init_process_group(backend=backend, **kwargs)


class CPUDistributedDataParallel(MMDistributedDataParallel):
    """``MMDistributedDataParallel`` without ``device_ids`` calls the model on the batch as collated (``DataContainer``
    and all); with a GPU it scatters the batch to its device first. Here the batch is scattered to the CPU (device -1,
    as mmcv's ``MMDataParallel`` does on CPU), then mmcv's own step runs."""

    def train_step(self, *inputs, **kwargs):
        inputs, kwargs = scatter_kwargs(inputs, kwargs, [-1], dim=self.dim)
        return super().train_step(*inputs[0], **kwargs[0])

    def val_step(self, *inputs, **kwargs):
        inputs, kwargs = scatter_kwargs(inputs, kwargs, [-1], dim=self.dim)
        return super().val_step(*inputs[0], **kwargs[0])

    def _run_ddp_forward(self, *inputs, **kwargs):
        inputs, kwargs = scatter_kwargs(inputs, kwargs, [-1], dim=self.dim)
        return super()._run_ddp_forward(*inputs[0], **kwargs[0])


def wrap_on_cpu(model, device="cuda", *args, **kwargs):
    kwargs.pop("device_ids", None)
    return CPUDistributedDataParallel(model, *args, **kwargs)


def main() -> None:
    package, argv = sys.argv[1], sys.argv[2:]
    without_compiled_ops(package)
    dist_utils._init_dist_pytorch = init_pytorch_on_cpu
    MMDistributedDataParallel._use_replicated_tensor_module = False
    IterBasedRunner.resume = functools.partialmethod(IterBasedRunner.resume, map_location="cpu")
    train_api = importlib.import_module(f"{package}.apis.train")
    setattr(train_api, WRAPPERS[package], wrap_on_cpu)
    script = Path(importlib.import_module(package).__file__).parent / ".mim" / "tools" / "train.py"
    sys.argv = [str(script), *argv]
    runpy.run_path(str(script), run_name="__main__")
    if dist.is_initialized():  # tools/train.py leaves the group to the interpreter's exit, where gloo's threads
        dist.destroy_process_group()  # once aborted a rank after a finished run (SIGABRT)


if __name__ == "__main__":
    main()
