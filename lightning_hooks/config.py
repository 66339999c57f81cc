"""``build_callbacks``: Lightning callbacks from one config holding each family's hooks in its own format.

```yaml
mmengine:                        # MMEngine's format; other keys are MMEngineAdapter options
  work_dir: work_dirs/run1
  default_hooks: {checkpoint: {type: CheckpointHook, interval: 1}, logger: null}
  custom_hooks: [{type: EMAHook, priority: NORMAL}]
classy:                          # Classy's format: a list of {name: ..., **kwargs} (or {hooks: [...], **options})
  - {name: precise_bn, num_samples: 256}
imix:                            # iMIX's format; other keys are IMIXAdapter options
  by_epoch: true
  custom_hooks: [{type: IterationTimerHook, level: NORMAL}]
callbacks:                       # Hydra ``_target_`` entries: native and Lightning callbacks
  - {_target_: lightning_hooks.callbacks.EMA, decay: 0.999}
```
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import os
from collections.abc import Iterable, Mapping
from typing import Any, cast

import yaml
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lightning_hooks import families
from lightning_hooks.config_schema import SCHEMAS
from lightning_hooks.core.errors import ConfigError, unknown_name
from lightning_hooks.core.family import check_keys, expect, message
from lightning_hooks.core.lightning_api import CALLBACKS, pl

#: ``_target_`` paths instantiated without an explicit allow-list.
SAFE_TARGETS = ("lightning_hooks.*", "lightning.pytorch.callbacks.*", "pytorch_lightning.callbacks.*")

__all__ = ["SAFE_TARGETS", "ConfigError", "build_callbacks"]


def build_callbacks(
    cfg: DictConfig | Mapping[str, Any] | str | os.PathLike, allow_targets: Iterable[str] = ()
) -> list[pl.Callback]:
    """Build one adapter per family section and every ``callbacks`` entry, in that order.

    Args:
        cfg: an OmegaConf ``DictConfig``, a dict, or the path of a YAML file (OmegaConf interpolation works).
        allow_targets: ``fnmatch`` patterns of further ``_target_`` paths that may be instantiated (besides
            :data:`SAFE_TARGETS`). Both the path and the ``module.qualname`` of the class or function it names must
            match, it must not pass through a module attribute, and a top-level entry must name a ``Callback``
            class; all is checked before anything is called. Each family section is built by its family
            (:mod:`lightning_hooks.families`): MMEngine ``type`` names resolve in the hook registry tree only, Classy
            ``name`` and iMIX ``type`` in their hook registries.

    Example::

        trainer = Trainer(callbacks=build_callbacks("configs/hydra/hooks/mixed.yaml"))
    """
    config = _load(cfg)
    sections = [family.name for family in families.registered()] + ["callbacks"]
    unknown = [key for key in config if key not in sections]
    if unknown:
        raise ConfigError(f"{unknown[0]}: {unknown_name('config section', str(unknown[0]), sections)}")
    callbacks: list[pl.Callback] = [
        family.build_section(config[family.name], family.name)
        for family in families.registered()
        if config.get(family.name) is not None
    ]
    entries = expect(config.get("callbacks") or [], list, "callbacks", "[{_target_: lightning_hooks.callbacks.EMA}]")
    for i, entry in enumerate(entries):
        callbacks.append(_target(entry, f"callbacks[{i}]", (*SAFE_TARGETS, *allow_targets)))
    return callbacks


def _load(cfg: DictConfig | Mapping[str, Any] | str | os.PathLike) -> dict[str, Any]:
    source = os.fspath(cfg) if isinstance(cfg, (str, os.PathLike)) else "the config"
    try:
        node = OmegaConf.load(source) if isinstance(cfg, (str, os.PathLike)) else cfg
        node = node if isinstance(node, DictConfig) else OmegaConf.create(dict(node))
    except (yaml.YAMLError, OmegaConfBaseException) as err:
        raise ConfigError(f"{source} does not parse: {err}") from err
    try:
        return cast("dict[str, Any]", OmegaConf.to_container(node, resolve=True))  # a DictConfig's container
    except OmegaConfBaseException as err:
        raise ConfigError(
            f"{source}: an interpolation cannot be resolved: {err}\nDefine the key it names in this file, or give a "
            "default: ${oc.select:key,default}."
        ) from err


def _target(entry: Any, path: str, allowed: tuple[str, ...]) -> pl.Callback:
    if not isinstance(entry, Mapping) or "_target_" not in entry:
        raise ConfigError(f"{path}: a callback entry needs a '_target_' (e.g. lightning_hooks.callbacks.EMA)")
    for where, target in _targets(entry, path):
        cls = _resolve(target, f"{where}._target_", allowed)
        if where == path and not (isinstance(cls, type) and issubclass(cls, CALLBACKS)):
            raise ConfigError(f"{where}._target_: {target!r} is not a Callback class; name a Callback subclass")
    schema = SCHEMAS.get(entry["_target_"])
    if schema is not None:
        fields = [f.name for f in dataclasses.fields(schema)]
        check_keys(entry, fields, path, f"{entry['_target_'].rsplit('.', 1)[-1]} option")
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), entry) if schema else OmegaConf.create(dict(entry))
        return instantiate(node)
    except Exception as err:
        raise ConfigError(f"{path}: {message(err)}") from err


def _resolve(target: str, path: str, allowed: tuple[str, ...]) -> Any:
    """The class or function ``target`` names, found without calling anything and checked against ``allowed``.

    ``target`` must match ``allowed`` before its module is imported, must reach the object through modules and
    class attributes only (not ``allowed_module.os.system``), and the object's own ``module.qualname`` must match.
    """
    if not _allowed(target, allowed):
        raise ConfigError(
            f"{path}: {target!r} is not an allowed target ({', '.join(allowed)}). Config building imports and calls "
            f"only these; pass build_callbacks(cfg, allow_targets=[{target!r}]) to trust it."
        )
    parts = target.split(".")
    obj, i = None, len(parts)
    while i > 0 and obj is None:
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as err:
            if err.name is None or not ".".join(parts[:i]).startswith(err.name):
                raise
            i -= 1
    if obj is None:
        raise ConfigError(f"{path}: no module in {target!r} can be imported")
    for attr in parts[i:]:
        if not hasattr(obj, attr):
            raise ConfigError(f"{path}: {'.'.join(parts[:i])} has no attribute {attr!r} ({target!r} does not exist)")
        obj, i = getattr(obj, attr), i + 1
        if inspect.ismodule(obj):
            raise ConfigError(f"{path}: {target!r} reaches module {obj.__name__} through an attribute; name it directly")
    real = f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', None)}"
    if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not _allowed(real, allowed):
        raise ConfigError(
            f"{path}: {target!r} is {obj!r} ({real}), which is not an allowed class or function "
            f"({', '.join(allowed)}). Name the class by its own module, or pass allow_targets=[{real!r}] to trust it."
        )
    return obj


def _allowed(name: str, allowed: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)


def _targets(node: Any, path: str) -> Iterable[tuple[str, str]]:
    """Every ``_target_`` in ``node``, nested ones included (Hydra instantiates recursively)."""
    if isinstance(node, Mapping):
        if "_target_" in node:
            yield path, str(node["_target_"])
        for key, value in node.items():
            yield from _targets(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _targets(value, f"{path}[{i}]")
