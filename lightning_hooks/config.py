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
from typing import Any

import yaml
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lightning_hooks.config_schema import SCHEMAS
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.lightning_api import CALLBACKS, pl
from lightning_hooks.families.classy import ClassyAdapter
from lightning_hooks.families.imix import IMIXAdapter
from lightning_hooks.families.mmengine import MMEngineAdapter

#: ``_target_`` paths instantiated without an explicit allow-list.
SAFE_TARGETS = ("lightning_hooks.*", "lightning.pytorch.callbacks.*", "pytorch_lightning.callbacks.*")
SECTIONS = ("mmengine", "classy", "imix", "callbacks")


class ConfigError(ValueError):
    """A config that cannot be built; the message starts with the offending config path."""


def build_callbacks(
    cfg: DictConfig | Mapping[str, Any] | str | os.PathLike, allow_targets: Iterable[str] = ()
) -> list[pl.Callback]:
    """Build one adapter per family section and every ``callbacks`` entry, in that order.

    Args:
        cfg: an OmegaConf ``DictConfig``, a dict, or the path of a YAML file (OmegaConf interpolation works).
        allow_targets: ``fnmatch`` patterns of further ``_target_`` paths that may be instantiated (besides
            :data:`SAFE_TARGETS`). Both the path and the ``module.qualname`` of the class or function it names must
            match, it must not pass through a module attribute, and a top-level entry must name a ``Callback``
            class; all is checked before anything is called. MMEngine ``type`` names resolve in the hook
            registry tree only, Classy ``name`` and iMIX ``type`` in their hook registries.

    Example::

        trainer = Trainer(callbacks=build_callbacks("configs/hydra/hooks/mixed.yaml"))
    """
    config = _load(cfg)
    unknown = [key for key in config if key not in SECTIONS]
    if unknown:
        raise ConfigError(f"{unknown[0]}: {unknown_name('config section', str(unknown[0]), SECTIONS)}")
    callbacks: list[pl.Callback] = []
    if config.get("mmengine") is not None:
        callbacks.append(_mmengine(_expect(config["mmengine"], dict, "mmengine", "{work_dir: ..., custom_hooks: [...]}")))
    if config.get("classy") is not None:
        callbacks.append(_classy(_expect(config["classy"], (list, dict), "classy", "[{name: precise_bn}, ...]")))
    if config.get("imix") is not None:
        callbacks.append(_imix(_expect(config["imix"], dict, "imix", "{custom_hooks: [{type: ...}]}")))
    entries = _expect(config.get("callbacks") or [], list, "callbacks", "[{_target_: lightning_hooks.callbacks.EMA}]")
    for i, entry in enumerate(entries):
        callbacks.append(_target(entry, f"callbacks[{i}]", (*SAFE_TARGETS, *allow_targets)))
    return callbacks


def _load(cfg: DictConfig | Mapping[str, Any] | str | os.PathLike) -> dict[str, Any]:
    source = os.fspath(cfg) if isinstance(cfg, (str, os.PathLike)) else "the config"
    try:
        node = OmegaConf.load(cfg) if isinstance(cfg, (str, os.PathLike)) else cfg
        node = node if isinstance(node, DictConfig) else OmegaConf.create(dict(node))
    except (yaml.YAMLError, OmegaConfBaseException) as err:
        raise ConfigError(f"{source} does not parse: {err}") from err
    try:
        return OmegaConf.to_container(node, resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(
            f"{source}: an interpolation cannot be resolved: {err}\nDefine the key it names in this file, or give a "
            "default: ${oc.select:key,default}."
        ) from err


def _build(adapter: type, entries: list[Any], path: str) -> list[Any]:
    return [_build_one(adapter, entry, f"{path}[{i}]") for i, entry in enumerate(entries)]


def _build_one(adapter: type, entry: Any, path: str) -> Any:
    try:
        return adapter.build_hook(entry) if isinstance(entry, Mapping) else entry
    except Exception as err:
        raise ConfigError(f"{path}: {_message(err)}") from err


def _options(adapter: type, section: dict[str, Any], path: str, **hooks: Any) -> Any:
    accepted = [name for name in inspect.signature(adapter).parameters if name != "hooks"]
    _check_keys(section, accepted, path, f"{adapter.__name__} option")
    return adapter(**hooks, **section)


def _check_keys(given: Iterable[str], accepted: Iterable[str], path: str, what: str) -> None:
    for key in given:
        if key not in accepted:
            raise ConfigError(f"{path}.{key}: {unknown_name(what, key, accepted).replace('Registered', 'Accepted')}")


def _expect(value: Any, kind: type | tuple[type, ...], path: str, example: str) -> Any:
    if not isinstance(value, kind):
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ConfigError(f"{path}: expected a {kinds}, got {type(value).__name__} {value!r}. Write e.g. {path}: {example}")
    return value


def _message(err: Exception) -> str:
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)


def _mmengine(section: dict[str, Any]) -> MMEngineAdapter:
    from lightning_hooks.families.mmengine.config import build_hooks

    section = dict(section)
    # Each config is built once, with its path in any error; MMEngine then merges the instances over its default
    # hooks (a default_hooks entry replaces the default of that name) and orders them by priority.
    default_hooks = {
        key: None if entry is None else _build_one(MMEngineAdapter, entry, f"mmengine.default_hooks.{key}")
        for key, entry in _expect(section.pop("default_hooks", None) or {}, dict, "mmengine.default_hooks",
                                  "{checkpoint: {type: CheckpointHook, interval: 1}}").items()
    }
    custom = _expect(section.pop("custom_hooks", None) or [], list, "mmengine.custom_hooks", "[{type: EMAHook}]")
    custom_hooks = _build(MMEngineAdapter, custom, "mmengine.custom_hooks")
    hooks = build_hooks(default_hooks=default_hooks, custom_hooks=custom_hooks)
    return _options(MMEngineAdapter, section, "mmengine", hooks=hooks)


def _classy(section: list[Any] | dict[str, Any]) -> ClassyAdapter:
    if isinstance(section, list):
        section, path = {"hooks": section}, "classy"
    else:
        section, path = dict(section), "classy.hooks"
    hooks = _build(ClassyAdapter, _expect(section.pop("hooks", []), list, path, "[{name: precise_bn}]"), path)
    return _options(ClassyAdapter, section, "classy", hooks=hooks)


def _imix(section: dict[str, Any]) -> IMIXAdapter:
    section = dict(section)
    if "custom_hooks" not in section:
        raise ConfigError("imix.custom_hooks: missing; IMIXAdapter needs at least one hook. Write e.g. "
                          "imix.custom_hooks: [{type: IterationTimerHook}]")
    custom = _expect(section.pop("custom_hooks"), list, "imix.custom_hooks", "[{type: IterationTimerHook}]")
    hooks = _build(IMIXAdapter, custom, "imix.custom_hooks")
    return _options(IMIXAdapter, section, "imix", hooks=hooks)


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
        _check_keys(entry, fields, path, f"{entry['_target_'].rsplit('.', 1)[-1]} option")
    try:
        node = OmegaConf.merge(OmegaConf.structured(schema), entry) if schema else OmegaConf.create(dict(entry))
        return instantiate(node)
    except Exception as err:
        raise ConfigError(f"{path}: {_message(err)}") from err


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
