"""A fourth hook family, for tests only: one folder plus one registry line (``families.FAMILIES.append(FAMILY)``).

Its hooks derive from :class:`ToyHook`, receive a :class:`Host` and are built from ``{kind: ...}`` configs.
"""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.adapter import LegacyHookAdapter
from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.facade import Facade
from lightning_hooks.core.family import Family, build_adapter, build_each, expect
from lightning_hooks.core.triggers import LAST_TRAIN_BATCH, ON


class ToyHook:
    """The toy library's hook base: four mount points, each given the host."""

    def begin(self, host: Host) -> None: ...

    def batch(self, host: Host) -> None: ...

    def epoch_done(self, host: Host) -> None: ...

    def done(self, host: Host) -> None: ...


class Counter(ToyHook):
    def __init__(self, start: int = 0) -> None:
        self.seen: list[tuple[str, int]] = []
        self.start = start

    def batch(self, host: Host) -> None:
        self.seen.append(("batch", self.start + host.batches))

    def epoch_done(self, host: Host) -> None:
        self.seen.append(("epoch_done", self.start + host.batches))


class Host(Facade):
    host = "host"

    def __init__(self) -> None:
        self.batches = 0


EVENTS = EventTable(
    "toy",
    [
        Mount(ON["on_train_start"], "begin"),
        Mount(ON["on_train_batch_end"], "batch"),
        Mount(LAST_TRAIN_BATCH, "epoch_done"),
        Mount(ON["on_train_epoch_end"], "epoch_done", when="train_epoch_open"),
        Mount(ON["on_train_end"], "done"),
    ],
    conditions={"train_epoch_open": "the epoch ended before its last batch"},
)


class ToyAdapter(LegacyHookAdapter):
    family = "toy"
    events = EVENTS
    family_title, host_args, upstream = "Toy", ("host",), (__name__,)

    def __init__(self, hooks: Any, *, start: int = 0) -> None:
        super().__init__(hooks)
        for hook in self.hooks:
            hook.start = start
        self.host = Host()
        self.dispatch.build_plan((self.host,))

    @classmethod
    def base_classes(cls) -> tuple[type, ...]:
        return (ToyHook,)

    @classmethod
    def build_hook(cls, config: dict[str, Any]) -> Any:
        config = dict(config)
        if config.pop("kind", None) != "counter":
            raise KeyError("unknown toy hook kind; the toy registry has: counter")
        return Counter(**config)

    def end_train_batch(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.host.batches += 1
        super().end_train_batch(trainer, pl_module, outputs, batch, batch_idx)


def build_section(section: Any, path: str) -> ToyAdapter:
    options = dict(expect(section, dict, path, FAMILY.section_example))
    hooks = build_each(ToyAdapter, expect(options.pop("hooks", []), list, f"{path}.hooks", "[{kind: counter}]"), f"{path}.hooks")
    return build_adapter(ToyAdapter, hooks, options, path)


FAMILY = Family(
    name="toy",
    adapter=ToyAdapter,
    build_section=build_section,
    section_example="{hooks: [{kind: counter}], start: 0}",
    accepts="tests.core.toy_family.ToyHook",
)
