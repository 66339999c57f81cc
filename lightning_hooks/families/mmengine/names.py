"""``lightning-hooks train``'s short error for a type that no MMEngine registry knows (a model, dataset, transform,
hook, metric, loss, optimizer...), from MMEngine's own ``KeyError``: :func:`explain`."""

from __future__ import annotations

from typing import Any

from lightning_hooks.core.errors import UnknownNameError
from lightning_hooks.core.unknown_names import openmmlab_unknown_name

WHERE = ("Registrations come from the modules in the config's custom_imports (found from the folder lightning-hooks "
         "train runs in: run it from your project's root) and from the library of its default scope ({scope!r}); "
         "a name of another library takes its scope: type='mmdet.RetinaNet'.")  # fmt: skip  # one sentence, wrapped at 120


def explain(err: BaseException) -> UnknownNameError | None:
    """``err`` (raised by ``lightning-hooks train CONFIG.py``) as an :class:`UnknownNameError` when an MMEngine
    registry did not know a type, else None."""
    return openmmlab_unknown_name(err, WHERE)


def type_name(kind: Any) -> str:
    """A config's ``type`` as the class name it registers, without the registry scope: ``"mmdet.RetinaNet"`` and the
    class ``RetinaNet`` both give ``"RetinaNet"``."""
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
    return name.rpartition(".")[2]
