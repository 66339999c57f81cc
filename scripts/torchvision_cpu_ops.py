"""Let the CUDA build of torchvision import on the CPU torch in ``.venv-mmcv1`` (installed there by ``scripts/setup.sh
test`` with a ``.pth`` line that imports this module at interpreter start).

``mmcv.runner`` (mmcv 1.x) imports torchvision, and so do torchmetrics and Lightning whenever it is installed. The
registry's torchvision 0.28.0 is a CUDA build whose compiled ops need ``libtorch_cuda.so``: its import fails with
``operator torchvision::nms does not exist`` unless the ``torchvision::nms`` / ``torchvision::qnms`` op schemas are
defined first (no kernels: nothing here runs NMS). This module defines them right before the first ``import
torchvision``, from a ``sys.meta_path`` finder, so interpreters that never import torchvision (pip) do not pay for
importing torch. tests/helpers/real_torchvision.py does the same for the main venv's test subprocesses.
"""

from __future__ import annotations

import sys

OP_SCHEMAS = {
    "torchvision::nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "torchvision::qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


class DefineOpsBeforeTorchvision:
    """A meta path finder that finds nothing: at the first lookup of ``torchvision`` it defines the op schemas and
    removes itself, then the regular finders import torchvision."""

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> None:
        if name == "torchvision":
            sys.meta_path.remove(cls)
            define_op_schemas()
        return None


def define_op_schemas() -> None:
    """Define the op schemas that torchvision's fake-tensor registrations look up, unless they exist already."""
    import torch

    for name, schema in OP_SCHEMAS.items():
        try:
            torch._C._dispatch_find_schema_or_throw(name, "")
        except RuntimeError:
            torch.library.define(name, schema)


if DefineOpsBeforeTorchvision not in sys.meta_path:
    sys.meta_path.insert(0, DefineOpsBeforeTorchvision)
