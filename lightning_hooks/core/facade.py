"""Base class of the host facades handed to legacy hooks (Classy ``task``, iMIX ``trainer``, MMEngine ``runner``)."""

from __future__ import annotations

import os
from typing import Any, ClassVar


class Facade:
    """A stand-in for a legacy host object.

    A hook that reads an attribute the facade does not provide gets an ``AttributeError`` that names the attribute
    and lists what the facade provides; the adapter adds a note naming the hook and its mount point.
    """

    host: ClassVar[str] = "host"
    #: the adapter attribute that holds this facade, when it is not named as the hooks name it (iMIX: ``engine``)
    adapter_attribute: ClassVar[str | None] = None

    def provides(self) -> list[str]:
        """Public attribute names this facade answers."""
        names = {n for n in dir(type(self)) if not n.startswith("_")} | {n for n in vars(self) if not n.startswith("_")}
        return sorted(names - {"host", "provides", "adapter_attribute"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        attribute = getattr(type(self), name, None)
        if attribute is not None and hasattr(attribute, "__get__"):  # a property of the facade raised AttributeError: raise its own message
            return attribute.__get__(self, type(self))
        raise AttributeError(
            f"lightning-hooks' {self.host} facade has no attribute {name!r}. It provides: {', '.join(self.provides())}. "
            f"If your hook needs {name!r}, set it on the facade before training (adapter.{self.adapter_attribute or self.host}.{name} = ...) "
            "or open an issue naming the hook."
        )


class WorkDir:
    """A host's ``work_dir``: the folder given to the adapter, else the Trainer's ``default_root_dir`` (the current
    folder before a Trainer exists). Shared by the facades whose host has a work dir (MMEngine's runner, iMIX's
    engine)."""

    def __init__(self, path: str | os.PathLike | None, adapter: str) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{adapter}(work_dir={path!r}): work_dir must be a path (str or os.PathLike), not {type(path).__name__}")
        self.given = None if path is None else os.fspath(path)

    def resolve(self, trainer: Any) -> str:
        if self.given is not None:
            return self.given
        return trainer.default_root_dir if trainer is not None else os.getcwd()
