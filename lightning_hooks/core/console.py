"""Console plumbing the families share: text streams that print above Lightning's progress bar, and a filter.

Lightning's progress bar redraws one terminal line. A logging handler that holds the ``sys.stdout`` of the moment it
was built writes straight through that line (``v_num: 1.00011/23 18:52:33 - mmengine - INFO - ...``).
:class:`ConsoleStream` writes through ``tqdm.write``, which clears an active tqdm bar and redraws it below the line,
to the ``sys.stdout``/``sys.stderr`` of the moment it writes: a rich bar (Lightning's default when rich is
installed) swaps those for proxies that print above it while it is live.
"""

from __future__ import annotations

import logging
import sys

from tqdm import tqdm


class ConsoleStream:
    """A text stream for logging handlers: writes to ``sys.<name>`` as it is when written to, above any progress bar.

    Args:
        name: ``"stdout"`` or ``"stderr"``.
    """

    def __init__(self, name: str) -> None:
        if name not in ("stdout", "stderr"):
            raise ValueError(f"ConsoleStream: name must be 'stdout' or 'stderr', got {name!r}")
        self.name = name

    def write(self, text: str) -> int:
        tqdm.write(text, file=getattr(sys, self.name), end="")
        return len(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()

    def isatty(self) -> bool:
        return getattr(sys, self.name).isatty()

    def __repr__(self) -> str:
        return f"ConsoleStream({self.name!r})"


def route_console(logger: logging.Logger) -> None:
    """Make ``logger``'s handlers that print to the terminal (stdout or stderr) write through :class:`ConsoleStream`."""
    streams = {id(s): name for name in ("stdout", "stderr") for s in (getattr(sys, name), getattr(sys, f"__{name}__"))}
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler and id(handler.stream) in streams:
            handler.setStream(ConsoleStream(streams[id(handler.stream)]))


class DropMessages(logging.Filter):
    """A logging filter that drops records whose message starts with one of ``prefixes``.

    For warnings a user cannot act on, which a library emits from its own code on every run; each use says why.
    """

    def __init__(self, *prefixes: str) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)
