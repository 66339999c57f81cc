"""iMIX's hook contract without imix installed (it pins torch 1.7).

Same contracts as ``imix.engine.hooks``: six argument-less mount points, the host reached as ``self.trainer``, a
``level`` that orders hooks, a ``HOOKS`` registry and ``build_hook(cfg, default_args)``. Unlike iMIX, ``level``
accepts upper- or lower-case names (``'HIGH'`` crashes there) and :func:`build_custom_hooks` never crashes on a level
below every other hook. The two hooks iMIX documents but never shipped, :class:`AutogradAnomalyDetectHook` and
:class:`AutogradProfilerHook`, are registered here.

Hook files written against ``imix.engine.hooks`` run without imix after :func:`install_import_alias`::

    from lightning_hooks.compat.imix import install_import_alias
    install_import_alias()            # no-op (returns False) when a real imix is installed
    from imix.engine.hooks import HookBase
"""

from __future__ import annotations

import enum
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from lightning_hooks.core.errors import add_note, unknown_name

_ALIASES = ("imix", "imix.engine", "imix.engine.hooks", "imix.engine.hooks.base_hook", "imix.engine.hooks.builder")


class PriorityStatus(enum.Enum):
    HIGHEST = 0
    HIGHER = 10
    HIGH = 20
    NORMAL = 30
    LOW = 40
    LOWER = 50
    LOWEST = 60


def get_level(level: PriorityStatus | str | int | Any) -> PriorityStatus:
    """A ``PriorityStatus`` from a member (iMIX's or ours), a case-insensitive name or its int value."""
    if isinstance(level, enum.Enum) and type(level).__name__ == "PriorityStatus":
        return PriorityStatus[level.name]
    if isinstance(level, str) and level.upper() in PriorityStatus.__members__:
        return PriorityStatus[level.upper()]
    if isinstance(level, int) and not isinstance(level, bool) and level in {p.value for p in PriorityStatus}:
        return PriorityStatus(level)
    raise ValueError(
        f"unknown iMIX level {level!r}: use a PriorityStatus member, one of {list(PriorityStatus.__members__)} "
        f"or one of {[p.value for p in PriorityStatus]}"
    )


def set_level(hook: Any, level: PriorityStatus | str | int) -> None:
    """Set ``hook``'s level without iMIX's setter bugs, keeping the enum class the hook already uses."""
    enum_cls = type(hook.level)
    hook._level = enum_cls[get_level(level).name]


class HookBase:
    """Base class of iMIX-style hooks. The adapter sets ``self.trainer`` to a weak proxy of its trainer facade.

    Example::

        class PrintLoss(HookBase):
            def after_train_iter(self):
                print(self.trainer.iter, float(self.trainer.output["loss"]))
    """

    trainer: Any

    def __init__(self) -> None:
        self._level = PriorityStatus.NORMAL

    def before_train(self) -> None: ...

    def after_train(self) -> None: ...

    def before_train_iter(self) -> None: ...

    def after_train_iter(self) -> None: ...

    def before_train_epoch(self) -> None: ...

    def after_train_epoch(self) -> None: ...

    @property
    def level(self) -> PriorityStatus:
        return self._level

    @level.setter
    def level(self, level: PriorityStatus | str | int) -> None:
        self._level = get_level(level)


class Registry:
    """Name -> class mapping with iMIX's ``register_module`` decorator contract."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module_dict: dict[str, type] = {}

    def register_module(self, name: str | None = None, module: type | None = None) -> Any:
        def register(cls: type) -> type:
            key = name or cls.__name__
            if not inspect.isclass(cls):
                raise TypeError(f"{self.name} registry: {cls!r} is not a class")
            if key in self.module_dict:
                raise KeyError(f"{key} is already registered in the {self.name} registry")
            self.module_dict[key] = cls
            return cls

        return register if module is None else register(module)

    def get(self, name: str) -> type:
        if name not in self.module_dict:
            raise KeyError(f"{name} is not in the {self.name} registry!")
        return self.module_dict[name]

    def __contains__(self, name: str) -> bool:
        return name in self.module_dict

    def __len__(self) -> int:
        return len(self.module_dict)


HOOKS = Registry("hook")


def real_hooks() -> types.ModuleType | None:
    """The installed ``imix.engine.hooks`` package, or ``None`` when imix is absent (or only aliased here)."""
    module = sys.modules.get("imix.engine.hooks")
    if module is not None:
        return None if getattr(module, "__lightning_hooks_alias__", False) else module
    if importlib.util.find_spec("imix") is None:
        return None
    import imix.engine.hooks

    return imix.engine.hooks


def build_hook(cfg: dict[str, Any], default_args: dict[str, Any] | None = None) -> Any:
    """Build a hook from ``dict(type=..., **kwargs)`` as iMIX's ``build_hook`` does.

    ``type`` is a class or a name looked up in :data:`HOOKS`, then in imix's own registry when imix is installed.
    """
    if not isinstance(cfg, dict):
        raise TypeError(f"build_hook: cfg must be a dict, got {type(cfg).__name__}")
    args = dict(cfg)
    for key, value in (default_args or {}).items():
        args.setdefault(key, value)
    if "type" not in args:
        raise KeyError("build_hook: the cfg or default_args must contain the key 'type'")
    kind = args.pop("type")
    if isinstance(kind, str):
        real = real_hooks()
        registries: list[Any] = [HOOKS] if real is None else [HOOKS, real.builder.HOOKS]  # ours, imix's
        registry = next((r for r in registries if kind in r), None)
        if registry is None:
            names = [n for r in registries for n in getattr(r, "module_dict", None) or r._module_dict]
            raise KeyError(unknown_name("iMIX hook type", kind, names))
        cls = registry.get(kind)
    elif inspect.isclass(kind):
        cls = kind
    else:
        raise TypeError(f"build_hook: 'type' must be a name or a class, got {type(kind).__name__}")
    try:
        return cls(**args)
    except Exception as err:
        add_note(err, f"[lightning-hooks] while building iMIX hook {cls.__name__} from {cfg!r}")
        raise


def build_custom_hooks(custom_hooks: list[dict[str, Any]]) -> list[Any]:
    """iMIX's ``cfg.custom_hooks``: each ``dict(type=..., level=..., **kwargs)`` built, its ``level`` applied.

    The adapter then orders all hooks as iMIX's ``add_custom_hooks`` does (after the last hook of lower or equal
    level), including hooks with a level below every other one (a ``TypeError`` in iMIX).
    """
    hooks = []
    for cfg in custom_hooks:
        cfg = dict(cfg)
        level = cfg.pop("level", PriorityStatus.NORMAL)
        hook = build_hook(cfg)
        set_level(hook, level)
        hooks.append(hook)
    return hooks


@HOOKS.register_module()
class AutogradAnomalyDetectHook(HookBase):
    """Turn autograd anomaly detection on (``mode=True``) for the training run, then restore the previous setting.

    iMIX documents this hook (``set_detect_anomaly(mode)`` in ``before_train``) but never shipped it.

    Example::

        IMIXAdapter([OptimizerHook(), AutogradAnomalyDetectHook()])
    """

    def __init__(self, mode: bool = True, check_nan: bool = True) -> None:
        super().__init__()
        self._mode = mode
        self._check_nan = check_nan
        self._previous: tuple[bool, bool] | None = None

    def before_train(self) -> None:
        self._previous = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
        torch.autograd.set_detect_anomaly(self._mode, self._check_nan)

    def after_train(self) -> None:
        if self._previous is not None:
            torch.autograd.set_detect_anomaly(*self._previous)
            self._previous = None


@HOOKS.register_module()
class AutogradProfilerHook(HookBase):
    """Profile the iterations ``enable_predicate(trainer)`` selects with ``torch.profiler``.

    Each profiled iteration (``before_train_iter`` to ``after_train_iter`` of this hook, so hooks of higher level
    such as OptimizerHook's backward and step fall inside it) writes a Chrome trace
    ``profiler-trace-iter{iter}.json`` to ``output_dir``. iMIX documents this hook but never shipped it.

    Example::

        AutogradProfilerHook(lambda trainer: trainer.iter in (2, 3), output_dir="work_dir/traces")
    """

    def __init__(self, enable_predicate: Callable[[Any], bool], output_dir: str | os.PathLike, use_cuda: bool = True):
        super().__init__()
        self._enable_predicate = enable_predicate
        self._output_dir = os.fspath(output_dir)
        self._use_cuda = use_cuda
        self._profiler: torch.profiler.profile | None = None

    def before_train_iter(self) -> None:
        if self._enable_predicate(self.trainer):
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self._use_cuda and torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()

    def after_train_iter(self) -> None:
        if self._profiler is None:
            return
        profiler, self._profiler = self._profiler, None
        profiler.__exit__(None, None, None)
        os.makedirs(self._output_dir, exist_ok=True)
        profiler.export_chrome_trace(os.path.join(self._output_dir, f"profiler-trace-iter{self.trainer.iter}.json"))

    def after_train(self) -> None:
        if self._profiler is not None:  # training ended (or failed) inside a profiled iteration
            self._profiler.__exit__(None, None, None)
            self._profiler = None


def install_import_alias() -> bool:
    """Make ``import imix.engine.hooks`` resolve to this module when imix is not installed.

    Returns True when the alias is (or already was) in place, False when a real imix is importable: a real
    installation is never shadowed.
    """
    if sys.modules.get("imix.engine.hooks") is _ALIAS:
        return True
    if any(name in sys.modules for name in _ALIASES) or importlib.util.find_spec("imix") is not None:
        return False
    for name in _ALIASES:
        sys.modules[name] = _ALIAS if name.startswith("imix.engine.hooks") else _package(name)
    vars(sys.modules["imix"])["engine"] = sys.modules["imix.engine"]
    vars(sys.modules["imix.engine"])["hooks"] = _ALIAS
    return True


def _package(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"lightning-hooks alias package standing in for {name} (imix is not installed)")
    module.__path__ = []
    vars(module)["__lightning_hooks_alias__"] = True
    return module


_ALIAS = sys.modules[__name__]
__lightning_hooks_alias__ = True
base_hook = builder = _ALIAS
