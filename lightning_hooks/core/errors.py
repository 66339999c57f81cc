"""Error messages shared by the families' config builders."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_name(what: str, name: str, known: Iterable[str]) -> str:
    """``"unknown {what} 'EMAHok'; did you mean: EMAHook? Registered: ..."``."""
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"unknown {what} {name!r}.{hint} Registered: {', '.join(known)}."


class ConfigError(ValueError):
    """A config that cannot be built; the message starts with the offending config path."""
