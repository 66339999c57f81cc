"""Per-library checks of OpenMMLab hooks whose ``runner`` reads would silently take another branch under Lightning
(``isinstance`` checks on ``runner.model`` or a loader's sampler), and the ``mmengine.dist`` values hooks compute in
``__init__``, computed again once Lightning started the process group.

Hook classes are named as strings (``module.Class``), so a library that is not installed costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from lightning_hooks.core import lightning_api

#: hooks that do their work only when ``runner.model`` is an instance of a model class, and otherwise skip it with a
#: warning: hook class -> (model class, what to do instead), checked when ``runner.model`` is the LightningModule.
MODEL_TYPE_CHECKS = {
    "mmpretrain.engine.hooks.retriever_hooks.PrepareProtoBeforeValLoopHook": (
        "mmpretrain.models.retrievers.BaseRetriever",
        "call prepare_prototype() on your retriever in the LightningModule's on_validation_start instead",
    ),
}


def refuse_model_type_checks(hooks: list[Any], model: torch.nn.Module) -> None:
    """Refuse a hook that checks ``runner.model``'s class when ``runner.model`` (``model``) is not an MMEngine model
    but the LightningModule: the hook would silently skip its work where the Runner's model would pass the check."""
    from mmengine.model import BaseModel

    if isinstance(model, BaseModel):  # the user's OpenMMLab model: the hook decides as under the Runner
        return
    for hook in hooks:
        check = MODEL_TYPE_CHECKS.get(_qualname(hook))
        if check is None:
            continue
        name = check[0].rpartition(".")[2]
        if not isinstance(model, _class_at(check[0])):
            raise TypeError(
                f"MMEngineAdapter cannot run {type(hook).__qualname__}: it works only when runner.model is a "
                f"{check[0]}, and runner.model is the LightningModule ({type(model).__name__}), which holds no "
                f"MMEngine model, so it would skip its work with a warning. Keep your {name} in the LightningModule "
                f"(runner.model is then that model; name it with MMEngineAdapter(model=...)), or remove the hook and "
                f"{check[1]}."
            )


#: hooks that branch on ``isinstance(runner.<stage>_dataloader.sampler, <class>)``
SAMPLER_CHECKS = {
    "mmdet.engine.hooks.visualization_hook.TrackVisualizationHook": "mmdet.datasets.samplers.TrackImgSampler",
}


def refuse_wrapped_samplers(hooks: list[Any], loader: Any, stage: str) -> None:
    """Refuse a hook that checks the loader's sampler class when Lightning wrapped that sampler for DDP: the hook would
    silently take its other branch."""
    inner = lightning_api.sampler_inside_wrapper(getattr(loader, "sampler", None))
    if inner is None:
        return
    for hook in hooks:
        checked = SAMPLER_CHECKS.get(_qualname(hook))
        if checked is None:
            continue
        name = checked.rpartition(".")[2]
        if isinstance(inner, _class_at(checked)):
            raise TypeError(
                f"MMEngineAdapter cannot run {type(hook).__qualname__}: it checks isinstance(runner.{stage}_dataloader."
                f"sampler, {name}), and Lightning wrapped the loader's {name} in its DistributedSamplerWrapper "
                f"(Trainer(use_distributed_sampler=True) under DDP), so the hook would take its other branch. "
                f"Build the Trainer with use_distributed_sampler=False: {name} splits the data by rank itself."
            )


def init_dist_flags(hooks: list[Any], built_world_size: int) -> int:
    """Values MMEngine hooks compute from ``mmengine.dist`` in ``__init__``: the Runner builds hooks after
    ``init_dist``, Lightning starts the process group after the hooks exist (``built_world_size`` processes then),
    so compute them again now. Returns the world size they hold now."""
    from mmengine.dist import get_world_size, is_distributed
    from mmengine.hooks import SyncBuffersHook

    world_size = get_world_size()
    for hook in hooks:
        if isinstance(hook, SyncBuffersHook):
            hook.distributed = hook.distributed or is_distributed()  # a process group never goes away in between
        elif _qualname(hook) == "mmpretrain.engine.hooks.swav_hook.SwAVHook" and world_size != built_world_size:
            # SwAVHook takes the global batch, batch_size * get_world_size(), and cuts its queue to a multiple of it
            hook.batch_size = hook.batch_size // built_world_size * world_size
    return world_size


def _qualname(hook: Any) -> str:
    """``module.Class`` of ``hook``, to recognise classes of libraries that may not be installed."""
    return f"{type(hook).__module__}.{type(hook).__qualname__}"


def _class_at(path: str) -> type:
    """The class at ``module.Class``, imported now (a hook of that library runs, so the library is installed)."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)
