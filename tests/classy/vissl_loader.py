"""Make VISSL 0.1.6's own hook modules importable from its wheel, without pip-installing it.

The wheel also bundles its own ``classy_vision`` (0.7.0.dev) and ``fairscale``, so it is never installed: only its
``vissl/`` package is extracted (``extract_vissl``), and the real classy-vision 0.7.0 of the environment is used.
``import vissl.hooks`` (the package users import hooks from) then needs three things this environment lacks; these
stubs (``install_stubs``) provide only the names the import chain touches, and are installed only where the real
module cannot be imported:

- ``torchvision`` (not installable here): ``classy_vision.tasks``/``classy_vision.dataset`` and ``vissl.data``,
  ``vissl.models`` import transforms, datasets, samplers and ``resnet.Bottleneck`` at module level. The stub classes
  and functions are placeholders that no hook under test calls; calling a stub function raises.
- ``fairscale`` (only the copy bundled in the wheel exists): ``vissl.models``, ``vissl.utils.checkpoint`` and
  ``vissl.hooks.log_hooks`` import ``FullyShardedDataParallel`` and the FSDP wrap helpers. The stub FSDP class has no
  instances, so VISSL's ``isinstance(model, FSDP)`` checks are False, as in a VISSL run without FSDP.
- ``pkg_resources`` (removed from setuptools >= 81): ``vissl.data.dataset_catalog`` asks it for the path of the
  wheel's ``configs/config/dataset_catalog.json`` at import. The stub answers a path under the extraction folder
  where no catalog exists, so VISSL takes its documented "no catalog" path and registers no datasets.

Run this in a subprocess: the stubs live in ``sys.modules`` for the rest of the process.

Example::

    root = extract_vissl(WHEEL, tmp_path)
    install_stubs(root)
    from vissl.hooks import GradClipHook
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Where the README's test command downloads the wheel, relative to the checkout.
WHEEL = Path(__file__).resolve().parents[2] / ".venv" / "wheels" / "vissl-0.1.6-py3-none-any.whl"


class FullyShardedDataParallel:
    """Stub of fairscale's FSDP: no model is one."""


def _unavailable(name: str) -> Callable[..., Any]:
    def stub(*args: Any, **kwargs: Any) -> Any:
        raise ModuleNotFoundError(f"{name} is a stub from tests/classy/vissl_loader.py (the package is not installed)")

    stub.__name__ = name.rsplit(".", 1)[1]
    return stub


#: module -> (classes, functions) that VISSL 0.1.6 and classy-vision 0.7.0 touch while ``import vissl.hooks`` runs.
TORCHVISION: dict[str, tuple[list[str], list[str]]] = {
    "torchvision": ([], ["get_video_backend"]),
    "torchvision.transforms": ([], []),
    "torchvision.transforms._transforms_video": ([], []),
    "torchvision.transforms.functional": ([], []),
    "torchvision.datasets": (["CIFAR10", "CIFAR100", "ImageFolder", "MNIST", "STL10", "SVHN"], []),
    "torchvision.datasets.cifar": (["CIFAR10", "CIFAR100"], []),
    "torchvision.datasets.folder": ([], ["default_loader"]),
    "torchvision.datasets.hmdb51": (["HMDB51"], []),
    "torchvision.datasets.kinetics": (["Kinetics"], []),
    "torchvision.datasets.ucf101": (["UCF101"], []),
    "torchvision.datasets.samplers": ([], []),
    "torchvision.datasets.samplers.clip_sampler": (
        ["DistributedSampler", "RandomClipSampler", "UniformClipSampler"],
        [],
    ),
    "torchvision.models": ([], []),
    "torchvision.models.resnet": (["Bottleneck"], []),
}
FAIRSCALE: dict[str, tuple[list[str], list[str]]] = {
    "fairscale": ([], []),
    "fairscale.nn": ([], ["auto_wrap", "checkpoint_wrapper", "default_auto_wrap_policy", "enable_wrap"]),
    "fairscale.nn.data_parallel": ([], ["auto_wrap_bn"]),
}


def extract_vissl(wheel: Path, dest: Path) -> Path:
    """Extract only the wheel's ``vissl/`` package into ``dest``; return ``dest`` (the folder to put on sys.path)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(dest, [name for name in archive.namelist() if name.startswith("vissl/")])
    return dest


def _stub_package(table: dict[str, tuple[list[str], list[str]]]) -> list[str]:
    if importlib.util.find_spec(next(iter(table))) is not None:
        return []
    for name, (classes, functions) in table.items():
        module = types.ModuleType(name, "stub: see tests/classy/vissl_loader.py")
        module.__path__ = []  # a package, so its submodules import
        for cls in classes:
            setattr(module, cls, type(cls, (), {"__module__": name}))
        for function in functions:
            setattr(module, function, _unavailable(f"{name}.{function}"))
        sys.modules[name] = module
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)
    if "fairscale.nn" in table:
        sys.modules["fairscale.nn"].FullyShardedDataParallel = FullyShardedDataParallel
        sys.modules["fairscale.nn.data_parallel"].FullyShardedDataParallel = FullyShardedDataParallel
    return list(table)


def install_stubs(root: Path) -> list[str]:
    """Put ``root`` on sys.path and stub what ``import vissl.hooks`` lacks; return the stubbed module names."""
    sys.path.insert(0, str(root))
    stubbed = _stub_package(TORCHVISION) + _stub_package(FAIRSCALE)
    if importlib.util.find_spec("pkg_resources") is None:
        resources = types.ModuleType("pkg_resources", "stub: see tests/classy/vissl_loader.py")
        resources.resource_filename = lambda package, resource: os.path.join(root, package, resource)
        sys.modules["pkg_resources"] = resources
        stubbed.append("pkg_resources")
    return stubbed
