"""mmdet 2.x and mmseg 0.x in a test's subprocess on the CPU build of mmcv 1.7 (built without its compiled ops):
:func:`without_compiled_ops` imports the library with ``mmcv._ext`` stubbed (tests/helpers/openmmlab_stubs.py; no
model path under test calls an op) and has ``collect_env`` answer "n/a" for the ops' compiler versions, as
``mmcv_testkit.stub_collect_env`` does in-process. Both sides of a multi-process differential run it first
(tests/helpers/mmcv_dist_train.py for the library's ``tools/train.py``).

Usage: ``python mmcv_cpu_ops.py PACKAGE train CONFIG [lightning-hooks train arguments ...]``: ``lightning-hooks``
with PACKAGE imported so (Lightning's DDP launcher starts the other processes with the same command).
"""

from __future__ import annotations

import importlib
import sys

import torch
from openmmlab_stubs import stubs

#: the modules of each library that import mmcv's compiled ops
MODULES = ("models", "apis", "datasets", "utils", "core")


def without_compiled_ops(package: str) -> None:
    """Import ``package`` (mmdet, mmseg) with the ops stubbed, and ``collect_env`` without the ops' versions; mmcv's
    ``nms`` op (a detector's test: ``DistEvalHook``) computed by :func:`cpu_nms`."""
    if package == "mmcls":  # imports no op
        return
    with stubs():
        for module in MODULES:
            importlib.import_module(f"{package}.{module}")
    ops = sys.modules["mmcv.ops"]
    for name in ("get_compiler_version", "get_compiling_cuda_version"):
        setattr(ops, name, lambda: "n/a")
    sys.modules["mmcv.ops.nms"].ext_module.nms = cpu_nms


def cpu_nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float, offset: int = 0) -> torch.Tensor:
    """What mmcv's compiled ``nms`` op computes on the CPU: greedy non-maximum suppression in descending score order
    (a box is dropped when its IoU with a kept one exceeds ``iou_threshold``; ``offset`` added to widths and
    heights), the kept indices in that order."""
    x1, y1, x2, y2 = boxes.unbind(1)
    areas = (x2 - x1 + offset) * (y2 - y1 + offset)
    order = scores.sort(0, descending=True)[1]
    suppressed = torch.zeros(len(boxes), dtype=torch.bool)
    keep = []
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        width = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1) + offset).clamp(min=0)
        height = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1) + offset).clamp(min=0)
        inter = width * height
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


def main() -> None:
    without_compiled_ops(sys.argv[1])
    from lightning_hooks.cli import main as lightning_hooks

    lightning_hooks(sys.argv[2:])  # sys.argv as it is: Lightning's DDP launcher starts the others with it


if __name__ == "__main__":
    main()
