"""Checkpoint files the package reads: one safe loader that names the file in its errors (durable writes are
:mod:`lightning_hooks.callbacks.checkpoint_io`)."""

from __future__ import annotations

import os
import pickle
import zipfile
from typing import Any

import torch

from lightning_hooks.core.errors import CheckpointFileError, add_note

_ZIP, _PICKLE = b"PK", b"\x80"  # torch.save's zip format; the legacy format starts with a pickle protocol byte
#: torch.save's legacy format pickles its magic number first (a LONG1 opcode and these 10 bytes), after the protocol
_LEGACY_MAGIC = b"\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19"


def load_checkpoint_file(
    path: str | os.PathLike, *, owner: str, map_location: Any = "cpu", weights_only: bool = True
) -> Any:
    """``torch.load(path)`` with ``weights_only=True`` unless the caller opts out by name, and errors that name the file.

    ``owner`` names the API that reads the file (``runner.load_checkpoint``) in messages. A file that is empty,
    truncated or not a PyTorch checkpoint raises :class:`CheckpointFileError` (a ``ValueError``) saying so, torch's
    error as its cause; a checkpoint holding pickled objects that
    ``weights_only`` refuses raises ``pickle.UnpicklingError`` naming the file and the opt-out.

    Example::

        state = load_checkpoint_file("work/epoch_1.pth", owner="runner.load_checkpoint")
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CheckpointFileError(f"{owner}: {path!r} does not exist. Check the path of the checkpoint.")
    with open(path, "rb") as f:
        head = f.read(4)
        size = os.fstat(f.fileno()).st_size
    if not head.startswith((_ZIP, _PICKLE)):
        kind = "is empty" if size == 0 else f"is not a PyTorch checkpoint (it starts with bytes {head!r})"
        raise CheckpointFileError(f"{owner}: {path!r} {kind}. Pass the path of a file written by torch.save.")
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only)
    except pickle.UnpicklingError as err:
        if not weights_only or not head.startswith(_ZIP) or "Weights only load failed" not in str(err):
            raise _unreadable(owner, path, size, err) from err
        raise pickle.UnpicklingError(
            f"{owner}: {path!r} holds pickled objects that weights_only=True refuses ({_reason(err)}). Loading them can run "
            f"code from the file. If you trust the file, call {owner}(..., weights_only=False)."
        ) from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise _unreadable(owner, path, size, err) from err


def check_checkpoint_file(path: str | os.PathLike, *, owner: str) -> None:
    """A :class:`CheckpointFileError` naming ``path`` and ``owner`` (the option or API that names the file:
    ``--resume-from``, ``runner.load_checkpoint``) unless ``path`` may be a ``torch.save`` file: a local path that
    does not exist, an empty file, a file of another format, a zip cut short. URLs (``https://``,
    ``open-mmlab://``) pass: the loader that knows them checks them.

    Call it before a library's own loader, whose error for such a file is torch's (for a file that is not a
    checkpoint at all, torch suggests ``weights_only=False``, which is wrong advice there)."""
    path = os.fspath(path)
    if "://" in path:
        return
    if not os.path.isfile(path):
        raise CheckpointFileError(f"{owner}: {path!r} does not exist. Check the path of the checkpoint.")
    problem = _not_a_checkpoint(path)
    if problem:
        raise CheckpointFileError(f"{owner}: {path!r} {problem}. Pass the path of a file written by torch.save.")


def note_unreadable_checkpoint(trainer: Any, exception: BaseException) -> None:
    """When a fit given ``ckpt_path`` fails and that file cannot be a checkpoint (empty, not torch.save's format, a
    zip cut short), add a note to ``exception`` that names the file and says so: Lightning's default checkpoint IO
    then fails with an error that names neither (``OSError: [Errno 22] Invalid argument``, ``PytorchStreamReader
    failed reading zip archive``). The same message is kept as a :class:`CheckpointFileError` (``exception`` its
    cause) for :func:`checkpoint_error`, which ``lightning-hooks train`` prints instead of torch's error."""
    path = getattr(trainer, "ckpt_path", None)
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        return
    problem = _not_a_checkpoint(os.fspath(path))
    if problem and not any(os.fspath(path) in note for note in getattr(exception, "__notes__", [])):
        message = (
            f"the checkpoint given as ckpt_path, {os.fspath(path)!r}, {problem}: it cannot be restored. Resume "
            "from an earlier complete checkpoint (write them with lightning_hooks.callbacks.AtomicCheckpointIO so a "
            "crash cannot leave a partial file)."
        )
        add_note(exception, f"[lightning-hooks] {message}")
        error = CheckpointFileError(message)
        error.__cause__ = exception
        setattr(exception, _RECORDED, error)  # read back by checkpoint_error


_RECORDED = "lightning_hooks_checkpoint_error"


def checkpoint_error(exception: BaseException) -> CheckpointFileError | None:
    """The :class:`CheckpointFileError` behind ``exception``: itself, one in its cause / context chain, or the one
    :func:`note_unreadable_checkpoint` recorded on it; None when a checkpoint file is not the problem."""
    seen: set[int] = set()
    current: BaseException | None = exception
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CheckpointFileError):
            return current
        recorded = getattr(current, _RECORDED, None)
        if isinstance(recorded, CheckpointFileError):
            return recorded
        current = current.__cause__ or current.__context__
    return None


def _not_a_checkpoint(path: str) -> str | None:
    """Why ``path`` is not a complete ``torch.save`` file, or None when it may be one."""
    with open(path, "rb") as f:
        head = f.read(32)
        size = os.fstat(f.fileno()).st_size
    if size == 0:
        return "is empty"
    if head.startswith(_ZIP):
        return None if zipfile.is_zipfile(path) else f"is truncated ({size} bytes; its zip directory is missing)"
    if head.startswith(_PICKLE):  # torch.save's legacy format, or a pickle torch.load cannot read
        if _LEGACY_MAGIC in head:
            return None
        return (f"({size} bytes) is truncated or corrupt and cannot be read as a PyTorch checkpoint (a pickle "
                "without torch.save's magic number)")  # fmt: skip  # one message continued under its first half
    return f"is not a PyTorch checkpoint (it starts with bytes {head[:4]!r})"


#: the lines of torch.load's errors that are about weights_only, not about the file
_BOILERPLATE = ("Weights only load failed", "Check the documentation", "Please file an issue")


def _reason(err: BaseException) -> str:
    """What torch says is wrong with the file, without its lines about ``weights_only`` (whose advice to load with
    ``weights_only=False`` is wrong for a file that is not a checkpoint)."""
    lines = [line.strip() for line in str(err).splitlines()]
    return " ".join(line for line in lines if line and not line.startswith(_BOILERPLATE) and "weights_only" not in line)


def _unreadable(owner: str, path: str, size: int, err: BaseException) -> CheckpointFileError:
    return CheckpointFileError(
        f"{owner}: {path!r} ({size} bytes) is truncated or corrupt and cannot be read as a PyTorch checkpoint "
        f"({type(err).__name__}: {_reason(err)}). Use an earlier checkpoint, or "
        "write checkpoints with lightning_hooks.callbacks.AtomicCheckpointIO so a crash cannot leave a partial file."
    )
