"""Which legacy entry point trains a config: the one decision ``lightning-hooks train`` makes from its first argument.

The kinds, and the rule that picks one (first match wins):

1. ``config=...``: a VISSL config (Hydra), for VISSL's ``run_distributed_engines.py``.
2. ``*.json``: a Classy Vision task config, for ``classy_train.py``.
3. ``*.py``: an OpenMMLab config. Its top-level keys are read from the file and from its ``_base_`` files:

   - any key only OpenMMLab 2.0 has (:data:`MMENGINE_ONLY_KEYS`: ``default_hooks``, ``optim_wrapper``,
     ``param_scheduler``, ``train_dataloader``, ``default_scope``) -> MMEngine, whatever else it sets: shipped 2.0
     configs keep 1.x leftovers that ``Runner.from_cfg`` ignores (mmseg's mobilenet_v3 ``runner=``, mmpretrain's
     lenet ``resume_from``, mmdet's guided_anchoring ``optimizer_config``);
   - else any OpenMMLab 1.x runner key (:data:`OPENMMLAB_1X_KEYS`: ``runner``, ``lr_config``, ...) -> 1.x
     (``mmcv.runner``), ``train_cfg`` or not: old mmdet 2.x configs set the model's ``train_cfg`` at top level;
   - else ``train_cfg`` (MMEngine's loop) -> MMEngine;
   - else not a training config: an error naming the keys it lacks.

Anything else is no kind (``None``). A file that does not exist, a ``_base_`` that cannot be found, a line that does
not parse and a JSON file that does not load are a :class:`ConfigFileError` naming the file (and the line), as the
legacy tool's own error would, without a traceback. The keys are read from the text (Python's ``ast``; each file
once, the ``_base_`` files they share once per process); only configs whose ``_base_`` is not a literal, or that read
their bases with ``read_base()``, are loaded with ``Config.fromfile``.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import json
import os
from collections.abc import Iterator
from typing import Any

from lightning_hooks.core.errors import ConfigError, InputError

MMENGINE, OPENMMLAB_1X, CLASSY, VISSL = "mmengine", "openmmlab-1.x", "classy", "vissl"

#: top-level keys of an OpenMMLab 1.x config, which ``mmcv.runner``'s ``build_runner`` and ``register_training_hooks``
#: read; no OpenMMLab 2.0 config has them
OPENMMLAB_1X_KEYS = ("runner", "lr_config", "optimizer_config", "checkpoint_config", "log_config", "total_epochs",
                     "workflow", "resume_from")  # fmt: skip  # one line per kind
#: top-level keys that only an OpenMMLab 2.0 (MMEngine) config has, which ``Runner.from_cfg`` reads
MMENGINE_ONLY_KEYS = ("default_hooks", "optim_wrapper", "param_scheduler", "train_dataloader", "default_scope")
#: the keys of an MMEngine config: those, and the train loop's ``train_cfg`` (also the model's in old 1.x configs)
MMENGINE_KEYS = (*MMENGINE_ONLY_KEYS, "train_cfg")


class ConfigFileError(ConfigError, InputError):
    """A config file that cannot be read: it does not exist, a ``_base_`` is missing, a line does not parse."""


def config_kind(first: str) -> str | None:
    """The kind of config ``first`` (``lightning-hooks train``'s first argument) is, by the rule of this module."""
    if first.startswith("config="):
        return VISSL
    if first.endswith(".json"):
        _check_json(first)
        return CLASSY
    if first.endswith(".py"):
        keys = openmmlab_keys(first)
        if keys & set(MMENGINE_ONLY_KEYS):
            return MMENGINE
        if keys & set(OPENMMLAB_1X_KEYS):
            return OPENMMLAB_1X
        if "train_cfg" in keys:
            return MMENGINE
        raise ConfigFileError(
            f"{first}: not an OpenMMLab training config: it (with its _base_ files) sets none of the OpenMMLab 2.0 "
            f"keys ({', '.join(MMENGINE_KEYS)}) nor the 1.x keys ({', '.join(OPENMMLAB_1X_KEYS)}). Give the config "
            "of a training run (tools/train.py's CONFIG)."
        )
    return None


def openmmlab_keys(path: str) -> set[str]:
    """The top-level keys of the OpenMMLab config ``path``, its ``_base_`` files' included."""
    _exists(path, "config file")
    return _keys(os.path.abspath(path), ())


@functools.lru_cache(maxsize=4096)
def _parsed(path: str) -> tuple[frozenset[str], frozenset[str], Any, bool]:
    """``(keys, deleted, _base_ value, uses read_base)`` of one file, from its text: the keys it assigns, those it
    deletes (``x`` for ``del x``, ``_base_.x`` for ``del _base_.x``), its ``_base_`` (``...``: not a literal)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as err:
        line = (err.text or "").rstrip("\n")
        where = f"{path}, line {err.lineno}" + (f":\n    {line.strip()}" if line.strip() else "")
        raise ConfigFileError(f"{where}\nsyntax error: {err.msg}. Fix this line of the config.") from err
    keys, deleted, base, read_base = set(), set(), None, False
    for node in _top_level(tree.body):
        if isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    deleted.add(f"{target.value.id}.{target.attr}")
                deleted.update(name.id for name in _names(target))
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (t.id for target in targets for t in _names(target)):
                if name == "_base_" and node.value is not None:
                    try:
                        base = ast.literal_eval(node.value)
                    except ValueError:
                        base = ...
                elif not name.startswith("__"):
                    keys.add(name)
        elif isinstance(node, ast.With):
            read_base |= any("read_base" in ast.dump(item.context_expr) for item in node.items)
    return frozenset(keys), frozenset(deleted), base, read_base


def _names(target: ast.expr) -> Iterator[ast.Name]:
    """The names an assignment target binds (``a``, ``a, b``); not ``a.b`` or ``a[0]``, which change a value."""
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from _names(element)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at module level: ``body`` and the bodies of its ``if`` / ``with`` / ``try`` / ``for``."""
    for node in body:
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


def _keys(path: str, chain: tuple[str, ...]) -> set[str]:
    """The keys of ``path`` after its ``_base_`` files: theirs, less those it deletes, and its own."""
    own, deleted, base, read_base = _parsed(path)
    if base is ... or read_base:  # only the library resolves these bases; not needed where the file's keys decide
        return set(own) if own & set(MMENGINE_ONLY_KEYS) else _loaded_keys(path)
    inherited: set[str] = set()
    for entry in [base] if isinstance(base, str) else list(base or []):
        resolved = _base_path(entry, path)
        if resolved in chain:
            raise ConfigFileError(f"{path}: its _base_ {entry!r} includes it again (a cycle): remove one of them.")
        inherited |= _keys(resolved, (*chain, path))
    from_base = {key for key in inherited if f"_base_.{key}" not in deleted}
    return (from_base | own) - deleted


def _base_path(entry: str, derived: str) -> str:
    """Where ``_base_`` entry ``entry`` of ``derived`` is, as MMEngine's and mmcv's ``Config`` resolve it: relative to
    ``derived``'s folder, ``{{fileDirname}}`` substituted, or ``package::path`` in that package's ``.mim/configs``."""
    folder = os.path.dirname(derived)
    if "::" in entry:
        package, _, rel = entry.partition("::")
        spec = importlib.util.find_spec(package) if package.isidentifier() else None
        if spec is None or spec.origin is None:
            raise ConfigFileError(
                f"{derived}: its _base_ {entry!r} is a file of the package {package!r}, which is not installed: "
                f"install it (pip install {package}), or copy the file next to the config and name it by path."
            )
        folder, entry = os.path.join(os.path.dirname(spec.origin), ".mim", "configs"), rel
    resolved = os.path.abspath(os.path.join(folder, entry.replace("{{fileDirname}}", folder)))
    _exists(resolved, "_base_ file", f"{derived}: its _base_ {entry!r} is {resolved}, which does not exist")
    return resolved


def _exists(path: str, what: str, problem: str = "") -> None:
    """A :class:`ConfigFileError` naming ``path`` (and the files beside it that look alike) unless it is a file."""
    if os.path.isfile(path):
        return
    folder, name = os.path.split(os.path.abspath(path))
    problem = problem or f"{what} {path} does not exist"
    if not os.path.isdir(folder):
        raise ConfigFileError(f"{problem} (no folder {folder}). Check the path.")
    alike = difflib.get_close_matches(name, os.listdir(folder), n=3, cutoff=0.6)
    hint = f" Did you mean: {', '.join(alike)}?" if alike else ""
    raise ConfigFileError(f"{problem}.{hint} Check the path (relative paths start at {os.getcwd()}).")


def _loaded_keys(path: str) -> set[str]:
    """The keys of a config whose bases only the library can resolve: MMEngine's ``Config.fromfile`` (mmcv 1.x's
    where MMEngine is not installed); its own error, shortened, where the file does not load."""
    try:
        from mmengine.config import Config
    except ImportError:
        from mmcv import Config  # the 1.x venvs have mmcv's Config, not MMEngine's
    try:
        return set(Config.fromfile(path, import_custom_modules=False).keys())  # keys only: the command imports them
    except Exception as err:  # the library's own message names the file, the base, the line
        raise ConfigFileError(f"{path}: {type(err).__name__}: {err}") from err


def _check_json(path: str) -> None:
    """A Classy task config that exists and is JSON, else a :class:`ConfigFileError` naming the line."""
    _exists(path, "Classy task config")
    try:
        with open(path, encoding="utf-8") as f:
            json.load(f)
    except json.JSONDecodeError as err:
        raise ConfigFileError(
            f"{path}, line {err.lineno} column {err.colno}: not valid JSON ({err.msg}). Fix the task config there."
        ) from err
