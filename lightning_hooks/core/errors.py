"""Error messages shared by the adapters and the config builders: one "did you mean" for the whole package."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_names(name: str, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The names in ``known`` closest to ``name`` (difflib), best first."""
    return difflib.get_close_matches(name, sorted(set(known)), n=n, cutoff=cutoff)


def unknown_name(
    what: str,
    name: str,
    known: Iterable[str],
    *,
    listed: str = "Registered",
    context: str = "",
    n: int = 3,
    cutoff: float = 0.6,
) -> str:
    """``"unknown {what} 'EMAHok'{context}. Did you mean: EMAHook? {listed}: ..."``.

    ``context`` follows the name as it is (e.g. ``" for meter 'acc' (AccuracyMeter)"``); ``listed`` heads the list of
    known names (``"Registered"`` for registries, ``"Accepted"`` for keys and options).

    Example::

        >>> unknown_name("hook type", "EMAHok", ["EMAHook", "CheckpointHook"])
        "unknown hook type 'EMAHok'. Did you mean: EMAHook? Registered: CheckpointHook, EMAHook."
    """
    known = sorted(set(known))
    close = close_names(name, known, n=n, cutoff=cutoff)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"unknown {what} {name!r}{context}.{hint} {listed}: {', '.join(known)}."


def add_note(err: BaseException, note: str) -> None:
    """``err.add_note(note)``: shown under the traceback on Python >= 3.11; on 3.10, kept in ``err.__notes__``."""
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:
        setattr(err, "__notes__", [*getattr(err, "__notes__", []), note])  # noqa: B010  (the attribute add_note writes; not declared on 3.10)


class ConfigError(ValueError):
    """A config that cannot be built; the message starts with the offending config path."""


class InputError(Exception):
    """A bad input the user fixes (a file, a name), whose message says which and what to do: ``lightning-hooks
    train`` prints the message alone, without a traceback (the legacy library's own error stays its ``__cause__``)."""


class CheckpointFileError(InputError, ValueError):
    """A file given as a checkpoint that is not one (empty, not ``torch.save``'s format, truncated, corrupt)."""


class UnknownNameError(InputError, KeyError):
    """A ``type`` / ``name`` in a config that no registry knows (see :func:`unknown_name`); a ``KeyError``, as the
    registries' own errors are, whose text is its message (without the quotes ``KeyError`` adds)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
