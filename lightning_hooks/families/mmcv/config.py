"""mmcv 1.x configs: the hooks ``runner.register_training_hooks`` registers, built by mmcv's own registration code.

Imported only where mmcv 1.x is installed (``mmcv.runner``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from lightning_hooks.core.errors import ConfigError, close_names, unknown_name

#: keys of an mmcv config that name hooks (``fp16``: mmdet/mmcls/mmseg's train scripts build ``Fp16OptimizerHook``
#: from it; ``timer_config`` / ``profiler_config``: ``register_training_hooks`` / ``register_profiler_hook``)
HOOK_KEYS = ("fp16", "timer_config", "profiler_config")
#: the hook configs ``register_training_hooks`` takes (``MMCVAdapter.from_config``'s own keywords)
CONFIG_KEYS = ("lr_config", "optimizer_config", "checkpoint_config", "log_config", "momentum_config", "custom_hooks")
#: old configs give the epoch count as ``total_epochs`` instead of ``runner = dict(max_epochs=...)``
TOTAL_EPOCHS = "total_epochs"


def _registry() -> Any:
    """An object with mmcv ``BaseRunner``'s ``register_*`` methods and an empty hook queue: mmcv's own code then builds
    and orders the hooks, as on a runner."""
    from mmcv.runner import BaseRunner

    methods = {name: getattr(BaseRunner, name) for name in dir(BaseRunner) if name.startswith("register_")}
    registry = type("HookRegistry", (), methods)()
    registry._hooks = []
    return registry


def register_training_hooks(
    runner_type: str,
    *,
    lr_config: Any = None,
    optimizer_config: Any = None,
    checkpoint_config: Any = None,
    log_config: Any = None,
    momentum_config: Any = None,
    custom_hooks: Any = None,
    fp16: Mapping[str, Any] | None = None,
    timer_config: Any = None,
    profiler_config: Any = None,
) -> list[Any]:
    """The hooks, in priority order, that ``<runner_type>.register_training_hooks`` registers for these configs
    (``IterBasedRunner`` defaults ``by_epoch=False`` for the checkpoint, LR and logger hooks and uses its own timer).
    ``fp16`` turns ``optimizer_config`` into ``Fp16OptimizerHook(**optimizer_config, **fp16)``, as OpenMMLab's train
    scripts do; ``profiler_config`` registers a ``ProfilerHook``."""
    from mmcv.runner import HOOKS, Fp16OptimizerHook, IterTimerHook

    configs = _copy(dict(lr_config=lr_config, optimizer_config=optimizer_config,
                                 checkpoint_config=checkpoint_config, log_config=log_config,
                                 momentum_config=momentum_config, custom_hooks=custom_hooks))  # fmt: skip  # one hook config key a pair, aligned under dict(
    for path, entry in _hook_entries(configs):
        check_type(entry, HOOKS, path)
    if fp16 is not None and isinstance(configs["optimizer_config"], Mapping):
        configs["optimizer_config"] = Fp16OptimizerHook(**configs["optimizer_config"], **fp16)
    timer = {"timer_config": timer_config} if timer_config is not None else {}
    if runner_type == "IterBasedRunner":
        for key in ("checkpoint_config", "lr_config"):
            if isinstance(configs[key], dict):
                configs[key].setdefault("by_epoch", False)
        for info in (configs["log_config"] or {}).get("hooks", []):
            info.setdefault("by_epoch", False)
        timer = {"timer_config": IterTimerHook()}
    registry = _registry()
    registry.register_training_hooks(
        configs["lr_config"], configs["optimizer_config"], configs["checkpoint_config"], configs["log_config"],
        configs["momentum_config"], custom_hooks_config=configs["custom_hooks"], **timer,
    )  # fmt: skip  # mmcv's positional order, wrapped at 120
    if profiler_config is not None:
        registry.register_profiler_hook(_copy(profiler_config))
    return registry._hooks


def _copy(value: Any) -> Any:
    """A copy of the config's dicts and lists (mmcv's registration pops keys from them); hook objects stay the same."""
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return value


def _hook_entries(configs: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """The hook configs with a ``type`` among ``configs``, with their paths."""
    for i, entry in enumerate(_as_list(configs["custom_hooks"])):
        if isinstance(entry, Mapping):
            yield f"custom_hooks[{i}]", entry
    for i, entry in enumerate((configs["log_config"] or {}).get("hooks", [])):
        yield f"log_config.hooks[{i}]", entry
    for key in ("optimizer_config", "checkpoint_config"):
        if isinstance(configs[key], Mapping) and "type" in configs[key]:
            yield key, configs[key]


def _as_list(value: Any) -> list[Any]:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def check_type(config: Mapping[str, Any], registry: Any, path: str) -> None:
    """A ``type`` the registry lacks is a :class:`ConfigError` naming ``path`` with a "did you mean"."""
    kind = config.get("type")
    if isinstance(kind, str) and registry.get(kind) is None:
        raise ConfigError(f"{path}: {unknown_name('hook type', kind, registry.module_dict, context=' in mmcv HOOKS')}")


def build_hook(config: Mapping[str, Any], registry: Any) -> Any:
    """One ``dict(type=..., priority=..., **kwargs)`` built as mmcv's ``register_hook_from_cfg`` builds it, with its
    ``priority`` set as ``register_hook`` sets it."""
    from mmcv import build_from_cfg
    from mmcv.runner import get_priority

    config = dict(config)
    priority = config.pop("priority", "NORMAL")
    check_type(config, registry, "hook")
    hook = build_from_cfg(config, registry)
    hook.priority = get_priority(priority)
    return hook


def split_options(options: Mapping[str, Any], accepted: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A whole mmcv config's other keys: (adapter options, hook keys of :data:`HOOK_KEYS`); ``total_epochs`` becomes
    ``runner=dict(type="EpochBasedRunner", max_epochs=...)``; keys the LightningModule, data or Trainer own are ignored
    with a warning that lists them."""
    adapter = {k: v for k, v in options.items() if k in accepted}
    hooks = {k: v for k, v in options.items() if k in HOOK_KEYS and v is not None}
    if TOTAL_EPOCHS in options and "runner" not in adapter:
        adapter["runner"] = {"type": "EpochBasedRunner", "max_epochs": options[TOTAL_EPOCHS]}
    ignored = sorted(k for k in options if k not in adapter and k not in HOOK_KEYS and k != TOTAL_EPOCHS)
    known = [*CONFIG_KEYS, *accepted, *HOOK_KEYS]
    for key in ignored:
        if close_names(key, known, cutoff=0.85):
            raise ConfigError(f"{key}: {unknown_name('MMCVAdapter.from_config key', key, known, listed='Accepted')}")
    if ignored:
        warnings.warn(
            f"MMCVAdapter.from_config ignores keys that the LightningModule, the data or the Trainer own: "
            f"{', '.join(ignored)}. Accepted besides the hook configs: {', '.join([*accepted, *HOOK_KEYS])}.",
            stacklevel=3,
        )
    return adapter, hooks
