"""Classy Vision's hook contract without classy_vision installed (it needs torchvision).

Same contracts as ``classy_vision.hooks``: five abstract mount points taking ``task``, per-hook state in
``self.state``, ``name()`` keying that state in checkpoints, ``from_config``, and the registry
(``register_hook``/``build_hook``/``build_hooks``). :func:`install_import_alias` lets a hook file that does
``from classy_vision.hooks import ClassyHook, register_hook`` import this module instead when, and only when,
classy_vision is not installed.

Example::

    from lightning_hooks.compat.classy import install_import_alias
    install_import_alias()
    from classy_vision.hooks import ClassyHook, register_hook  # the real package if installed, else this module
"""

from __future__ import annotations

import copy
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

__all__ = [
    "HOOK_REGISTRY",
    "ClassyHook",
    "ClassyHookFunctions",
    "ClassyHookState",
    "build_hook",
    "build_hooks",
    "install_import_alias",
    "register_hook",
]

HOOK_REGISTRY: dict[str, type[ClassyHook]] = {}
HOOK_CLASS_NAMES: set[str] = set()


class ClassyHookState:
    """Attributes set on it are the hook's checkpointed state."""

    def get_classy_state(self) -> dict[str, Any]:
        return self.__dict__

    def set_classy_state(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)


class ClassyHookFunctions(Enum):
    """Classy's seven mount points (VISSL adds on_backward, on_update and on_exception)."""

    on_start = "on_start"
    on_phase_start = "on_phase_start"
    on_forward = "on_forward"
    on_loss_and_meter = "on_loss_and_meter"
    on_step = "on_step"
    on_phase_end = "on_phase_end"
    on_end = "on_end"


class ClassyHook(ABC):
    """Base class of Classy-style hooks; subclasses define the five mount points (``on_x = ClassyHook._noop``)."""

    def __init__(self) -> None:
        self.state = ClassyHookState()

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ClassyHook:
        return cls(**config)

    def _noop(self, *args: Any, **kwargs: Any) -> None:  # noqa: B027  (concrete on purpose: the do-nothing mount point)
        """Assign to a mount point the hook does not use."""

    @classmethod
    def name(cls) -> str:
        return cls.__name__

    def get_classy_state(self) -> dict[str, Any]:
        return self.state.get_classy_state()

    def set_classy_state(self, state_dict: dict[str, Any]) -> None:
        self.state.set_classy_state(state_dict)

    @abstractmethod
    def on_start(self, task: Any) -> None: ...

    @abstractmethod
    def on_phase_start(self, task: Any) -> None: ...

    @abstractmethod
    def on_step(self, task: Any) -> None: ...

    @abstractmethod
    def on_phase_end(self, task: Any) -> None: ...

    @abstractmethod
    def on_end(self, task: Any) -> None: ...


def register_hook(name: str, bypass_checks: bool = False) -> Callable[[type[ClassyHook]], type[ClassyHook]]:
    """Register a :class:`ClassyHook` subclass under ``name`` so that :func:`build_hook` can build it from a config.

    Like Classy, it rejects a duplicate name, a duplicate class name and a class that is not a ClassyHook, unless
    ``bypass_checks`` is set.
    """

    def register(cls: type[ClassyHook]) -> type[ClassyHook]:
        if not bypass_checks:
            if name in HOOK_REGISTRY:
                raise ValueError(f"Cannot register duplicate hook ({name}): {HOOK_REGISTRY[name].__qualname__}")
            if not (isinstance(cls, type) and issubclass(cls, ClassyHook)):
                raise ValueError(f"Hook ({name}: {getattr(cls, '__name__', cls)}) must extend ClassyHook")
            if cls.__name__ in HOOK_CLASS_NAMES:
                raise ValueError(f"Cannot register hook with duplicate class name ({cls.__name__})")
        HOOK_REGISTRY[name] = cls
        HOOK_CLASS_NAMES.add(cls.__name__)
        return cls

    return register


def build_hook(hook_config: dict[str, Any]) -> ClassyHook:
    """Build a registered hook from ``{"name": ..., **kwargs}`` through its ``from_config`` (the config is copied)."""
    if hook_config.get("name") not in HOOK_REGISTRY:
        raise KeyError(
            f"Unregistered hook {hook_config.get('name')!r}: decorate the class with register_hook and import its "
            f"file before building it. Registered: {sorted(HOOK_REGISTRY)}"
        )
    config = copy.deepcopy(hook_config)
    return HOOK_REGISTRY[config.pop("name")].from_config(config)


def build_hooks(hook_configs: Sequence[dict[str, Any]]) -> list[ClassyHook]:
    return [build_hook(config) for config in hook_configs]


# ------------------------------------------------------------------------------------------------- import alias
_ALIASED = ("classy_vision", "classy_vision.hooks")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: answers ``classy_vision[.hooks]`` only when no earlier finder found the package."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _ALIASED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname == "classy_vision")

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        module = types.ModuleType(spec.name, "lightning-hooks' stand-in for classy_vision (hooks only)")
        if spec.name == "classy_vision":
            module.__path__ = []
        else:
            module.__dict__.update({name: globals()[name] for name in __all__})
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the modules are complete when created."""


def install_import_alias() -> bool:
    """Make ``import classy_vision.hooks`` resolve to this module when classy_vision is not installed.

    The finder goes last on ``sys.meta_path``, so an installed classy_vision (found by the normal path finder) always
    wins. Returns True when the alias is in place, False when a real classy_vision is importable. Idempotent.
    """
    if any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        return True
    if "classy_vision" in sys.modules or importlib.util.find_spec("classy_vision") is not None:
        return False
    sys.meta_path.append(_AliasFinder())
    return True
