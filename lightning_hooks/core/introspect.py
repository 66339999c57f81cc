"""Signature introspection, once: which keywords a class or function accepts."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def keywords(function: Callable[..., Any], skip: Iterable[str] = ("self",)) -> list[str] | None:
    """The parameters ``function`` takes by name, in order, less ``skip``; None when it takes ``**kwargs``."""
    params = inspect.signature(function).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in _NAMED and p.name not in set(skip)]


def init_keywords(cls: type, skip: Iterable[str] = ("self",)) -> set[str] | None:
    """The keywords ``cls(...)`` accepts, following ``**kwargs`` up the MRO (mixins); None if it takes any."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        params = inspect.signature(vars(klass)["__init__"]).parameters.values()
        names |= {p.name for p in params if p.kind in _NAMED}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return names - set(skip)
    return None
