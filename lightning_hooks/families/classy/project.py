"""A Classy Vision project as ``classy-project`` lays it out: the packages that register its names.

``classy-project my_project`` copies Classy's template (``configs/``, and the packages ``datasets/``, ``losses/``,
``models/``, whose modules register ``my_dataset``, ``my_loss``, ``my_model`` with Classy's ``register_*``
decorators) and ``classy_train.py`` into a folder. ``classy_train.py`` imports every package of the folder it sits in
(Classy's ``import_all_packages_from_directory``) before it builds the task, so the config's names exist; Python put
that folder first on the import path when it ran the script. :func:`import_project` does the same for
``lightning-hooks train``, from the folder the command runs in (``cd my_project``, as Classy's getting-started
runs ``./classy_train.py``) or the one ``--project_folder`` names.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from lightning_hooks.core.errors import InputError


class ProjectImportError(InputError, ImportError):
    """A package of the project folder that does not import (the error it raised is the ``__cause__``)."""


def import_project(folder: str) -> list[str]:
    """Import every package of ``folder`` as ``classy_train.py`` imports those of its own folder, with ``folder``
    first on ``sys.path`` (as Python puts a script's folder); return the names imported.

    Names with a dot (files such as ``classy_train.py``, ``README.md``) and names imported already are skipped, as in
    Classy; so is an entry that is not a package. Unlike Classy, which skips any ``ModuleNotFoundError``, a package
    whose own imports fail raises :class:`ProjectImportError`: skipped, its names would be missing from Classy's
    registries with no word on why.

    Example::

        import_project("my_project")  # ['datasets', 'losses', 'models']: my_dataset, my_loss, my_model registered
    """
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        raise ProjectImportError(f"--project_folder {folder}: no such folder (the folder of your Classy project, whose "
                                 "packages register the config's names; default: the current folder)")  # fmt: skip  # the message continues under its first half
    if not any(os.path.abspath(entry or os.curdir) == folder for entry in sys.path):
        sys.path.insert(0, folder)
    imported = []
    for name in sorted(os.listdir(folder)):
        if "." in name or name in sys.modules:
            continue
        logging.debug(f"Automatically importing {name}")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name == name:  # not a package: a file without a suffix, a folder Python cannot import
                continue
            raise _failed(folder, name, err) from err
        except Exception as err:  # any error of the user's package, re-raised with its cause
            raise _failed(folder, name, err) from err
        imported.append(name)
    return imported


def _failed(folder: str, name: str, err: BaseException) -> ProjectImportError:
    return ProjectImportError(
        f"{os.path.join(folder, name)}: the project package {name!r} does not import ({type(err).__name__}: {err}). "
        "lightning-hooks train imports every package of the project folder, as classy_train.py does, to register the "
        "config's names: fix the package or install what it needs, or run from the project's folder (or pass "
        "--project_folder) so that other folders are not imported."
    )


# ---------------------------------------------------------------------------------------------------------- VISSL
def import_user_modules(names: list[str], flag: str = "--import") -> None:
    """Import the user's modules by their dotted names, the current folder first on ``sys.path`` (as ``python -m``
    and a launcher script in that folder have it): their ``register_model_trunk`` / ``register_model_head`` /
    ``register_loss`` / ... decorators register the names a VISSL config uses, as a user's launcher script imports
    them before it calls VISSL's ``launch_distributed``. VISSL itself has no way to name them in a config.

    Example::

        import_user_modules(["my_vissl_ext"])  # ./my_vissl_ext.py registers trunk 'tiny_trunk'
    """
    folder = os.getcwd()
    if names and not any(os.path.abspath(entry or os.curdir) == folder for entry in sys.path):
        sys.path.insert(0, folder)
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as err:  # any error of the user's module, re-raised with its cause
            raise ProjectImportError(
                f"{flag} {name}: the module does not import ({type(err).__name__}: {err}). Give a module importable "
                f"from the current folder ({folder}) or from PYTHONPATH, by its dotted name (my_pkg.my_trunk, no .py)."
            ) from err


def user_function(spec: str, flag: str) -> Callable[..., Any]:
    """The function ``MODULE:FUNCTION`` names (the module imported as :func:`import_user_modules` does)."""
    module, _, function = spec.partition(":")
    if not module or not function:
        raise ProjectImportError(f"{flag} {spec}: give MODULE:FUNCTION, e.g. my_vissl_ext:hook_generator")
    import_user_modules([module], flag)
    found = getattr(sys.modules[module], function, None)
    if not callable(found):
        raise ProjectImportError(f"{flag} {spec}: module {module!r} has no function {function!r}")
    return found
