"""Adapt-time checks of user hooks, for every family: misspelled mount points, signatures the host cannot call,
hook arguments the host would trip over only during training."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

from lightning_hooks.core.errors import close_names
from lightning_hooks.core.events import EventTable


def check_hook(hook: Any, events: EventTable, label: str, host_args: tuple[str, ...], upstream: tuple[str, ...]) -> None:
    """Warn about methods of ``hook`` that look like misspelled mount points or whose signature is wrong.

    Only methods defined by the user's own classes are checked: classes from a module starting with one of
    ``upstream`` (the legacy library, our compat bases) are taken as they are. ``host_args`` names the positional
    arguments the host passes to every mount point (``("runner",)`` for MMEngine); each row's ``args`` are passed by
    keyword.

    Example::

        check_hook(MyHook(), EVENTS, "MMEngine", ("runner",), ("mmengine.",))  # warns: 'after_train_iters'?
    """
    mounts = events.mount_points()
    kwargs = {row.mount: row.args for row in events.rows}
    name = type(hook).__qualname__
    for attr in _own_methods(type(hook), upstream):
        if attr in mounts:
            _check_signature(hook, label, name, attr, host_args, kwargs[attr])
        elif not attr.startswith("_"):
            close = close_names(attr, mounts, n=1, cutoff=0.85)
            if close:
                warnings.warn(
                    f"{label} hook {name} defines '{attr}', which is not one of {label}'s mount points and will never "
                    f"be called. Did you mean '{close[0]}'?",
                    stacklevel=4,
                )


def _own_methods(cls: type, upstream: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is object or klass.__module__.startswith(upstream):
            continue
        names += [n for n, v in vars(klass).items() if callable(v) and n not in names]
    return names


def _check_signature(hook: Any, label: str, name: str, mount: str, host_args: tuple[str, ...], kwargs: tuple[str, ...]) -> None:
    try:
        inspect.signature(getattr(hook, mount)).bind(*(None for _ in host_args), **{k: None for k in kwargs})
    except TypeError as err:
        call = ", ".join([*host_args, *(f"{k}=..." for k in kwargs)])
        warnings.warn(
            f"{label} hook {name}.{mount} cannot be called as the host calls it ({mount}({call})): {err}. "
            f"Use {label}'s signature, e.g. def {mount}({', '.join(['self', *host_args, *kwargs])}).",
            stacklevel=5,
        )


def check_argument(owner: str, hook: Any, attr: str, valid: Callable[[Any], bool], expected: str) -> None:
    """Refuse, when the hook is adapted, a hook attribute its host would only trip over during training.

    Example::

        check_argument("MMEngineAdapter", CheckpointHook(interval="1"), "interval", _is_int, "an int, e.g. interval=1")
    """
    if not hasattr(hook, attr) or valid(getattr(hook, attr)):
        return
    value = getattr(hook, attr)
    raise TypeError(
        f"{owner}: {type(hook).__qualname__} was built with {attr.lstrip('_')}={value!r} "
        f"({type(value).__name__}), but it needs {expected}; the hook would fail only when it first uses it in "
        "training. Build the hook with a valid value."
    )


def is_int(value: Any) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_period(owner: str, hook: Any, attr: str, mount: str, *, allow_none: bool = False, never_ok: bool = False) -> None:
    """Check, when the hook is adapted, a period option of ``hook`` (``interval``, ``log_freq``, ``iter_period``, ...)
    that its mount point ``mount`` divides by: an int > 0, or None where ``allow_none``.

    A value that is not an int is refused (:func:`check_argument`). A value <= 0 makes the host skip the periodic work
    for the whole run, or fail on a division by zero: it is refused, or only warned about where the library documents
    it as "never" (``never_ok``: MMEngine's ``CheckpointHook(interval=-1)``).

    Example::

        check_period("ClassyAdapter", LossLrMeterLoggingHook(log_freq=0), "log_freq", "on_step", allow_none=True)
        # ValueError: ... log_freq=0 ...
    """
    if not hasattr(hook, attr):
        return
    value = getattr(hook, attr)
    if value is None and allow_none:
        return
    expected = "an int > 0" + (" or None" if allow_none else "")
    check_argument(owner, hook, attr, is_int, f"{expected}, e.g. {attr.lstrip('_')}=1")
    if value > 0:
        return
    option, name = attr.lstrip("_"), type(hook).__qualname__
    if never_ok:
        warnings.warn(
            f"{owner}: {name} was built with {option}={value}: its periodic work in {mount} never runs in this run (the "
            f"legacy host reads {option} <= 0 as never). If you meant a period, build it with {option} >= 1.",
            stacklevel=4,
        )
        return
    raise ValueError(
        f"{owner}: {name} was built with {option}={value}, but {mount} divides its counter by {option}: it would fail "
        f"there on a division by zero, or run its periodic work never or at a period the library does not define. "
        f"Build it with {expected}, e.g. {option}=1" + (f", or {option}=None to turn it off." if allow_none else ".")
    )


#: class name -> its period options: (attribute, mount point that divides by it, whether None is accepted)
Periods = dict[str, tuple[tuple[str, str, bool], ...]]


def check_periods(owner: str, hook: Any, periods: Periods, *, never_ok: bool = False) -> None:
    """:func:`check_period` for each period option of the classes in ``periods`` that ``hook`` derives from (by class
    name along its MRO, so a user's subclass of ``CheckpointHook`` is checked too)."""
    for klass in type(hook).__mro__:
        for attr, mount, allow_none in periods.get(klass.__name__, ()):
            check_period(owner, hook, attr, mount, allow_none=allow_none, never_ok=never_ok)
