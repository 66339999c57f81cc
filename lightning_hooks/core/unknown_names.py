"""A name no registry knows, told as one short :class:`UnknownNameError`, for ``lightning-hooks train``'s families.

OpenMMLab's builders (MMEngine's and mmcv 1.x's ``build_from_cfg``) raise ``KeyError("X is not in the ... registry")``
from a frame that holds the registry it asked (``registry``) and the name (``obj_type``); Classy's and VISSL's
``build_*`` functions index a registry dict of their module. :func:`openmmlab_unknown_name` and
:func:`module_registry_unknown_name` find that frame in the error's traceback (and in its causes) and name the
kind, the name, the close matches and where registrations come from; anything else is not theirs (None).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from types import FrameType
from typing import Any

from lightning_hooks.core.errors import UnknownNameError, close_names

#: how many registered names a message lists at most (registries hold hundreds)
SHOWN = 8


def registry_message(kind: str, name: str, known: Iterable[str], where: str, registry: str = "") -> str:
    """``"unknown model type 'ResNte' (registry mmpretrain::model). Did you mean: ResNet? Registered: 240 names
    (…). <where>"``: the close matches first, a few of the other names, and ``where`` registrations come from."""
    known = sorted(set(known))
    close = close_names(name, known)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    shown = ", ".join(known[:SHOWN]) + (f", … ({len(known)} in all)" if len(known) > SHOWN else "")
    in_registry = f" (registry {registry})" if registry else ""
    return f"unknown {kind} {name!r}{in_registry}.{hint} Registered: {shown or 'none'}. {where}"


def openmmlab_unknown_name(err: BaseException, where: str) -> UnknownNameError | None:
    """The type an OpenMMLab registry (MMEngine's or mmcv 1.x's) did not know, behind ``err``, as an
    :class:`UnknownNameError` naming its registry's kind (``model``, ``dataset``, ``hook``, ``transform``,
    ``metric``, ...), the name, the close matches among the names it (and its parents) hold, and ``where`` (its
    ``{scope}`` filled with the registry's scope)."""
    for exception in chain(err):
        if isinstance(exception, UnknownNameError):
            return exception
        if not (isinstance(exception, KeyError) and "is not in the" in str(exception)):
            continue
        for frame in _frames(exception):
            registry: Any = frame.f_locals.get("registry")
            name = frame.f_locals.get("obj_type")
            said = str(exception.args[0]) if exception.args else ""  # not a builder's wrapper ("Outer: 'X is not...'")
            if isinstance(name, str) and hasattr(registry, "module_dict") and said.startswith(f"{name} is not in the"):
                scope = getattr(registry, "scope", "")
                label = f"{scope}::{registry.name}" if scope else registry.name
                kind = f"{str(registry.name).rstrip('s')} type"  # mmcv 1.x names some registries in the plural
                where = where.format(scope=scope)
                return UnknownNameError(registry_message(kind, name, _openmmlab_names(registry), where, label))
    return None


def module_registry_unknown_name(err: BaseException, kinds: Mapping[str, str], where: str) -> UnknownNameError | None:
    """A name that a ``build_*`` / ``get_*`` function did not find in its module's registry dict, as an
    :class:`UnknownNameError`: Classy's ``DATASET_REGISTRY[config["name"]]`` (a ``KeyError``), VISSL's ``assert name
    in MODEL_TRUNKS_REGISTRY`` (an ``AssertionError``). ``kinds`` maps the registry's global name in that module to
    the kind it holds (``{"DATASET_REGISTRY": "Classy dataset"}``). Only the frame that raised is read."""
    for exception in chain(err):
        if isinstance(exception, UnknownNameError):
            return exception
        if not isinstance(exception, (KeyError, AssertionError)):
            continue
        frame = next(iter(_frames(exception)), None)
        if frame is None:
            continue
        if isinstance(exception, KeyError):
            names = [exception.args[0]] if len(exception.args) == 1 and isinstance(exception.args[0], str) else []
        else:
            names = [value for value in frame.f_locals.values() if isinstance(value, str)]
        for global_name, kind in kinds.items():
            registry: Any = frame.f_globals.get(global_name)
            missing = [name for name in names if isinstance(registry, Mapping) and name not in registry]
            if missing:
                return UnknownNameError(registry_message(f"{kind} name", missing[0], registry, where))
    return None


def _openmmlab_names(registry: Any) -> set[str]:
    """What ``registry.get`` finds without a scope prefix: its names and its parents'."""
    names: set[str] = set()
    while registry is not None:
        names |= set(registry.module_dict)
        registry = getattr(registry, "parent", None)
    return names


def chain(err: BaseException) -> Iterator[BaseException]:
    """``err`` and its causes / contexts, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _frames(err: BaseException) -> Iterator[FrameType]:
    """The frames of ``err``'s traceback, innermost (where it was raised) first."""
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return reversed(frames)
