"""The descriptor each hook family exports, and the helpers its config-section builder shares.

A family is one folder under ``lightning_hooks/families/`` whose ``__init__`` exports ``FAMILY``, a :class:`Family`,
plus one line in ``lightning_hooks/families/__init__.py``. ``adapt``, ``build_callbacks``, the lifecycle doc, the CLI
and the demo iterate over the registered families; nothing else names a family.

The registry imports every family, also for ``lightning-hooks train --help``: a family's ``__init__`` names its adapter,
whose module imports Lightning, as a :class:`Later` reference, imported when ``family.adapter`` is first read, and
imports Lightning nowhere else (its entry points' ``main`` imports it when it runs), so that reading the registry
imports neither torch nor Lightning (about 4.5 s of CPU for ``lightning-hooks train --help``).

Example::

    ADAPTER = Later("lightning_hooks.families.mmengine.adapter", "MMEngineAdapter")
    FAMILY = Family("mmengine", ADAPTER.as_adapter(), build_section, section_example="{custom_hooks: [...]}",
                    accepts="mmengine.hooks.Hook")
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from lightning_hooks.core.config_kind import config_kind
from lightning_hooks.core.errors import ConfigError, InputError, unknown_name
from lightning_hooks.core.introspect import keywords

if TYPE_CHECKING:  # both import Lightning, which reading the registry does not
    from lightning_hooks.core.adapter import LegacyHookAdapter
    from lightning_hooks.core.demo import DemoHooks


@dataclass(frozen=True)
class Later:
    """``module``'s attribute ``name``, imported on first use: a family's piece that imports Lightning or its legacy
    library, named in the registry line without importing it."""

    module: str
    name: str

    def load(self) -> Any:
        """The attribute (imports ``module``)."""
        return getattr(importlib.import_module(self.module), self.name)

    def as_adapter(self) -> type[LegacyHookAdapter]:
        """This reference as a :class:`Family`'s ``adapter`` (typed as the class it names), loaded on first read."""
        return cast("type[LegacyHookAdapter]", self)


def lazy_exports(module: str, *names: Later) -> Callable[[str], Any]:
    """A family package's module ``__getattr__``: each of ``names`` under its own name, imported on first read
    (``from lightning_hooks.families.mmengine import MMEngineAdapter``)."""
    by_name = {later.name: later for later in names}

    def __getattr__(name: str) -> Any:
        if name in by_name:
            return by_name[name].load()
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


class _Loaded:
    """A :class:`Family` field that may be given as a :class:`Later`: read, it is the attribute, loaded on the first
    read. Set on the class after the dataclass is made (type checkers see the plain field); its ``__init__`` then sets
    the field through it."""

    def __init__(self, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, family: Family | None, owner: type | None = None) -> Any:
        if family is None:
            return self
        value = family.__dict__[self.slot]
        if isinstance(value, Later):
            value = family.__dict__[self.slot] = value.load()
            family.check()
        return value

    def __set__(self, family: Family, value: Any) -> None:
        family.__dict__[self.slot] = value


@dataclass(frozen=True)
class TrainCommand:
    """One legacy training entry point that ``lightning-hooks train`` stands in for (``tools/train.py``, ...).

    Args:
        legacy: the entry point it replaces, for the usage text (``"OpenMMLab tools/train.py"``).
        usage: its argument synopsis (``"CONFIG.py [--work-dir DIR] ..."``).
        kind: the config kind it trains (:mod:`lightning_hooks.core.config_kind`: ``MMENGINE``, ``OPENMMLAB_1X``,
            ``CLASSY``, ``VISSL``), which ``lightning-hooks train`` decides once from its first argument.
        main: ``(argv) -> None``: parse the whole command line (its first argument included) and train.
        explain: ``(exception) -> InputError | None``: the legacy library's own error for a bad input (a registry
            that does not know a name) as the short error of ours that ``lightning-hooks train`` prints, or None.
    """

    legacy: str
    usage: str
    kind: str
    main: Callable[[list[str]], None]
    explain: Callable[[BaseException], InputError | None] | None = None

    def claims(self, first: str) -> bool:
        """Whether a command line starting with ``first`` is this entry point's (see :func:`config_kind`)."""
        return config_kind(first) == self.kind


def add_lightning_arguments(parser: argparse.ArgumentParser, *, precision: bool = True) -> None:
    """The ``Trainer`` flags a family's ``lightning-hooks train`` adds to its legacy script's own, in a "Lightning"
    group: ``--devices``, ``--num-nodes``, ``--strategy``, ``--accelerator``, (``precision``) ``--precision``, and
    ``--logger`` / ``--trainer-config`` (:mod:`lightning_hooks.core.trainer_flags`; ``trainer_options`` reads them and
    ``--trainer.KEY VALUE``)."""
    from lightning_hooks.core.trainer_flags import add_arguments

    group = parser.add_argument_group("Lightning")
    group.add_argument("--devices", default="auto", help="Trainer(devices=...): e.g. 2 for two processes")
    group.add_argument("--num-nodes", type=int, default=1, help="Trainer(num_nodes=...)")
    group.add_argument("--strategy", default="auto", help="Trainer(strategy=...): e.g. ddp")
    group.add_argument("--accelerator", default="auto", help="Trainer(accelerator=...): cpu, gpu, ...")
    if precision:
        group.add_argument("--precision", default=None, help="Trainer(precision=...): e.g. bf16-mixed")
    add_arguments(group)


def apply_config_flags(cfg: Any, args: argparse.Namespace) -> Any:
    """What every OpenMMLab ``tools/train.py`` does to the config first (MMEngine's and 1.x's alike): merge
    ``--cfg-options``, then the work dir: ``--work-dir``, else the config's own, else ``./work_dirs/<config name>``."""
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir", None) is None:
        cfg.work_dir = os.path.join("./work_dirs", os.path.splitext(os.path.basename(args.config))[0])
    return cfg


@dataclass(frozen=True, eq=False)
class Family:
    """One legacy hook family (compared by identity: a registered family is one object).

    Args:
        name: the family's key: ``adapter.family``, its ``build_callbacks`` section and its checkpoint state tag.
        adapter: the adapter class (a :class:`LegacyHookAdapter`), or a :class:`Later` naming it, imported when
            ``family.adapter`` is first read.
        build_section: ``(section, path) -> adapter``: the family's ``build_callbacks`` section, in its own format.
        section_example: what a section looks like, for errors about its structure.
        accepts: the hook base classes, in words, for ``adapt``'s error on an unknown hook.
        demo_hooks: ``(out_dir) -> [(hook, probe)]`` for ``lightning-hooks demo``; ``None`` keeps it out of the demo.
        train: the legacy entry points ``lightning-hooks train`` runs for this family's configs.
        hook_example: one hook, as code, for errors that show how to call ``adapt`` (``"EMAHook()"``).
        config_example: how to build this family's hooks from configs, for ``adapt``'s error on a config dict.
        configure_logging: ``(trainer, adapter) -> None``: set up Python logging as the legacy entry point did, for
            :func:`lightning_hooks.console.configure_logging`; ``None`` when the hooks' library sets up its own.
        batches_per_step: ``(adapter) -> int | None``: the batches per optimizer step when a hook of ``adapter`` owns
            the step (gradient accumulation), for the progress bar; ``None`` (or a result of None): Lightning's
            ``accumulate_grad_batches``.
    """

    name: str
    adapter: type[LegacyHookAdapter]
    build_section: Callable[[Any, str], LegacyHookAdapter]
    section_example: str
    accepts: str
    demo_hooks: DemoHooks | None = None
    train: tuple[TrainCommand, ...] = ()
    hook_example: str = ""
    config_example: str = ""
    configure_logging: Callable[[Any, LegacyHookAdapter], None] | None = None
    batches_per_step: Callable[[LegacyHookAdapter], int | None] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.__dict__["_adapter"], Later):
            self.check()

    def check(self) -> None:
        """The adapter class is this family's."""
        if self.adapter.family != self.name:
            raise ValueError(f"Family {self.name!r}: its adapter {self.adapter.__name__} says family {self.adapter.family!r}")


setattr(Family, "adapter", _Loaded("adapter"))  # noqa: B010  # after @dataclass, which would take it for a default


def adapter_options(adapter: type[LegacyHookAdapter]) -> list[str]:
    """The options an adapter takes besides its hooks (its ``__init__`` keywords)."""
    options = keywords(adapter.__init__, skip=("self", "hooks"))
    if options is None:
        raise TypeError(
            f"{adapter.__name__}.__init__ takes **kwargs: name each option it accepts, so that adapt() and configs "
            "can refuse an unknown one."
        )
    return options


def build_adapter(adapter: type[LegacyHookAdapter], hooks: list[Any], options: Mapping[str, Any], path: str) -> Any:
    """``adapter(hooks, **options)``; an option it does not take is a :class:`ConfigError` naming ``path.option``."""
    check_keys(options, adapter_options(adapter), path, f"{adapter.__name__} option")
    return adapter(hooks, **options)


def build_each(adapter: type[LegacyHookAdapter], entries: list[Any], path: str) -> list[Any]:
    """Each entry through ``adapter.build_hook`` (hook objects pass as they are); errors name ``path[i]``."""
    return [build_one(adapter, entry, f"{path}[{i}]") for i, entry in enumerate(entries)]


def build_one(adapter: type[LegacyHookAdapter], entry: Any, path: str) -> Any:
    try:
        return adapter.build_hook(cast(dict[str, Any], entry)) if isinstance(entry, Mapping) else entry
    except Exception as err:
        raise ConfigError(f"{path}: {message(err)}") from err


def check_keys(given: Iterable[str], accepted: Iterable[str], path: str, what: str) -> None:
    for key in given:
        if key not in accepted:
            raise ConfigError(f"{path}.{key}: {unknown_name(what, key, accepted, listed='Accepted')}")


def expect(value: Any, kind: type | tuple[type, ...], path: str, example: str) -> Any:
    """``value`` if it is a ``kind``, else a :class:`ConfigError` naming ``path`` and what to write."""
    if not isinstance(value, kind):
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise ConfigError(f"{path}: expected a {kinds}, got {type(value).__name__} {value!r}. Write e.g. {path}: {example}")
    return value


def message(err: Exception) -> str:
    """An exception's message without the quotes ``KeyError`` adds."""
    return str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
