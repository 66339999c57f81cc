"""``adapt``: wrap legacy hooks of any family into one Lightning callback per family."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.lightning_api import Callback
from lightning_hooks.families.classy import ClassyAdapter
from lightning_hooks.families.imix import IMIXAdapter
from lightning_hooks.families.mmengine import MMEngineAdapter

ADAPTERS: tuple[type[LegacyHookAdapter], ...] = (MMEngineAdapter, ClassyAdapter, IMIXAdapter)
ACCEPTED = (
    "mmengine.hooks.Hook, classy_vision.hooks.ClassyHook or lightning_hooks.compat.classy.ClassyHook (VISSL hooks "
    "derive from it), imix.engine.hooks.HookBase or lightning_hooks.compat.imix.HookBase"
)


def family_of(hook: Any) -> type[LegacyHookAdapter]:
    """The adapter class for ``hook``, detected from the legacy base classes it derives from."""
    for adapter in ADAPTERS:
        if adapter.base_classes() and isinstance(hook, adapter.base_classes()):
            return adapter
        if isinstance(hook, type) and adapter.base_classes() and issubclass(hook, adapter.base_classes()):
            raise TypeError(f"adapt() was given the class {hook.__qualname__}: pass an instance: {hook.__qualname__}()")
    raise TypeError(
        f"{hook!r} ({type(hook).__module__}.{type(hook).__qualname__}) is not a hook of a known family. "
        f"Accepted base classes: {ACCEPTED}."
    )


def adapt(hook_or_hooks: Any | Sequence[Any], **host_options: Any) -> list[Callback]:
    """Group legacy hooks by family and return one adapter callback per family, in first-seen order.

    ``host_options`` go to every adapter that accepts them (``work_dir``, ``gradient_accumulation_steps``, ...);
    an option no adapter accepts is an error.

    Example::

        from lightning import Trainer
        from mmengine.hooks import EMAHook
        from classy_vision.hooks import PreciseBatchNormHook
        trainer = Trainer(callbacks=adapt([EMAHook(), PreciseBatchNormHook(num_samples=64)], work_dir="work"))
    """
    hooks = list(hook_or_hooks) if isinstance(hook_or_hooks, (list, tuple)) else [hook_or_hooks]
    groups: dict[type[LegacyHookAdapter], list[Any]] = {}
    for hook in hooks:
        groups.setdefault(family_of(hook), []).append(hook)
    accepted = {adapter: _options(adapter) for adapter in groups}
    unknown = set(host_options) - set().union(*accepted.values()) if accepted else set(host_options)
    if unknown:
        offered = {a.__name__: sorted(o) for a, o in accepted.items()}
        raise TypeError(f"adapt(): no adapter accepts the option(s) {sorted(unknown)}; accepted options: {offered}")
    return [
        adapter(group, **{k: v for k, v in host_options.items() if k in accepted[adapter]})
        for adapter, group in groups.items()
    ]


def _options(adapter: type[LegacyHookAdapter]) -> set[str]:
    params = inspect.signature(adapter.__init__).parameters
    return {name for name, p in params.items() if p.kind is p.KEYWORD_ONLY or p.default is not p.empty}
