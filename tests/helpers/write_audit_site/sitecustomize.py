"""Records what this process writes under a folder (``tests/helpers/write_audit.py``): loaded at interpreter start by
every process of a test's run (this folder on ``PYTHONPATH``), it installs an audit hook (``sys.addaudithook``) when
``LH_WRITE_AUDIT`` names a records folder, and appends a JSON line to ``<records>/<pid>.jsonl`` for each file opened
for writing, renamed or replaced onto, or folder made (not one tried that is there), under ``LH_WRITE_AUDIT_ROOT``, with the process's rank when it
is known (the process group's once it is up, else a launcher's ``RANK`` / ``LOCAL_RANK``)."""

import os
import sys
import threading

_RECORDS = os.environ.get("LH_WRITE_AUDIT")
_ROOT = os.environ.get("LH_WRITE_AUDIT_ROOT")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _rank():
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:  # a process group torn down
        pass
    return None


def _install(records, root):
    import json

    fd = os.open(os.path.join(records, f"{os.getpid()}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = os.environ.get("RANK", os.environ.get("LOCAL_RANK"))
    busy = threading.local()  # per thread: the hook's own work raises no event; another thread's writes still do

    def record(event, path):
        if isinstance(path, int) or path is None:
            return
        path = os.path.abspath(os.fsdecode(path))
        if not path.startswith(root + os.sep):
            return
        line = {"event": event, "path": os.path.relpath(path, root), "rank": _rank(), "start_rank": start}
        os.write(fd, (json.dumps(line) + "\n").encode())  # os.write raises no audit event

    def hook(event, args):
        if event not in ("open", "os.rename", "os.mkdir") or getattr(busy, "on", False):
            return
        busy.on = True
        try:
            if event == "open":
                path, mode, flags = args
                writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & _WRITE_FLAGS)
                if writing:
                    record("write", path)
            elif event == "os.rename":
                record("rename", args[1])
            elif not os.path.isdir(args[0]):  # os.makedirs(exist_ok=True) tries a folder that is there: no write
                record("mkdir", args[0])
        finally:
            busy.on = False

    sys.addaudithook(hook)


if _RECORDS and _ROOT:
    _install(_RECORDS, os.path.abspath(_ROOT))
