"""Build hooks from MMEngine's ``default_hooks`` / ``custom_hooks`` config, as MMEngine's ``Runner`` does."""

from __future__ import annotations

import copy
import difflib
from typing import Any

from mmengine.hooks import Hook
from mmengine.registry import HOOKS, Registry
from mmengine.runner import Priority, Runner, get_priority


class _Registrar:
    """Just enough of a runner for MMEngine's own ``register_*`` methods: the same merge, build and priority queue."""

    register_hooks = Runner.register_hooks
    register_default_hooks = Runner.register_default_hooks
    register_custom_hooks = Runner.register_custom_hooks
    register_hook = Runner.register_hook

    def __init__(self) -> None:
        self._hooks: list[Hook] = []


def build_hooks(
    default_hooks: dict[str, dict | Hook | None] | None = None,
    custom_hooks: list[dict | Hook] | None = None,
    default_scope: str | None = None,
) -> list[Hook]:
    """MMEngine's hook list for ``default_hooks`` merged over its defaults plus ``custom_hooks``, in priority order.

    A ``default_hooks`` key set to ``None`` removes that default hook; a ``priority`` key in a config overrides the
    class priority; equal priorities keep registration order (defaults first). Types resolve through MMEngine's
    ``HOOKS`` registry under ``default_scope`` (a downstream project's scope, as ``Runner(default_scope=...)``), its
    parents and its children (``"scope.Name"``).

    Example::

        hooks = build_hooks(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=2), timer=None),
                            custom_hooks=[dict(type="EMAHook", priority="NORMAL")])
        trainer = Trainer(callbacks=[MMEngineAdapter(hooks, work_dir="work")])
    """
    # configs are consumed (``priority`` is popped) so copy them; hook instances are registered as given
    default_hooks = None if default_hooks is None else {k: _copy(v) for k, v in default_hooks.items()}
    custom_hooks = None if custom_hooks is None else [_copy(c) for c in custom_hooks]
    configs = [c for c in (default_hooks or {}).values() if isinstance(c, dict)]
    configs += [c for c in custom_hooks or [] if isinstance(c, dict)]
    with HOOKS.switch_scope_and_registry(default_scope) as registry:
        for cfg in configs:
            check_type(cfg, registry)
            if "priority" in cfg:
                priority_of(cfg["priority"], cfg["type"].__name__)
        registrar = _Registrar()
        registrar.register_hooks(default_hooks, custom_hooks)
    return registrar._hooks


def priority_of(priority: Any, hook: str) -> int:
    """MMEngine's ``get_priority``, with an error that names the hook and the valid priorities."""
    try:
        return get_priority(priority)
    except (KeyError, ValueError, TypeError):
        raise ValueError(
            f"MMEngine hook {hook}: priority {priority!r} does not exist. Use an int from 0 (highest) to 100 (lowest) "
            f"or one of {[p.name for p in Priority]}."
        ) from None


def _copy(cfg: Any) -> Any:
    return copy.deepcopy(cfg) if isinstance(cfg, dict) else cfg


def check_type(cfg: dict, registry: Registry) -> None:
    """Resolve ``cfg["type"]`` to a registered ``Hook`` subclass and put the class in its place.

    Names are looked up in the registry tree only: MMEngine's ``Registry.get`` would import any other dotted (or
    module) name, so a config could otherwise call ``subprocess.Popen``.
    """
    if "type" not in cfg:
        raise KeyError(f"build_hooks: hook config {cfg!r} has no 'type' key; name a registered hook class")
    kind = cfg["type"]
    cls = _lookup(registry, kind) if isinstance(kind, str) else kind
    if cls is None:
        names = registered_names(registry._get_root_registry())
        close = difflib.get_close_matches(kind, names, n=3, cutoff=0.5)
        hint = f"Did you mean {', '.join(repr(c) for c in close)}?" if close else f"Registered: {', '.join(names)}."
        raise KeyError(
            f"build_hooks: hook type {kind!r} is not registered in the {registry.name!r} registry "
            f"(scope {registry.scope!r}) or its children. {hint} Register your class with @HOOKS.register_module()."
        )
    if not (isinstance(cls, type) and issubclass(cls, Hook)):
        raise TypeError(f"build_hooks: hook type {kind!r} is {cls!r}, not a subclass of mmengine.hooks.Hook")
    cfg["type"] = cls


def _lookup(registry: Registry, key: str) -> Any:
    """``Registry.get`` without its imports: this registry and its parents, ``scope.Name`` in the registry tree."""
    registry.import_from_location()
    scope, name = Registry.split_scope_key(key)
    if scope is None or scope == registry.scope:
        node: Registry | None = registry
        while node is not None:
            if name in node.module_dict:
                return node.module_dict[name]
            node = node.parent if scope is None else None
        return None
    if scope in registry.children:
        return _lookup(registry.children[scope], name)
    root = registry._get_root_registry()
    return _lookup(root, key) if root is not registry and (scope == root.scope or scope in root.children) else None


def registered_names(registry: Registry = HOOKS) -> list[str]:
    """Every hook name ``registry`` can build: its own, and its children's as ``scope.Name``."""
    names = list(registry.module_dict)
    for scope, child in registry.children.items():
        names += [f"{scope}.{n}" for n in registered_names(child)]
    return sorted(names)
