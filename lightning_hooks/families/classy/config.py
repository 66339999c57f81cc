"""Classy's ``{"name": ..., **kwargs}`` configs (hooks and meters): hooks built through Classy's registry, and each
config checked before Classy's ``from_config`` runs.

Classy's ``from_config`` reads the keys it knows and ignores the rest (``{"name": "precise_bn", "num_sample": 128}``
fails on the missing ``num_samples``; a misspelt optional key is silently dropped), so each key is checked against
what the class uses: the keys its own ``from_config`` reads, or its ``__init__`` parameters under Classy's default
``cls(**config)``.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import textwrap
from collections.abc import Mapping
from typing import Any

from lightning_hooks.compat import classy as compat
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.introspect import keywords


def build_hook(config: Mapping[str, Any]) -> Any:
    """A hook from ``{"name": ..., **kwargs}`` through Classy's registry (when installed), then the compat one; an
    unknown name or key raises ``KeyError`` with the nearest known ones."""
    registries: list[Any] = [compat]
    if importlib.util.find_spec("classy_vision") is not None:
        import classy_vision.hooks as installed  # importing it registers Classy's own hooks

        if installed.build_hook is not compat.build_hook:  # not the import alias
            registries.insert(0, installed)
    name = config.get("name")
    for registry in registries:
        if name in registry.HOOK_REGISTRY:
            check_config(config, registry.HOOK_REGISTRY[name], "Classy hook")
            return registry.build_hook(config)
    raise KeyError(unknown_name("Classy hook name", str(name), [n for r in registries for n in r.HOOK_REGISTRY]))


def accepted_keys(cls: type[Any]) -> set[str] | None:
    """The config keys ``cls.from_config`` uses: those its own ``from_config`` reads, else (``cls(**config)``) the
    ``__init__`` parameters; ``None`` when they cannot be known (``**kwargs``, no source)."""
    own = next((vars(base)["from_config"] for base in cls.__mro__ if "from_config" in vars(base)), None)
    if own is not None and not _passes_whole_config(own):
        return _keys_read(own)  # a from_config of its own reads its keys and ignores the rest
    names = keywords(cls.__init__)
    return None if names is None else set(names)


def check_config(config: Mapping[str, Any], cls: type, what: str) -> None:
    """Raise ``KeyError`` naming the first key of ``config`` (besides ``name``) that ``cls`` does not accept, with the
    nearest accepted keys."""
    keys = accepted_keys(cls)
    if keys is None:
        return
    for key in config:
        if key != "name" and key not in keys:
            context = f" for {what} {config.get('name')!r} ({cls.__name__})"
            raise KeyError(unknown_name("key", str(key), keys, listed="Accepted", context=context))


def _source(function: Any) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(getattr(function, "__func__", function))))
    except (OSError, TypeError, SyntaxError):
        return None


def _passes_whole_config(function: Any) -> bool:
    """Whether ``from_config`` is ``cls(**config)`` (Classy's default): its keys are then the ``__init__`` ones."""
    tree = _source(function)
    if tree is None:
        return False
    name = _config_argument(tree)
    return any(
        isinstance(node, ast.Call)
        and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == name for k in node.keywords)
        for node in ast.walk(tree)
    )


def _config_argument(tree: ast.AST) -> str | None:
    """The name of ``from_config(cls, config)``'s config argument."""
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)), None)
    return function.args.args[1].arg if function is not None and len(function.args.args) > 1 else None


def _keys_read(function: Any) -> set[str] | None:
    """String keys ``from_config`` reads from its config argument: ``config["k"]``, ``config.get("k")``."""
    tree = _source(function)
    if tree is None:
        return None
    name = _config_argument(tree)
    keys: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name
            and isinstance(node.slice, ast.Constant)
        ):  # fmt: skip  # one condition a line
            keys.add(str(node.slice.value))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == name
            and node.args and isinstance(node.args[0], ast.Constant)
        ):  # fmt: skip  # one condition a line
            keys.add(str(node.args[0].value))
    return keys
