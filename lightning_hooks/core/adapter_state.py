"""An adapter's checkpoint state: per-hook and host state, and the migration of a state written with another hook list.

:class:`AdapterState` is a base of :class:`~lightning_hooks.core.adapter.LegacyHookAdapter`: it implements the
``Callback`` methods ``state_dict`` / ``load_state_dict``, and :meth:`AdapterState.migrate_state` is what the adapter's
``on_load_checkpoint`` runs.
"""

from __future__ import annotations

import ast
import copy
import re
import warnings
from collections import Counter
from collections.abc import Mapping
from typing import Any, ClassVar

from typing_extensions import override

from lightning_hooks.core.lightning_api import Callback, pl


class AdapterState(Callback):
    """Checkpoint state of a family adapter: ``{"family", "hook_list": [hook key, ...], "hooks": {hook key: state},
    "host": facade state}``.

    Hooks are keyed by :meth:`hook_keys` (class name, ``#n`` when a class repeats), and ``hook_list`` is the list of
    all of them. The state key (``state_key``, of :class:`~lightning_hooks.core.state_keys.UniqueStateKey`) is built
    from that list, so resuming with another list finds no state under its key: :meth:`migrate_state` then loads the
    one state of the same adapter class that no other callback claims, and warns what changed.

    Example::

        adapter.state_dict()  # {"family": "mmengine", "hook_list": ["EMAHook"], "hooks": {"EMAHook": {...}}, "host": ...}
    """

    family: ClassVar[str]
    hooks: list[Any]
    state_key: str

    def hook_keys(self) -> list[str]:
        """Stable per-hook keys: the class name, suffixed with ``#n`` when a class repeats."""
        seen: Counter[str] = Counter()
        keys = []
        for hook in self.hooks:
            name = type(hook).__qualname__
            keys.append(f"{name}#{seen[name]}" if seen[name] else name)
            seen[name] += 1
        return keys

    def hook_state(self, hook: Any) -> Any:
        """State of one hook to save in the Lightning checkpoint; ``None`` when the family keeps none per hook."""
        return None

    def load_hook_state(self, hook: Any, state: Any) -> None:
        raise NotImplementedError

    def removed_hooks_note(self, removed: list[str]) -> str:
        """What the run continues from when hooks of the checkpoint (``removed``: their keys) are no longer in the
        list, for :meth:`migrate_state`'s warning (MMEngine: the EMA weights ``EMAHook`` saved as the model's); ""
        when their state is simply dropped."""
        return ""

    def host_state(self) -> dict[str, Any]:
        """State of the facade (counters, message hubs, log buffers)."""
        return {}

    def load_host_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`host_state`."""

    @override
    def state_dict(self) -> dict[str, Any]:
        pairs = zip(self.hook_keys(), self.hooks, strict=True)
        hooks = {k: s for k, h in pairs if (s := self.hook_state(h)) is not None}
        return {"family": self.family, "hook_list": self.hook_keys(), "hooks": hooks, "host": self.host_state()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        family = state_dict.get("family")
        if family != self.family:
            raise ValueError(
                f"{type(self).__name__} ({self.state_key}) was given checkpoint state written by a {family!r} adapter. "
                f"Resume with the same adapters and hooks the checkpoint was written with."
            )
        saved = state_dict.get("hooks", {})
        for key, hook in zip(self.hook_keys(), self.hooks, strict=True):
            if key in saved:
                self.load_hook_state(hook, saved[key])
        unknown = saved.keys() - set(self.hook_keys())
        if unknown:
            warnings.warn(
                f"{type(self).__name__}: checkpoint holds state of hooks not in this adapter: {sorted(unknown)}",
                stacklevel=1,
            )
        self.load_host_state(state_dict.get("host", {}))

    def migrate_state(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> None:
        """When the checkpoint has no state under this adapter's key (resumed with another hook list), load the one
        state an adapter of this class wrote that no callback of ``trainer`` claims, and warn which hooks changed; with
        several candidates, start fresh and warn. Lightning skips ``load_state_dict`` for a key the checkpoint lacks."""
        states = checkpoint.get("callbacks") or {}
        if self.state_key in states:
            return
        prefix = type(self).__qualname__
        found = self._unclaimed_states(trainer, states)
        name = f"{prefix} ({', '.join(self.hook_keys())})"
        if len(found) > 1:
            warnings.warn(
                f"{name}: the checkpoint has no state for these hooks and several {prefix} states it cannot tell "
                f"apart: {sorted(found)}. This adapter starts fresh; resume with the hooks the checkpoint was written with.",
                stacklevel=1,
            )
        elif found:
            [(key, state)] = found.items()
            saved = _saved_hooks(state, key, prefix)
            added = [k for k in self.hook_keys() if k not in saved]
            removed = [k for k in saved if k not in self.hook_keys()]
            changes = [f"added (start fresh): {added}"] * bool(added) + [f"removed (state dropped): {removed}"] * bool(removed)
            note = self.removed_hooks_note(removed) if removed else ""
            warnings.warn(
                f"{name}: the checkpoint was written with hooks {saved}; loading its state for the shared hooks and "
                f"the host. Hooks {', '.join(changes) or 'reordered'}." + (f" {note}" if note else ""),
                stacklevel=1,
            )
            self.load_state_dict(copy.deepcopy(state))

    def _unclaimed_states(self, trainer: pl.Trainer, states: Mapping[Any, Any]) -> dict[str, Any]:
        """The checkpoint's states of an adapter of this class and family whose key no callback of ``trainer`` has
        (written with another hook list)."""
        taken = {c.state_key for c in trainer.callbacks}  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        prefix = type(self).__qualname__ + "{"
        return {
            k: v for k, v in states.items()
            if isinstance(k, str) and k.startswith(prefix) and k not in taken
            and isinstance(v, Mapping) and v.get("family") == self.family
        }  # fmt: skip  # one filter, one condition per line

    def checkpoint_state(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> dict[str, Any] | None:
        """The state of ``checkpoint`` this adapter loads: its own key's, else the one unclaimed state of its class
        (see :meth:`migrate_state`); None when there is none, or several it cannot tell apart."""
        states = checkpoint.get("callbacks") or {}
        if self.state_key in states:
            return states[self.state_key]
        found = self._unclaimed_states(trainer, states)
        return next(iter(found.values())) if len(found) == 1 else None


def _saved_hooks(state: Mapping[str, Any], key: str, prefix: str) -> list[str]:
    """The hook keys of the adapter that wrote ``state``: its ``hook_list``. A state written by lightning-hooks 0.1.0
    has none: its hook keys are only in its state ``key``, written by ``_generate_state_key(hooks=[...])``."""
    if "hook_list" in state:
        return list(state["hook_list"])
    try:
        return list(ast.literal_eval(re.sub(r"#\d+$", "", key[len(prefix):]))["hooks"])
    except (ValueError, SyntaxError, KeyError, TypeError):
        return []
