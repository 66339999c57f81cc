"""Base class of the host facades handed to legacy hooks (Classy ``task``, iMIX ``trainer``, MMEngine ``runner``)."""

from __future__ import annotations

from typing import Any, ClassVar


class Facade:
    """A stand-in for a legacy host object.

    A hook that reads an attribute the facade does not provide gets an ``AttributeError`` that names the attribute
    and lists what the facade provides; the adapter adds a note naming the hook and its mount point.
    """

    host: ClassVar[str] = "host"

    def provides(self) -> list[str]:
        """Public attribute names this facade answers."""
        names = {n for n in dir(type(self)) if not n.startswith("_")} | {n for n in vars(self) if not n.startswith("_")}
        return sorted(names - {"host", "provides"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"lightning-hooks' {self.host} facade has no attribute {name!r}. It provides: {', '.join(self.provides())}. "
            f"If your hook needs {name!r}, set it on the facade before training (adapter.{self.host}.{name} = ...) "
            "or open an issue naming the hook."
        )
