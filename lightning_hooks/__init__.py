"""lightning-hooks: run Classy Vision / VISSL, iMIX and MMEngine hooks unchanged inside ``lightning.Trainer``.

The names below import on first use, so that the ``lightning-hooks`` console script starts without torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from lightning_hooks.adapt import adapt
    from lightning_hooks.config import build_callbacks
    from lightning_hooks.families.classy import ClassyAdapter
    from lightning_hooks.families.imix import IMIXAdapter
    from lightning_hooks.families.mmcv import MMCVAdapter
    from lightning_hooks.families.mmengine import MMEngineAdapter

_HOMES = {
    "ClassyAdapter": "lightning_hooks.families.classy",
    "IMIXAdapter": "lightning_hooks.families.imix",
    "MMCVAdapter": "lightning_hooks.families.mmcv",
    "MMEngineAdapter": "lightning_hooks.families.mmengine",
    "adapt": "lightning_hooks.adapt",
    "build_callbacks": "lightning_hooks.config",
}
__all__ = sorted(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'lightning_hooks' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


class _Package(types.ModuleType):
    """``lightning_hooks.adapt`` is the function, also once its submodule ``lightning_hooks.adapt`` is imported
    (the import system then binds the submodule to the package's attribute of the same name)."""

    @property
    def adapt(self) -> Callable[..., Any]:
        return importlib.import_module("lightning_hooks.adapt").adapt

    @adapt.setter
    def adapt(self, submodule: types.ModuleType) -> None:
        """Ignore the submodule the import system binds here; it stays reachable in ``sys.modules``."""


sys.modules[__name__].__class__ = _Package
