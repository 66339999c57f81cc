"""Which rank writes which file: every process of a test's run records the files it opens for writing, renames onto and
the folders it makes under a root folder (``write_audit_site/sitecustomize.py``, an audit hook loaded at interpreter
start from ``PYTHONPATH``, so the launcher's children record too: torchrun's, Lightning's, ``torch.multiprocessing``'s);
:func:`writes` reads the records back by rank, names normalised (timestamps, temporary names), for a test to compare
the legacy host's run with ``lightning-hooks train``'s, rank by rank.

    env = subprocess_env(HELPERS, write_audit.SITE, **write_audit.env(records, work_dir))
    ... run under env ...
    write_audit.writes(records)  # {0: {"write 20240101_000000/...": ...}, 1: {...}}

``torch.save`` given a path writes through torch's C++ file writer, which raises no audit event: the hosts and
lightning-hooks save checkpoints through Python's ``open`` (MMEngine's and mmcv's ``save_checkpoint``, Classy's and
VISSL's ``PathManager``, Lightning's ``fsspec``), which it sees.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lh_testing import HELPERS

#: the folder whose ``sitecustomize.py`` installs the recording hook: put it on the run's ``PYTHONPATH``
SITE = HELPERS / "write_audit_site"
#: a run's time stamps in names (MMEngine's and mmcv's ``20240101_000000`` folders and logs), temporary files' names
#: (``tempfile``'s ``tmp`` + 8 characters, fsspec's atomic writes), and a process id in a name
_NORMAL = [(re.compile(r"\d{8}_\d{6}"), "<time>"), (re.compile(r"tmp[a-z0-9_]{8}"), "<tmp>"),
           (re.compile(r"(?<=[._-])\d{3,7}(?=[._-]|$)"), "<n>")]  # fmt: skip
#: an atomic write's temporary file beside its target (lightning_hooks' AtomicCheckpointIO: ``.NAME.tmp-HEX``)
_ATOMIC = re.compile(r"(^|/)\.([^/]+)\.tmp-[0-9a-f]+$")
#: the stores of Lightning's loggers under the work dir (``--logger csv tensorboard mlflow wandb``)
LOGGER_STORES = {"csv": "lightning_logs", "tensorboard": "tensorboard", "mlflow": "mlruns", "wandb": "wandb"}


def env(records: Path, root: Path) -> dict[str, str]:
    """The variables that make each process of a run record its writes under ``root`` into ``records``."""
    records.mkdir(parents=True, exist_ok=True)
    return {"LH_WRITE_AUDIT": str(records), "LH_WRITE_AUDIT_ROOT": str(root)}


def normalised(entry: str) -> str:
    """``"EVENT PATH"`` with the path's run-specific parts replaced; an atomic write (its temporary file, then the
    rename onto the target) as a write of the target."""
    event, path = entry.split(" ", 1)
    atomic = _ATOMIC.sub(r"\1\2", path)
    if atomic != path or event == "rename":
        event, path = "write", atomic
    for pattern, replacement in _NORMAL:
        path = pattern.sub(replacement, path)
    return f"{event} {path}"


def differences(host: dict[int, set[str]], ours: dict[int, set[str]], stores: bool = True) -> dict[int, tuple]:
    """Per rank, ``(what only the host's rank writes, what only ours writes)`` where they differ (the folders made
    under ``"any rank"``); with ``stores``, rank 0 alone writes each Lightning logger's store (left out of the
    comparison), which must be there."""
    ours = {rank: set(found) for rank, found in ours.items()}
    if stores:
        store = re.compile(rf"(^\w+ |/)({'|'.join(LOGGER_STORES.values())})(/|$)")  # under the work dir or a folder in it
        kept = {e for e in ours.get(0, set()) if not store.search(e)}
        missing = {f"write {name}/..." for name in LOGGER_STORES.values()
                   if not any(e.startswith("write ") and f"{name}/" in e for e in ours.get(0, set()))}  # fmt: skip
        ours[0] = kept | missing
    # the folders a run made, whichever rank made them: ranks started together (torchrun) race to make the same one
    host, ours = _folders_of_the_run(host), _folders_of_the_run(ours)
    return {rank: (sorted(host.get(rank, set()) - ours.get(rank, set())), sorted(ours.get(rank, set()) - host.get(rank, set())))
            for rank in sorted({*host, *ours}, key=str) if host.get(rank, set()) != ours.get(rank, set())}  # fmt: skip


def _folders_of_the_run(found: dict[int, set[str]]) -> dict:
    """``found`` with its ``mkdir`` entries moved to the key ``"any rank"``."""
    moved: dict = {rank: {e for e in entries if not e.startswith("mkdir ")} for rank, entries in found.items()}
    moved["any rank"] = {e for entries in found.values() for e in entries if e.startswith("mkdir ")}
    return moved


def writes(records: Path, ignore: str | None = None) -> dict[int, set[str]]:
    """Each rank's writes (``"write PATH"``, ``"rename PATH"``, ``"mkdir PATH"``, relative to the root), from the
    records of every process: a process's rank is its process group's, else the ``RANK`` / ``LOCAL_RANK`` it started
    with, else 0 (a launcher, or a process that never joined a group). ``ignore``: a regular expression of paths
    left out."""
    found: dict[int, set[str]] = {}
    for file in sorted(records.glob("*.jsonl")):
        lines = [json.loads(line) for line in file.read_text().splitlines() if line]
        if not lines:
            continue
        ranks = [line["rank"] for line in lines if line["rank"] is not None]
        rank = ranks[0] if ranks else int(lines[0]["start_rank"] or 0)
        for line in lines:
            if ignore is None or not re.search(ignore, line["path"]):
                found.setdefault(rank, set()).add(normalised(f"{line['event']} {line['path']}"))
    return found


def by_side(found: dict[int, set[str]]) -> dict[str, dict[int, set[str]]]:
    """The records of both runs (one root) split by the side's folder, the first component of each path."""
    sides: dict[str, dict[int, set[str]]] = {}
    for rank, entries in found.items():
        for entry in entries:
            event, path = entry.split(" ", 1)
            side, _, rest = path.partition("/")
            sides.setdefault(side, {}).setdefault(rank, set()).add(f"{event} {rest}")
    return sides
