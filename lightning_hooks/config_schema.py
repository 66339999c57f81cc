"""Structured configs (dataclasses) for the native callbacks, generated from their signatures.

They make a typo in a callback's options fail when the config is loaded, and they are registered in Hydra's
``ConfigStore`` under the group ``callbacks`` (``ema``, ``precise_bn``, ``anomaly_detector``, ``profiler``,
``loss_scale_monitor``) for ``@hydra.main`` apps: ``+callbacks=[ema,precise_bn]`` adds ``callbacks.ema`` and
``callbacks.precise_bn`` to the config (examples/train_hydra.py builds them after ``hooks``).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from lightning_hooks.callbacks import EMA, AnomalyDetector, LossScaleMonitor, PreciseBN, Profiler

_PLAIN = (int, float, bool, str)


def _field_type(hint: Any) -> Any:
    """OmegaConf accepts primitives and Optional primitives; anything else is typed ``Any``."""
    if hint in _PLAIN:
        return hint
    args = typing.get_args(hint)
    if len(args) == 2 and type(None) in args and all(a in _PLAIN or a is type(None) for a in args):
        return hint
    return Any


def _copies(default: list[Any] | dict[str, Any]) -> Callable[[], Any]:
    """A ``default_factory``: a fresh copy of a list or dict default for each instance."""
    return lambda: type(default)(default)


def schema(cls: type[Any]) -> type:
    """A dataclass with ``_target_`` and one field per ``__init__`` argument of ``cls``, defaults included."""
    hints = typing.get_type_hints(cls.__init__)
    fields: list[Any] = [("_target_", str, dataclasses.field(default=f"{cls.__module__}.{cls.__qualname__}"))]
    for name, param in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = MISSING if param.default is param.empty else param.default
        spec = dataclasses.field(default_factory=_copies(default)) if isinstance(default, (list, dict)) else dataclasses.field(default=default)
        fields.append((name, _field_type(hints.get(name, Any)), spec))
    return dataclasses.make_dataclass(f"{cls.__name__}Conf", fields)


NATIVE = (EMA, PreciseBN, AnomalyDetector, Profiler, LossScaleMonitor)
#: ``_target_`` (short and full module path) -> structured config.
SCHEMAS: dict[str, type] = {}
for _cls in NATIVE:
    _conf = schema(_cls)
    SCHEMAS[f"lightning_hooks.callbacks.{_cls.__name__}"] = SCHEMAS[f"{_cls.__module__}.{_cls.__qualname__}"] = _conf
    _name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", _cls.__name__).lower()  # PreciseBN: precise_bn
    ConfigStore.instance().store(group="callbacks", name=_name, node=_conf, package=f"callbacks.{_name}")
