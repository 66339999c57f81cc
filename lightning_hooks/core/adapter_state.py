"""An adapter's checkpoint state: per-hook and host state, and the migration of a state written with another hook list.

:class:`AdapterState` is a member of :class:`~lightning_hooks.core.adapter.LegacyHookAdapter` (``adapter.state``):
the adapter's ``Callback`` methods ``state_dict`` / ``load_state_dict`` and ``on_load_checkpoint`` call it, and it
asks the adapter (a :class:`StateOwner`) for what only the family knows: each hook's state and the host's.

The state carries its format (:data:`STATE_FORMAT`); a state of an older format is converted to this one where its
meaning is known (:meth:`StateOwner.upgrade_host_state`) or refused (:class:`StateFormatError`), never loaded with
counters that mean something else now.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from lightning_hooks.core.lightning_api import pl

#: The format of the adapter state this version writes (its ``"format"``). 1: no ``"format"`` key (lightning-hooks up
#: to commit 4f978f6); 2: iMIX's loop counts an epoch whose last iteration ran as done (``epoch`` the next one, as
#: iMIX's ``resume_or_load``), mmcv ``IterBasedRunner``'s ``epoch`` is ``meta['epoch']`` as its ``save_checkpoint``
#: writes it (the loader's pass plus one).
STATE_FORMAT = 2


class StateFormatError(ValueError):
    """Adapter state of a format this version cannot load as it is meant: written by a newer lightning-hooks, or an
    older one whose counters cannot be converted exactly. The message names the checkpoint, the adapter and its family,
    what changed and the way out."""


def format_error(owner: StateOwner, source: str, written: int, changed: str, way_out: str) -> StateFormatError:
    """The refusal of ``owner``'s state of format ``written`` read from ``source`` (the checkpoint): what changed since
    that format and the way out."""
    return StateFormatError(
        f"{type(owner).__name__} ({', '.join(owner.hook_keys())}): {source} holds {owner.family} adapter state of format "
        f"{written}, written by an earlier lightning-hooks (format {STATE_FORMAT} now): {changed}. It cannot be resumed "
        f"with its counters as they are; {way_out}"
    )


class StateOwner(Protocol):
    """What :class:`AdapterState` reads from its adapter: the family, the hooks and their keys, and the family's
    per-hook and host state."""

    family: str

    @property
    def hooks(self) -> list[Any]: ...

    @property
    def state_key(self) -> str: ...

    def hook_keys(self) -> list[str]: ...

    def hook_state(self, hook: Any) -> Any: ...

    def load_hook_state(self, hook: Any, state: Any) -> None: ...

    def host_state(self) -> dict[str, Any]: ...

    def load_host_state(self, state: dict[str, Any]) -> None: ...

    def upgrade_host_state(self, state: dict[str, Any], written: int, checkpoint: Mapping[str, Any] | None,
                           source: str) -> dict[str, Any]: ...  # fmt: skip  # the signature on two lines

    def removed_hooks_note(self, removed: list[str]) -> str: ...


def default_hook_keys(hooks: list[Any]) -> list[str]:
    """Stable per-hook keys: the class name, suffixed with ``#n`` when a class repeats."""
    seen: Counter[str] = Counter()
    keys = []
    for hook in hooks:
        name = type(hook).__qualname__
        keys.append(f"{name}#{seen[name]}" if seen[name] else name)
        seen[name] += 1
    return keys


def base_state_key(adapter_class: str, hook_keys: list[str]) -> str:
    """An adapter's checkpoint key before its ``#n``: its class and a digest of its hook list, so resuming with
    another list finds no state under its key and migrates (:meth:`AdapterState.migrate`). The list itself is in the
    state (``hook_list``), never read back from the key."""
    digest = hashlib.sha1("\n".join(hook_keys).encode()).hexdigest()[:10]
    return f"{adapter_class}@{digest}"


def key_before_0_3(adapter_class: str, hook_keys: list[str], index: int) -> str:
    """The key an adapter with these hooks had in checkpoints of lightning-hooks 0.1 and 0.2: Lightning's
    ``Callback._generate_state_key(hooks=[...])`` format, plus ``#n`` for the n-th adapter with the same hooks."""
    key = f"{adapter_class}{ {'hooks': hook_keys}!r}"
    return f"{key}#{index}" if index else key


class AdapterState:
    """Checkpoint state of a family adapter: ``{"format": STATE_FORMAT, "family", "hook_list": [hook key, ...],
    "hooks": {hook key: state}, "host": facade state}``.

    Hooks are keyed by the adapter's ``hook_keys()`` (class name, ``#n`` when a class repeats), and ``hook_list`` is
    the list of all of them. The adapter's ``state_key`` is built from that list (:func:`base_state_key`), so resuming
    with another list finds no state under its key: :meth:`migrate` then loads the one state of the same adapter class
    that no other callback claims, and warns what changed. A checkpoint written before 0.3 keys the same state by
    :func:`key_before_0_3`; :meth:`migrate` finds it there.

    Example::

        adapter.state.state_dict()  # {"format": 2, "family": "mmengine", "hook_list": ["EMAHook"], "hooks": {"EMAHook": {...}}, ...}
    """

    def __init__(self, owner: StateOwner) -> None:
        self.owner = owner

    @property
    def state_key(self) -> str:
        """The adapter's key among the callbacks' states in a Lightning checkpoint."""
        return self.owner.state_key

    def state_dict(self) -> dict[str, Any]:
        owner = self.owner
        pairs = zip(owner.hook_keys(), owner.hooks, strict=True)
        hooks = {k: s for k, h in pairs if (s := owner.hook_state(h)) is not None}
        return {
            "format": STATE_FORMAT, "family": owner.family, "hook_list": owner.hook_keys(), "hooks": hooks,
            "host": owner.host_state(),
        }  # fmt: skip  # the keys on two lines

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        owner = self.owner
        family = state_dict.get("family")
        if family != owner.family:
            raise ValueError(
                f"{type(owner).__name__} ({', '.join(owner.hook_keys())}) was given checkpoint state written by a {family!r} "
                f"adapter. Resume with the same adapters and hooks the checkpoint was written with."
            )
        state_dict = self.upgrade(state_dict, None, "the state given to load_state_dict")
        saved = state_dict.get("hooks", {})
        keys = owner.hook_keys()
        for key, hook in zip(keys, owner.hooks, strict=True):
            if key in saved:
                owner.load_hook_state(hook, saved[key])
        unknown = saved.keys() - set(keys)
        if unknown:
            warnings.warn(
                f"{type(owner).__name__}: checkpoint holds state of hooks not in this adapter: {sorted(unknown)}",
                stacklevel=1,
            )
        owner.load_host_state(state_dict.get("host", {}))

    def migrate(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> None:
        """When the checkpoint has no state under the adapter's key, load the state it has under the adapter's key
        before 0.3 (the same hooks); else (resumed with another hook list) the one state an adapter of this class
        wrote that no callback of ``trainer`` claims, and warn which hooks changed; with several candidates, start
        fresh and warn. Lightning skips ``load_state_dict`` for a key the checkpoint lacks."""
        owner = self.owner
        states = checkpoint.get("callbacks") or {}
        self._upgrade_states(trainer, checkpoint)
        if owner.state_key in states:
            return
        old = _key_before_0_3(owner, trainer)
        if old in states:
            self.load_state_dict(copy.deepcopy(states[old]))
            return
        prefix = type(owner).__qualname__
        found = self._unclaimed_states(trainer, states)
        name = f"{prefix} ({', '.join(owner.hook_keys())})"
        if len(found) > 1:
            warnings.warn(
                f"{name}: the checkpoint has no state for these hooks and several {prefix} states it cannot tell "
                f"apart: {sorted(found)}. This adapter starts fresh; resume with the hooks the checkpoint was written with.",
                stacklevel=1,
            )
        elif found:
            [state] = found.values()
            saved = _saved_hooks(state)
            added = [k for k in owner.hook_keys() if k not in saved]
            removed = [k for k in saved if k not in owner.hook_keys()]
            changes = [f"added (start fresh): {added}"] * bool(added) + [f"removed (state dropped): {removed}"] * bool(removed)
            note = owner.removed_hooks_note(removed) if removed else ""
            warnings.warn(
                f"{name}: the checkpoint was written with hooks {saved}; loading its state for the shared hooks and "
                f"the host. Hooks {', '.join(changes) or 'reordered'}." + (f" {note}" if note else ""),
                stacklevel=1,
            )
            self.load_state_dict(copy.deepcopy(state))

    def upgrade(self, state: Mapping[str, Any], checkpoint: Mapping[str, Any] | None, source: str) -> Mapping[str, Any]:
        """``state`` in :data:`STATE_FORMAT`: as it is when written so, else its host state converted by the family
        (:meth:`StateOwner.upgrade_host_state`, given the whole ``checkpoint`` where there is one). ``source`` names
        where the state comes from in errors. Raises :class:`StateFormatError` for a format newer than this one."""
        written = state.get("format", 1)
        if written == STATE_FORMAT:
            return state
        owner = self.owner
        if not isinstance(written, int) or written > STATE_FORMAT:
            raise StateFormatError(
                f"{type(owner).__name__} ({', '.join(owner.hook_keys())}): {source} holds {owner.family} adapter state "
                f"of format {written!r}, written by a newer lightning-hooks than this one (which reads formats up to "
                f"{STATE_FORMAT}). Resume it with the lightning-hooks version that wrote it, or a later one."
            )
        host = owner.upgrade_host_state(copy.deepcopy(dict(state.get("host", {}))), written, checkpoint, source)
        return {**state, "format": STATE_FORMAT, "host": host}

    def _upgrade_states(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> None:
        """Convert, in ``checkpoint``, each state this adapter may load (under its key, its key before 0.3, or an
        unclaimed one of its class) to :data:`STATE_FORMAT` (:meth:`upgrade`), before Lightning hands it to
        ``load_state_dict``."""
        states = checkpoint.get("callbacks")
        if not states:
            return
        source = f"the checkpoint {str(getattr(trainer, 'ckpt_path', None) or 'being loaded')!r}"
        keys = [self.owner.state_key, _key_before_0_3(self.owner, trainer), *self._unclaimed_states(trainer, states)]
        for key in dict.fromkeys(keys):
            state = states.get(key)
            if isinstance(state, Mapping) and state.get("family") == self.owner.family:
                states[key] = self.upgrade(state, checkpoint, source)

    def _unclaimed_states(self, trainer: pl.Trainer, states: Mapping[Any, Any]) -> dict[str, Any]:
        """The checkpoint's states of an adapter of this class and family whose key no callback of ``trainer`` has,
        now or before 0.3 (written with another hook list)."""
        callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        taken = {c.state_key for c in callbacks}
        taken |= {_key_before_0_3(c, trainer) for c in callbacks if isinstance(getattr(c, "state", None), AdapterState)}
        prefix = type(self.owner).__qualname__
        return {
            k: v for k, v in states.items()
            if isinstance(k, str) and k.startswith((prefix + "@", prefix + "{")) and k not in taken
            and isinstance(v, Mapping) and v.get("family") == self.owner.family
        }  # fmt: skip  # one filter, one condition per line

    def checkpoint_state(self, trainer: pl.Trainer, checkpoint: Mapping[str, Any]) -> dict[str, Any] | None:
        """The state of ``checkpoint`` the adapter loads: its own key's (now or before 0.3), else the one unclaimed
        state of its class (see :meth:`migrate`); None when there is none, or several it cannot tell apart."""
        states = checkpoint.get("callbacks") or {}
        for key in (self.owner.state_key, _key_before_0_3(self.owner, trainer)):
            if key in states:
                return states[key]
        found = self._unclaimed_states(trainer, states)
        return next(iter(found.values())) if len(found) == 1 else None


def _key_before_0_3(owner: StateOwner, trainer: pl.Trainer) -> str:
    """``owner``'s key in a checkpoint written before 0.3: numbered among ``trainer``'s adapters of its class with the
    same hook keys, as that key was."""
    keys = owner.hook_keys()
    callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
    same = [c for c in callbacks if type(c) is type(owner) and c.hook_keys() == keys]
    index = next((i for i, c in enumerate(same) if c is owner), 0)
    return key_before_0_3(type(owner).__qualname__, keys, index)


def _saved_hooks(state: Mapping[str, Any]) -> list[str]:
    """The hook keys of the adapter that wrote ``state``: its ``hook_list``; a state written by lightning-hooks 0.1.0
    has none, so the hooks that saved state stand for it (a hook that saved none shows as added)."""
    if "hook_list" in state:
        return list(state["hook_list"])
    return list(state.get("hooks", {}))
