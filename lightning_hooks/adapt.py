"""``adapt``: wrap legacy hooks of any family into one Lightning callback per family."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lightning_hooks import families
from lightning_hooks.core.family import Family, adapter_options
from lightning_hooks.core.lightning_api import Callback


def family_of(hook: Any) -> Family:
    """The registered family ``hook`` belongs to, detected from the legacy base classes it derives from."""
    if isinstance(hook, Mapping):
        raise TypeError(
            f"adapt() was given the config {dict(hook)!r}, which names no family. Build hooks from configs with "
            f"their family's adapter: {', '.join(f.config_example for f in families.registered() if f.config_example)}; "
            "or a whole config with lightning_hooks.build_callbacks(cfg)."
        )
    for family in families.registered():
        bases = family.adapter.base_classes()
        if bases and isinstance(hook, bases):
            return family
        if isinstance(hook, type) and bases and issubclass(hook, bases):
            raise TypeError(f"adapt() was given the class {hook.__qualname__}: pass an instance: {hook.__qualname__}()")
    accepted = "; ".join(f"{f.name}: {f.accepts}" for f in families.registered())
    raise TypeError(
        f"{hook!r} ({type(hook).__module__}.{type(hook).__qualname__}) is not a hook of a known family. "
        f"Accepted base classes: {accepted}."
    )


def adapt(hook_or_hooks: Any | Sequence[Any], **host_options: Any) -> list[Callback]:
    """Group legacy hooks by family and return one adapter callback per family, in first-seen order.

    ``host_options`` go to every adapter that accepts them (``work_dir``, ``gradient_accumulation_steps``, ...);
    an option no adapter accepts is an error.

    Example (``hooks``: legacy hook objects of any registered families, see ``Family.hook_example``)::

        from lightning import Trainer
        trainer = Trainer(callbacks=adapt(hooks, work_dir="work"))
    """
    hooks = list(hook_or_hooks) if isinstance(hook_or_hooks, (list, tuple)) else [hook_or_hooks]
    if not hooks:
        example = next((f.hook_example for f in families.registered() if f.hook_example), "...")
        raise ValueError(
            f"adapt() was given no hooks. Pass legacy hook objects, e.g. adapt([{example}]); for a Trainer without "
            "legacy hooks, leave adapt() out."
        )
    groups: dict[Family, list[Any]] = {}
    for hook in hooks:
        groups.setdefault(family_of(hook), []).append(hook)
    accepted = {family: set(adapter_options(family.adapter)) for family in groups}
    unknown = set(host_options) - set().union(*accepted.values()) if accepted else set(host_options)
    if unknown:
        offered = {f.adapter.__name__: sorted(o) for f, o in accepted.items()}
        raise TypeError(f"adapt(): no adapter accepts the option(s) {sorted(unknown)}; accepted options: {offered}")
    return [
        family.adapter(group, **{k: v for k, v in host_options.items() if k in accepted[family]})
        for family, group in groups.items()
    ]
