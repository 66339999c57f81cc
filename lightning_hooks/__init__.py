"""lightning-hooks: run legacy training hooks (Classy Vision / VISSL, iMIX, MMEngine, OpenMMLab 1.x ``mmcv.runner``)
unchanged inside ``lightning.Trainer``.

The names below import on first use, so that the ``lightning-hooks`` console script starts without torch. Each
registered family's adapter is exported under its class name (``from lightning_hooks import MMCVAdapter``), read from
the family registry (``lightning_hooks/families/__init__.py``): a new family needs no line here.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the package's own names (_HOMES), as type checkers and IDEs should see them
    from lightning_hooks.adapt import adapt
    from lightning_hooks.config import build_callbacks

#: the package's own names, by the module that defines them; the families' adapters come from the registry
_HOMES = {
    "adapt": "lightning_hooks.adapt",
    "build_callbacks": "lightning_hooks.config",
}
__version__ = "0.1.0"


def _adapters() -> dict[str, type]:
    """The registered families' adapter classes by class name (imports the registry, and with it each family)."""
    families = importlib.import_module("lightning_hooks.families")
    return {family.adapter.__name__: family.adapter for family in families.registered()}


def __getattr__(name: str) -> Any:
    if name == "__all__":  # ``from lightning_hooks import *``: the package's names and every registered adapter
        return sorted([*_HOMES, *_adapters()])
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    # neither dunder probes (``__wrapped__``) nor the import system's look-up of a submodule not imported yet
    # (``from lightning_hooks import train``) import the families
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is None:
        adapter = _adapters().get(name)
        if adapter is not None:
            return adapter
    raise AttributeError(f"module 'lightning_hooks' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES, *_adapters()])


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
