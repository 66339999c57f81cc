"""How a train command imports the user's own project: ``custom_imports`` in an OpenMMLab config.

OpenMMLab's projects live in ``projects/<name>/`` of a repository and their configs import them by a dotted name from
the repository's root (``custom_imports = dict(imports=["projects.my_proj.my_proj"])``), which the library's
``Config.fromfile`` imports. ``python tools/train.py`` finds them because that root is on the import path: an editable
install of the repository puts it there, and ``tools/dist_train.sh`` adds it to ``PYTHONPATH`` (``tools/..``).
``python -m lightning_hooks`` has the folder it runs in on the path (``sys.path[0]``); the ``lightning-hooks`` console
script has its own ``bin`` folder there instead. :func:`import_project` gives both what ``python -m`` has, so both
import a project from the folder they run in, and so does every process of a multi-device run (each runs the command
again, in the same folder).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any


def working_dir_on_path() -> str:
    """Put the folder the command runs in at the front of ``sys.path``, as ``python -m`` puts it, for the rest of the
    command's process (nothing changes where it is on the path already); returns that folder."""
    folder = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == folder for entry in sys.path):
        sys.path.insert(0, folder)
    return folder


def import_project(cfg: Any, config_file: str, import_modules: Callable[..., Any]) -> None:
    """Import the config's ``custom_imports`` as the library's ``Config.fromfile`` does (its own
    ``import_modules_from_strings``, given as ``import_modules``, in the config's order, ``allow_failed_imports``
    warning and going on), with the folder the command runs in on the path (:func:`working_dir_on_path`). A module
    that does not import raises an ``ImportError`` naming the config, the module and the import error it met (a
    dependency the project lacks, a misspelt name), with that error as its cause.

    Example::

        cfg = Config.fromfile("projects/my_proj/configs/my_config.py", import_custom_modules=False)
        import_project(cfg, "projects/my_proj/configs/my_config.py", import_modules_from_strings)
    """
    folder = working_dir_on_path()
    custom = cfg.get("custom_imports") or {}
    imports, allow = custom.get("imports"), custom.get("allow_failed_imports", False)
    for name in imports if isinstance(imports, list) else [imports]:
        try:
            import_modules(name, allow_failed_imports=allow)
        except ImportError as err:
            cause = err.__context__ or err  # the libraries raise a bare ImportError (mmcv) or "Failed to import"
            raise ImportError(
                f"{config_file}: custom_imports: {name!r} does not import: {type(cause).__name__}: {cause}. "
                f"lightning-hooks train imports it as tools/train.py does, with the folder it runs in ({folder}) on "
                "the import path: run it from the folder that holds the module's top package (for "
                "'projects.<name>...': the repository root that holds projects/), install the package "
                "(pip install -e .), or install the dependency the module names."
            ) from cause
