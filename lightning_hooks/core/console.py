"""Console plumbing the families share: text streams that print above Lightning's progress bar, a filter, and the
upstream notices an entry point silences before it imports Lightning (:func:`quiet_upstream_notices`).

Lightning's progress bar redraws one terminal line. A logging handler that holds the ``sys.stdout`` of the moment it
was built writes straight through that line (``v_num: 1.00011/23 18:52:33 - mmengine - INFO - ...``).
:class:`ConsoleStream` writes through ``tqdm.write``, which clears an active tqdm bar and redraws it below the line,
to the ``sys.stdout``/``sys.stderr`` of the moment it writes: a rich bar (Lightning's default when rich is
installed) swaps those for proxies that print above it while it is live.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import warnings

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


#: the deprecation notices that the archived legacy libraries' own imports raise on today's stack, by the start of
#: their message: VISSL's ``import pkg_resources`` (and MMEngine's ``get_installed_path``), and the torchvision video
#: transforms VISSL imports. Nobody running a legacy config can act on them.
LEGACY_IMPORT_NOTICES = (
    "pkg_resources is deprecated as an API",
    "The 'torchvision.transforms._functional_video' module is deprecated",
    "The 'torchvision.transforms._transforms_video' module is deprecated",
)


def quiet_upstream_notices() -> None:
    """Silence, at an entry point, the notices of Lightning, torch and the legacy libraries that a user of it cannot
    act on.

    - Lightning 2.6 builds ``LeafSpec()`` in ``lightning.pytorch.utilities._pytree``, which torch >= 2.10 deprecates
      with a FutureWarning on every fit: Lightning's code, not the user's.
    - Lightning's "Tip: ... try installing litlogger / litmodels" advertisements (INFO on every run).
    - :data:`LEGACY_IMPORT_NOTICES` (UserWarnings), here and, through ``PYTHONWARNINGS``, in the processes the run
      starts that import the libraries again (loader workers under VISSL's ``forkserver``, other ranks); the user's
      own ``PYTHONWARNINGS`` entries come after, and win.
    - Hydra's migration notice when VISSL composes its config without ``version_base`` (VISSL's call, not the user's).
    """
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning,
                            module=r"(lightning\.pytorch|pytorch_lightning)\.utilities\._pytree")  # fmt: skip  # arguments aligned under the call
    warnings.filterwarnings("ignore", message=r"\s*The version_base parameter is not specified", module=r"vissl\.")
    for notice in LEGACY_IMPORT_NOTICES:
        warnings.filterwarnings("ignore", message=re.escape(notice), category=UserWarning)
    entries = [f"ignore:{notice}:UserWarning" for notice in LEGACY_IMPORT_NOTICES]
    given = [entry for entry in os.environ.get("PYTHONWARNINGS", "").split(",") if entry and entry not in entries]
    os.environ["PYTHONWARNINGS"] = ",".join([*entries, *given])
    tips = DropMessages("💡 Tip: For seamless cloud")
    for namespace in ("lightning.pytorch", "pytorch_lightning"):  # on the logger that emits them, by name: set before
        logging.getLogger(f"{namespace}.utilities.rank_zero").addFilter(tips)  # Lightning is imported, if it is
