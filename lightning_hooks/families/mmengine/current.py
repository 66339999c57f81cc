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
from dataclasses import dataclass
from typing import Any

from lightning_hooks.core.triggers import Patch, Remove


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


@dataclass(frozen=True)
class RunInstances(Patch):
    """What an adapter's run makes current until it ends, as a whole ``Runner`` run has it: the runner's
    ``DefaultScope`` and its ``MessageHub`` / ``Visualizer`` / ``MMLogger`` (:func:`make_current`; a logger the run
    creates later, in ``runner.attach``, is the newest and so the current one). Removing it leaves the scope and makes
    the previously current instances current again."""

    environment = True

    def __str__(self) -> str:
        return "MMEngine's default scope and current instances"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        runner = adapter.runner
        scope = contextlib.ExitStack()
        if runner.default_scope is not None:
            from mmengine.registry import DefaultScope

            scope.enter_context(DefaultScope.overwrite_default_scope(runner.default_scope.scope_name))
        logger = [runner._logger] if runner._logger is not None else []  # built by runner.attach on the first run
        restore = make_current([runner.message_hub, runner.visualizer, *logger])

        def remove() -> None:
            scope.close()
            restore()

        return remove


#: the one :class:`RunInstances` patch
RUN_INSTANCES = RunInstances()


def _registries(instance: Any) -> list[OrderedDict[str, Any]]:
    """The ``_instance_dict`` of each class along ``instance``'s MRO that has its own (``ManagerMeta`` gives every
    class one)."""
    return [vars(klass)["_instance_dict"] for klass in type(instance).__mro__ if "_instance_dict" in vars(klass)]
