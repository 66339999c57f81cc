"""Checkpoint files the package reads: one safe loader that names the file in its errors (durable writes are
:mod:`lightning_hooks.callbacks.checkpoint_io`)."""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch


_ZIP, _PICKLE = b"PK", b"\x80"  # torch.save's zip format; the legacy format starts with a pickle protocol byte


def load_checkpoint_file(
    path: str | os.PathLike, *, owner: str, map_location: Any = "cpu", weights_only: bool = True
) -> Any:
    """``torch.load(path)`` with ``weights_only=True`` unless the caller opts out by name, and errors that name the file.

    ``owner`` names the API that reads the file (``runner.load_checkpoint``) in messages. A file that is empty,
    truncated or not a PyTorch checkpoint raises ``ValueError`` saying so; a checkpoint holding pickled objects that
    ``weights_only`` refuses raises ``pickle.UnpicklingError`` naming the file and the opt-out.

    Example::

        state = load_checkpoint_file("work/epoch_1.pth", owner="runner.load_checkpoint")
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(4)
        size = os.fstat(f.fileno()).st_size
    if not head.startswith((_ZIP, _PICKLE)):
        kind = "is empty" if size == 0 else f"is not a PyTorch checkpoint (it starts with bytes {head!r})"
        raise ValueError(f"{owner}: {path!r} {kind}. Pass the path of a file written by torch.save.")
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only)
    except pickle.UnpicklingError as err:
        if not weights_only or not head.startswith(_ZIP) or "Weights only load failed" not in str(err):
            raise _unreadable(owner, path, size, err) from err
        boilerplate = ("Weights only load failed", "Check the documentation", "Please file an issue")
        reason = " ".join(line.strip() for line in str(err).splitlines() if line.strip() and not line.startswith(boilerplate))
        raise pickle.UnpicklingError(
            f"{owner}: {path!r} holds pickled objects that weights_only=True refuses ({reason}). Loading them can run "
            f"code from the file. If you trust the file, call {owner}(..., weights_only=False)."
        ) from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise _unreadable(owner, path, size, err) from err


def _unreadable(owner: str, path: str, size: int, err: BaseException) -> ValueError:
    return ValueError(
        f"{owner}: {path!r} ({size} bytes) is truncated or corrupt and cannot be read as a PyTorch checkpoint "
        f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}). Use an earlier checkpoint, or "
        "write checkpoints with lightning_hooks.callbacks.AtomicCheckpointIO so a crash cannot leave a partial file."
    )
