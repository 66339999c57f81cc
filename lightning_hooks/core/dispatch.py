"""Dispatch: which hooks a trigger calls, in which order, with which arguments, and how often each row fired.

:class:`HookDispatch` needs no Trainer: give it ordered hooks and an :class:`EventTable`, build its plan once the host
facade exists, and :meth:`~HookDispatch.fire` triggers. :class:`~lightning_hooks.core.adapter.LegacyHookAdapter`
holds one (``adapter.dispatch``) and fires it from Lightning's events and the patches it installs.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from lightning_hooks.core.errors import add_note
from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.triggers import ON, Trigger

Call = tuple[Any, Callable[..., Any]]
#: row index, row, condition, the row's argument names (as a set, for the fast path of ``fire``), hook calls
Step = tuple[int, Mount, Callable[[], bool] | None, frozenset[str], tuple[Call, ...]]


class HookCaller(Protocol):
    """What a facade may call to run its hooks, handed to it instead of the adapter: the host's ``call_hook`` /
    ``run_hooks`` and its own methods that call hooks (``runner.load_checkpoint``) go through it, so each call gets the
    adapter's bookkeeping, error notes, ``fast_dev_run`` muting and fired counts."""

    def fire(self, trigger: Trigger, **context: Any) -> None:
        """Fire ``trigger``'s table rows, as the adapter does when the run reaches it (``adapter.trigger``)."""

    def call_hook(self, mount: str, **context: Any) -> None:
        """Call mount point ``mount`` by name on every hook that implements it, in the adapter's order, with the host
        and ``context`` (mmcv's ``runner.call_hook``, VISSL's ``task.run_hooks``)."""


class HookDispatch:
    """The dispatch plan of one family's hooks: per trigger, the table rows that have a hook overriding the mount
    point, and per row how often it fired. A member of the adapter (``adapter.dispatch``); it needs no Trainer.

    It holds the ordered hook list (the one list: the adapter and its checkpoint state read it here). Build the plan
    with :meth:`build_plan` once the host exists; until then every accepted trigger fires nothing. A row's ``when``
    names a method of ``conditions`` (the adapter) returning whether the row fires; ``position`` says where the run
    is, for error notes.

    Contract with the adapter: a hook that raises in :meth:`fire` or :meth:`call_hook` is recorded in
    :attr:`failed_at` (mount point, hook) by the dispatch only; the adapter reads it while handling the failure
    (MMEngine's EMA swap-back) and clears it with :meth:`clear_failure` once ``on_exception`` has run.

    Example::

        toy = HookDispatch("Toy", "toy", TOY_EVENTS, [MyToyHook()], (ToyHook,))
        toy.build_plan((host,))
        toy.fire(ON["on_train_start"])  # MyToyHook.before_train(host)
    """

    def __init__(
        self, name: str, family: str, events: EventTable, hooks: list[Any], base_classes: tuple[type, ...], *,
        delegates: Mapping[str, tuple[str, ...]] | None = None, noops: tuple[Callable[..., Any], ...] = (),
        instance_mounts: bool = False, conditions: object = None, position: Callable[[], str] | None = None,
    ) -> None:  # fmt: skip  # the keyword-only options on their own line
        self.name, self.family, self.events = name, family, events
        self.hooks = hooks
        self.base_classes = base_classes
        #: mount point -> helper methods whose override also makes the mount point active (MMEngine's ``_before_iter``)
        self.delegates: Mapping[str, tuple[str, ...]] = delegates or {}
        #: functions that count as "not overridden" besides the base classes' own (Classy's ``ClassyHook._noop``)
        self.noops = noops
        #: a callable set on the hook instance counts as a mount point (mmcv's ``ClosureHook`` sets ``hook.<name>``)
        self.instance_mounts = instance_mounts
        self.conditions = conditions
        self._position = position or _before_setup  # a function, not a lambda: the adapter is pickled (ddp_spawn)
        self._fired = [0] * len(events.rows)  # how often each table row fired, by row index
        # what fire() accepts: the table's triggers, and every Lightning event (the adapter's methods fire them all)
        self._triggers: frozenset[Trigger] = frozenset(events.events()) | frozenset(ON.values())
        self._host_args: tuple[Any, ...] = ()
        # the plan: the steps each accepted trigger fires, keyed by the id of the trigger objects (a fast lookup on
        # every step), and by value for an equal trigger built elsewhere
        self._plan_by_value: dict[Trigger, tuple[Step, ...]] = dict.fromkeys(self._triggers, ())
        self._plan: dict[int, tuple[Step, ...]] = {id(t): () for t in self._triggers}
        self.failed_at: tuple[str, Any] | None = None  # (mount point, hook) of the last hook error
        self._muted: dict[str, list[Any]] = {}  # why -> hooks that fire nothing (see mute)
        self._by_name: dict[str, tuple[Call, ...]] = {}  # mount point -> hook calls, for call_hook
        self._called: Counter[str] = Counter()  # how often call_hook called each mount point

    def clear_failure(self) -> None:
        """Forget the last hook error (the adapter calls it once the failure has been handled)."""
        self.failed_at = None

    def active(self, hook: Any, mount: str) -> bool:
        """Whether ``hook`` does something at ``mount``: it is not muted and overrides the mount point or one of its
        delegates (or, with ``instance_mounts``, has it set on the instance)."""
        if any(hook is m for muted in self._muted.values() for m in muted):
            return False
        if self.instance_mounts and callable(vars(hook).get(mount)):
            return True
        return any(self._overrides(hook, name) for name in (mount, *self.delegates.get(mount, ())))

    def _overrides(self, hook: Any, name: str) -> bool:
        fn = getattr(type(hook), name, None)
        if fn is None:
            return False
        defaults = {getattr(base, name, None) for base in self.base_classes} | set(self.noops)
        return fn not in defaults

    def build_plan(self, host_args: tuple[Any, ...]) -> None:
        """Precompute, per trigger, the rows that have at least one active hook. Call once the host exists.

        A row's condition named in ``conditions.fixed_conditions`` holds for the adapter's life (a
        :class:`~lightning_hooks.core.manual_step.ManualStepAdapter`'s ``hooks_step``): it is asked here, once, and
        the row is left out or fires without asking (such rows fire every step)."""
        self._host_args = host_args
        fixed: frozenset[str] = getattr(self.conditions, "fixed_conditions", frozenset())
        plan: dict[Trigger, list[Step]] = {}
        for index, row in enumerate(self.events.rows):
            calls = tuple((h, getattr(h, row.mount)) for h in self.hooks if self.active(h, row.mount))
            if calls:
                when = getattr(self.conditions, row.when) if row.when else None
                if when is not None and row.when in fixed:
                    if not when():
                        continue
                    when = None
                plan.setdefault(row.event, []).append((index, row, when, frozenset(row.args), calls))
        self._plan_by_value = {trigger: tuple(plan.get(trigger, ())) for trigger in self._triggers}
        self._plan = {id(trigger): steps for trigger, steps in self._plan_by_value.items()}
        self._by_name = {}

    def fires(self, trigger: Trigger) -> bool:
        """Whether ``trigger`` has a row with an active hook in the plan (an adapter leaves out a patch whose rows
        would call nothing)."""
        return bool(self._plan_by_value.get(trigger))

    def mute(self, why: str, hooks: list[Any]) -> None:
        """Fire nothing for ``hooks`` (and again everything for those muted before for the same reason ``why``) from
        now on: checkpoint hooks under ``fast_dev_run``, iMIX's main-process-only hooks on other ranks. Rebuilds the
        plan when the list changes."""
        before = self._muted.get(why, [])
        if len(hooks) != len(before) or any(a is not b for a, b in zip(hooks, before, strict=True)):
            self._muted[why] = list(hooks)
            self.build_plan(self._host_args)

    def fire(self, trigger: Trigger, *, errors: str = "raise", **context: Any) -> None:
        """Call, in table order, every mount point ``trigger`` fires, with the arguments its row names.

        A hook's exception propagates with a note naming hook, mount point and step; with ``errors="warn"`` (while
        handling another failure) it only warns, so the original exception reaches the user. A trigger that is not in
        the family's table (a patch the table does not name, a plain string) is an error."""
        steps = self._plan.get(id(trigger))
        if steps is None:
            steps = self._plan_by_value.get(trigger)
            if steps is None:
                raise ValueError(f"{self.name}: {trigger!r} is not a trigger of the {self.family} event table")
        host = self._host_args
        for index, row, when, names, calls in steps:
            if when is not None and not when():
                continue
            # a row takes its arguments from the context by name: the context itself when it holds exactly those; a
            # row without arguments calls its hooks with the host alone (no keyword dict: most rows, every step)
            kwargs = (context if context.keys() == names else self._arguments(trigger, row, context)) if names else None
            self._fired[index] += 1
            for hook, fn in calls:
                try:
                    if kwargs is None:
                        fn(*host)
                    else:
                        fn(*host, **kwargs)
                except Exception as err:
                    if errors == "raise":
                        self.failed_at = (row.mount, hook)
                        add_note(err, self._where(hook, row))
                        raise
                    warnings.warn(f"{self._where(hook, row)} while handling {context.get('exception')!r}: {err!r}", stacklevel=2)

    def call_hook(self, mount: str, **context: Any) -> None:
        """Call ``mount`` by name (no table row: the host's ``call_hook`` / ``run_hooks``, a facade method) on every
        active hook that implements it, in order, with the host and ``context``. A hook's exception propagates with a
        note naming hook and mount point; the call counts in :attr:`fired`."""
        calls = self._by_name.get(mount)
        if calls is None:
            calls = self._by_name[mount] = tuple((h, getattr(h, mount)) for h in self.hooks if self.active(h, mount))
        if calls:
            self._called[mount] += 1
        for hook, fn in calls:
            try:
                fn(*self._host_args, **context)
            except Exception as err:
                self.failed_at = (mount, hook)
                add_note(
                    err,
                    f"[lightning-hooks] raised by {self.family} hook {type(hook).__qualname__} in mount point "
                    f"'{mount}' (called by name, {self._position()})",
                )
                raise

    def _arguments(self, trigger: Trigger, row: Mount, context: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments ``row`` names, taken from ``context``; one the context lacks is an error (the family's
        adapter fires ``trigger`` without an argument its table's row passes on)."""
        missing = [name for name in row.args if name not in context]
        if missing:
            raise TypeError(
                f"{self.name}: the {self.family} event table's row '{row.mount}' at trigger '{trigger}' "
                f"passes {missing} to its hooks, but the trigger fired with {sorted(context) or 'no arguments'}. "
                f"Fire '{trigger}' with {list(row.args)}, or change the row's args."
            )
        return {name: context[name] for name in row.args}

    def _where(self, hook: Any, row: Mount) -> str:
        return (
            f"[lightning-hooks] raised by {self.family} hook {type(hook).__qualname__} in mount point '{row.mount}' "
            f"(Lightning event '{row.event}', {self._position()})"
        )

    @property
    def fired_rows(self) -> Counter[Mount]:
        """How often each table row has fired so far."""
        return Counter({row: n for row, n in zip(self.events.rows, self._fired, strict=True) if n})

    @property
    def fired(self) -> Counter[str]:
        """How often each mount point has fired so far (for hooks that implement it), by its rows or by name
        (:meth:`call_hook`)."""
        counts: Counter[str] = Counter(self._called)
        for row, n in self.fired_rows.items():
            counts[row.mount] += n
        return counts

    def mount_counts(self, hook: Any) -> dict[str, int]:
        """How often each mount point ``hook`` implements has fired so far."""
        fired = self.fired
        return {m: fired[m] for m in self.events.mount_points() if self.active(hook, m) and fired[m]}


def _before_setup() -> str:
    """The position of a dispatch that no adapter drives, for error notes."""
    return "before setup"
