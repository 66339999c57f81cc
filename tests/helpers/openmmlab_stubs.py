"""Import mmdet, mmpretrain, mmsegmentation, mmyolo, mmpose and mmagic in the test venv: stubs for what mmcv-lite, the
CPU torch and numpy 2 lack.

- ``mmcv._ext`` (mmcv's compiled ops; ``mmcv.ops`` checks its functions exist when imported): NMS and RoIAlign are
  pure-torch stand-ins (tests/helpers/torch_ops.py: two-stage detectors and Mask R-CNN train on them, under both hosts
  compared); every other function raises when called. ``mmcv.ops`` keeps the module it imported, so the stand-ins
  serve it after the ``with`` block too.
- ``torchvision`` (the registry's wheels are CUDA builds that do not load with the CPU torch): only while the
  libraries import, with the names mmpretrain and mmagic touch at import time; they raise or are inert when used.
- ``numpy.bool8`` (removed in numpy 2; mmagic 1.2 reads it at import): an alias of ``numpy.bool_``, only while the
  libraries import. mmagic's modules that need packages the test venv lacks (``mmagic.models``: diffusers;
  ``mmagic.evaluation``: torchvision's models) are not imported: ``mmagic.engine`` (hooks, loops, optimizers) and
  ``mmagic.visualization`` are (:data:`MMAGIC`).

The stubs are in place only while the libraries import: afterwards mmengine finds no compiled mmcv (as
with mmcv-lite) and tests that stub torchvision their own way (tests/families/classy) are not affected.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

import numpy
from torch_ops import OPS

LIBRARIES = ("mmdet", "mmpretrain", "mmseg")
#: the mmagic modules that import in the test venv (see above), for :func:`import_modules`
MMAGIC = ("mmagic.engine", "mmagic.visualization")


def _ext_function(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"mmcv._ext.{name} is a test stub (tests/helpers/openmmlab_stubs.py): mmcv-lite has no ops")

    return unavailable


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name, "stub: see tests/helpers/openmmlab_stubs.py")
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
    module.__path__ = []
    module.__dict__.update(attrs)
    return module


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class RandomResizedCrop:
    """Stub base class (mmpretrain subclasses it at import); building it raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("torchvision is a test stub (tests/helpers/openmmlab_stubs.py)")


def _torchvision() -> dict[str, types.ModuleType]:
    transforms_transforms = _module("torchvision.transforms.transforms", InterpolationMode=InterpolationMode)
    functional = _module("torchvision.transforms.functional")
    transforms = _module(
        "torchvision.transforms", RandomResizedCrop=RandomResizedCrop, InterpolationMode=InterpolationMode,
        functional=functional, transforms=transforms_transforms, ToPILImage=RandomResizedCrop,  # mmpose's SimCC plots
    )  # fmt: skip
    boxes = _module("torchvision.ops.boxes")
    ops = _module("torchvision.ops", boxes=boxes)
    utils = _module("torchvision.utils", make_grid=_make_grid)  # mmagic.utils imports it
    root = _module("torchvision", transforms=transforms, ops=ops, utils=utils)
    return {m.__name__: m for m in (root, transforms, transforms_transforms, functional, ops, boxes, utils)}


def _make_grid(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("torchvision.utils.make_grid is a test stub (tests/helpers/openmmlab_stubs.py)")


@contextlib.contextmanager
def stubs() -> Iterator[None]:
    """The stubs in ``sys.modules`` for the ``with`` block (for what is missing only), then the modules as they were."""
    stubbed = {} if importlib.util.find_spec("torchvision") is not None else _torchvision()
    if importlib.util.find_spec("mmcv._ext") is None:
        stubbed["mmcv._ext"] = ext = _module("mmcv._ext", **OPS)
        ext.__getattr__ = _ext_function
    saved = {name: sys.modules.get(name) for name in stubbed}
    sys.modules.update(stubbed)
    aliased = not hasattr(numpy, "bool8")
    if aliased:  # removed in numpy 2; mmagic 1.2's mmagic.utils reads it at import
        numpy.bool8 = numpy.bool_
    try:
        yield
    finally:
        if aliased:
            del numpy.bool8
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def import_openmmlab(libraries: Sequence[str] = LIBRARIES) -> None:
    """Import ``libraries`` and register all their modules (what a Runner with their default scope finds)."""
    with stubs():
        for library in libraries:
            importlib.import_module(f"{library}.utils").register_all_modules(init_default_scope=False)


def import_modules(modules: Sequence[str]) -> None:
    """Import only ``modules`` (e.g. ``mmpose.engine.hooks``), for libraries whose ``register_all_modules`` imports
    compiled packages that the test venv lacks (mmpose's datasets need xtcocotools)."""
    with stubs():
        for module in modules:
            importlib.import_module(module)
