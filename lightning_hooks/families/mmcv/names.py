"""``lightning-hooks train``'s short error for a type that no OpenMMLab 1.x registry knows (a model, dataset, pipeline
step, hook, loss, optimizer...), from mmcv's own ``KeyError``: :func:`explain`."""

from __future__ import annotations

from lightning_hooks.core.errors import UnknownNameError
from lightning_hooks.core.unknown_names import openmmlab_unknown_name

WHERE = ("Registrations come from the modules in the config's custom_imports (found from the folder lightning-hooks "
         "train runs in: run it from your project's root) and from the library whose tools/train.py the config is "
         "for (mmcls, mmdet, mmseg).")  # fmt: skip  # one sentence, wrapped at 120


def explain(err: BaseException) -> UnknownNameError | None:
    """``err`` (raised by ``lightning-hooks train CONFIG.py`` for a 1.x config) as an :class:`UnknownNameError` when
    an mmcv registry did not know a type, else None."""
    return openmmlab_unknown_name(err, WHERE)
