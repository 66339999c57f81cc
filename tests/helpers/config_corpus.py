"""Every config file an installed OpenMMLab library ships, through :func:`lightning_hooks.core.config_kind.config_kind`.

The kind a shipped file must get is its library's generation (mmdet 3.x, mmpretrain, mmseg 1.x, mmpose 1.x, mmagic:
MMEngine; mmdet 2.x, mmcls 0.x, mmseg 0.x: OpenMMLab 1.x). A file that gets no kind (a ``ConfigFileError``) must be
one the library's own ``Config.fromfile`` cannot load either (a ``_base_`` that is not shipped: the same missing file)
or that sets no key a train command reads (test-time augmentation parts, inference-only models): the library is
the reference for those few, loaded once each.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from lightning_hooks.core.config_kind import (
    MMENGINE, MMENGINE_KEYS, OPENMMLAB_1X, OPENMMLAB_1X_KEYS, ConfigFileError, config_kind,
)  # fmt: skip

#: the libraries with shipped configs, and the first version of each that is OpenMMLab 2.0
LIBRARIES = {"mmdet": 3, "mmpretrain": 0, "mmseg": 1, "mmpose": 1, "mmagic": 0, "mmcls": 1}


def installed() -> list[str]:
    return [name for name in LIBRARIES if importlib.util.find_spec(name) is not None]


def expected_kind(library: str) -> str:
    major = int(importlib.metadata.version({"mmseg": "mmsegmentation"}.get(library, library)).split(".")[0])
    return MMENGINE if major >= LIBRARIES[library] else OPENMMLAB_1X


def shipped(library: str) -> list[str]:
    """The runnable configs of ``library`` (``_base_`` files are parts of others), as ``tools/train.py`` takes them."""
    root = Path(importlib.util.find_spec(library).origin).parent / ".mim" / "configs"
    return sorted(f for f in glob.glob(str(root / "**" / "*.py"), recursive=True) if "/_base_/" not in f)


def wrong_kinds(library: str, config_cls: Any) -> tuple[int, list[str]]:
    """``(files, problems)``: each shipped file whose kind is not its library's, or whose error the library's
    ``config_cls.fromfile`` does not confirm."""
    want, problems, files = expected_kind(library), [], shipped(library)
    for path in files:
        try:
            kind = config_kind(path)
        except ConfigFileError as err:
            problem = _confirmed(path, str(err), config_cls)
            if problem:
                problems.append(problem)
            continue
        if kind != want:
            problems.append(f"{path}: {kind}, not {want}")
    return len(files), problems


def _confirmed(path: str, message: str, config_cls: Any) -> str | None:
    """None when the library agrees that ``path`` cannot be trained, for the reason ``message`` gives."""
    try:
        keys = set(config_cls.fromfile(path, import_custom_modules=False).keys())
    except FileNotFoundError as err:
        missing = re.search(r'"(.+)" does not exist|No such file or directory: \'(.+)\'', str(err))
        if missing and f"{os.path.normpath(missing.group(1) or missing.group(2))}, which does not exist" in message:
            return None
        return f"{path}: the library misses {err}; we said {message}"
    if "not an OpenMMLab training config" in message and not keys & {*MMENGINE_KEYS, *OPENMMLAB_1X_KEYS}:
        return None
    return f"{path}: the library loads it (keys {sorted(keys)}); we said {message}"
