"""Adapt-time checks of user hooks: misspelled mount points and signatures the runner cannot call."""

from __future__ import annotations

import difflib
import inspect
import warnings
from typing import Any

from mmengine.hooks import Hook

from lightning_hooks.core.events import EventTable


def check_hook(hook: Hook, events: EventTable) -> None:
    """Warn about methods that look like misspelled mount points and mount points whose signature is wrong."""
    mounts = events.mount_points()
    args = {row.mount: row.args for row in events.rows}
    name = type(hook).__qualname__
    for attr in _own_methods(type(hook)):
        if attr in mounts:
            _check_signature(hook, name, attr, args[attr])
        elif not attr.startswith("_"):
            close = difflib.get_close_matches(attr, mounts, n=1, cutoff=0.85)
            if close:
                warnings.warn(
                    f"MMEngine hook {name} defines '{attr}', which is not an MMEngine mount point and will never be "
                    f"called. Did you mean '{close[0]}'?",
                    stacklevel=4,
                )


def _own_methods(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is Hook or klass is object or klass.__module__.startswith("mmengine."):
            continue
        names += [n for n, v in vars(klass).items() if callable(v) and n not in names]
    return names


def _check_signature(hook: Any, name: str, mount: str, kwargs: tuple[str, ...]) -> None:
    try:
        inspect.signature(getattr(hook, mount)).bind(None, **{k: None for k in kwargs})
    except TypeError as err:
        call = ", ".join(["runner", *(f"{k}=..." for k in kwargs)])
        warnings.warn(
            f"MMEngine hook {name}.{mount} cannot be called as the runner calls it ({mount}({call})): {err}. "
            f"Use MMEngine's signature, e.g. def {mount}(self, {', '.join(['runner', *kwargs])}).",
            stacklevel=4,
        )
