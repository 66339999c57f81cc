"""MMEngine's global instances (``MessageHub``, ``Visualizer``, ``MMLogger``): an adapter's own are the *current*
ones while its run goes, as a new ``Runner``'s are, and the previous ones are current again after it.

MMEngine's ``ManagerMixin.get_current_instance()`` returns the instance created last: the last entry of the class's
``_instance_dict``. An adapter creates its instances when it is built, so with two adapters in one process (two
Trainers, or one adapter reused after another) the one built last would stay current for both; hooks and
``print_log(logger="current")`` would then write into the other adapter's hub and log.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any


def make_current(instances: Iterable[Any]) -> Callable[[], None]:
    """Make each of ``instances`` (MMEngine ``ManagerMixin`` objects) the current instance of its class and of every
    base class that registered it (a ``DetLocalVisualizer`` is also ``Visualizer``'s); returns the function that
    makes the previously current ones current again (those that still exist).

    Example::

        restore = make_current([runner.message_hub, runner.visualizer, runner.logger])
        ...  # MessageHub.get_current_instance() is runner.message_hub
        restore()
    """
    previous: list[tuple[OrderedDict[str, Any], str]] = []
    for instance in instances:
        name = instance.instance_name
        for registry in _registries(instance):
            if name not in registry:
                continue
            last = next(reversed(registry))
            if last != name:
                previous.append((registry, last))
                registry.move_to_end(name)

    def restore() -> None:
        for registry, name in reversed(previous):
            if name in registry:
                registry.move_to_end(name)

    return restore


class RunInstances:
    """What an adapter's run makes current until it ends, as a whole ``Runner`` run has it: the runner's
    ``DefaultScope`` (:meth:`enter_scope`) and its ``MessageHub`` / ``Visualizer`` / ``MMLogger``
    (:meth:`make_current`). :meth:`end` makes the previous ones current again; teardown and a failure both call it.

    Example::

        current = RunInstances()
        current.enter_scope(runner.default_scope)
        current.make_current([runner.message_hub, runner.visualizer, runner.logger])
        ...
        current.end()
    """

    def __init__(self) -> None:
        self._scope: contextlib.ExitStack | None = None
        self._restore: Callable[[], None] = _nothing  # makes the instances current before the run current again

    def enter_scope(self, scope: Any) -> None:
        """Make ``scope`` (a ``DefaultScope``; None: none) the current default scope until :meth:`end`."""
        if scope is None or self._scope is not None:
            return
        from mmengine.registry import DefaultScope

        self._scope = contextlib.ExitStack()
        self._scope.enter_context(DefaultScope.overwrite_default_scope(scope.scope_name))

    def make_current(self, instances: Iterable[Any]) -> None:
        """:func:`make_current` of ``instances``, after making current again those that a run which failed before
        its teardown left current."""
        self._end_current()
        self._restore = make_current(instances)

    def end(self) -> None:
        """Leave the default scope and make the instances current before the run current again (idempotent)."""
        if self._scope is not None:
            self._scope.close()
            self._scope = None
        self._end_current()

    def _end_current(self) -> None:
        restore, self._restore = self._restore, _nothing
        restore()


def _nothing() -> None:
    pass


def _registries(instance: Any) -> list[OrderedDict[str, Any]]:
    """The ``_instance_dict`` of each class along ``instance``'s MRO that has its own (``ManagerMeta`` gives every
    class one)."""
    return [vars(klass)["_instance_dict"] for klass in type(instance).__mro__ if "_instance_dict" in vars(klass)]
