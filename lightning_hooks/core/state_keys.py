"""A checkpoint key per callback instance, so two equal callbacks can share a Trainer and each resumes its own state."""

from __future__ import annotations

import weakref
from functools import cached_property
from typing import Any

from typing_extensions import override

from lightning_hooks.core.lightning_api import pl

_live: dict[str, weakref.WeakSet[Any]] = {}


class UniqueStateKey:
    """Mixin for stateful callbacks: ``state_key`` is the class's key plus ``#n`` for the n-th equal instance.

    Lightning refuses two callbacks with one ``state_key`` in a Trainer. Here the key is unique among live instances
    from construction on, and at ``setup`` it becomes the instance's position among the Trainer's callbacks with the
    same base key (``EMA``, ``EMA#1``, ...), so a new process with the same callbacks in the same order resumes each
    one from its own state.

    The key is computed once per index (Lightning reads it at every callback call, several times a step) and kept in
    the instance until the index changes.
    """

    _base_state_key: str
    _state_key_index: int

    def _init_state_key(self, base: str) -> None:
        """Claim the smallest index not held by a live instance with the same ``base`` key."""
        live = _live.setdefault(base, weakref.WeakSet())
        taken = {other._state_key_index for other in live}
        self._base_state_key = base
        self._state_key_index = next(i for i in range(len(taken) + 1) if i not in taken)
        self.__dict__.pop("state_key", None)  # the key of the new index
        live.add(self)

    def _key_by_position(self, trainer: pl.Trainer) -> None:
        """Number this instance by its position among ``trainer``'s callbacks with the same base key, and give up its
        claim: the claim only keeps keys unique until a Trainer has ordered them (instances of finished runs, which
        a notebook or a test session keeps alive, then no longer push new ones to ``#1``).

        An instance unpickled in another process (``ddp_spawn``'s ranks, a ``multiprocessing`` worker) never claimed
        an index there: it has nothing to give up."""
        callbacks = trainer.callbacks  # type: ignore[attr-defined]  # Lightning's callback connector sets it; Trainer does not declare it
        equal = [c for c in callbacks if getattr(c, "_base_state_key", None) == self._base_state_key]
        self._state_key_index = next(i for i, c in enumerate(equal) if c is self)
        self.__dict__.pop("state_key", None)  # the key of the new index
        live = _live.get(self._base_state_key)
        if live is not None:
            live.discard(self)

    @cached_property
    @override
    def state_key(self) -> str:  # type: ignore[misc]  # a mixin: it overrides Callback.state_key where mixed in; kept in the instance (a plain attribute read after the first)
        index = self._state_key_index
        return self._base_state_key if index == 0 else f"{self._base_state_key}#{index}"
