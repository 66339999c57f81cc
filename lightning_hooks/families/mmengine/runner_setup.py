"""What MMEngine's ``Runner`` builds for a run before its hooks see it (``Runner.__init__`` / ``setup_env``): the
timestamp shared by the ranks, the log processor, the visualizer, the config dump, and the model hooks see as
``runner.model``. The :class:`~lightning_hooks.families.mmengine.runner.Runner` facade calls these once per adapter
or per run."""

from __future__ import annotations

import copy
import os
import time
from typing import Any, cast

import torch
from mmengine.config import Config
from mmengine.model import BaseModel
from mmengine.registry import VISUALIZERS
from mmengine.runner import LogProcessor
from mmengine.visualization import Visualizer

from lightning_hooks.core.console import DropMessages
from lightning_hooks.core.models import find_model, submodule

# MMEngine's own CheckpointHook and LoggerHook build a FileClient on every run ("kept until MMEngine 1.0"), which
# warns that FileClient and HardDiskBackend are deprecated: nothing a user can change, so these two are dropped.
UPSTREAM_NOTICES = DropMessages('"FileClient" will be deprecated', '"HardDiskBackend" is the alias of "LocalBackend"')



def shared_timestamp(timestamp: str) -> str:
    """Rank 0's ``timestamp`` on every rank (one ``log_dir``), broadcast as ``Runner.setup_env`` does."""
    from mmengine.dist import broadcast, is_distributed

    if not is_distributed():
        return timestamp
    stamp = torch.tensor(time.mktime(time.strptime(timestamp, "%Y%m%d_%H%M%S")), dtype=torch.float64)
    broadcast(stamp)
    return time.strftime("%Y%m%d_%H%M%S", time.localtime(stamp.item()))


def dump_config(cfg: Config, visualizer: Visualizer, work_dir: str, timestamp: str, rank: int) -> None:
    """As the Runner: ``cfg`` to the visualizer (``vis_data/config.py``) and, on rank 0, to
    ``{work_dir}/{its file name}``, or ``{work_dir}/{timestamp}.py`` (``Runner.dump_config``)."""
    if cfg:
        visualizer.add_config(cfg)
    if rank == 0:
        filename = os.path.basename(cfg.filename) if cfg.filename is not None else f"{timestamp}.py"
        os.makedirs(work_dir, exist_ok=True)
        cfg.dump(os.path.join(work_dir, filename))


def build_visualizer(visualizer: dict | Visualizer | None, name: str, log_dir: str) -> Visualizer:
    """``Runner.build_visualizer``: an instance as given, a config through ``VISUALIZERS`` (``name`` and
    ``save_dir=log_dir`` as defaults), else a local one."""
    if isinstance(visualizer, Visualizer):
        return visualizer
    if visualizer is None:
        return Visualizer.get_instance(name, vis_backends=[dict(type="LocalVisBackend")], save_dir=log_dir)
    if not isinstance(visualizer, dict):
        raise TypeError(
            f"MMEngineAdapter(visualizer=...) takes a config dict (dict(type='Visualizer', "
            f"vis_backends=[dict(type='LocalVisBackend')])) or a Visualizer instance, got {type(visualizer).__name__}"
        )
    config = copy.deepcopy(dict(visualizer))  # Visualizer gives its backends' configs the save_dir
    config.setdefault("name", name)
    config.setdefault("save_dir", log_dir)
    _forget_instance(config)
    return VISUALIZERS.build(config)


def _forget_instance(config: dict[str, Any]) -> None:
    """Forget an earlier visualizer of the name ``config`` gives (OpenMMLab's configs all name theirs
    ``"visualizer"``), so that this run builds its own, as in a process of its own. ``VISUALIZERS.build`` would hand
    back the instance a previous run in this process built, with that run's ``save_dir``, and this run's scalars and
    images would land in the previous run's work dir (as they do under MMEngine's ``Runner``)."""
    kind = config.get("type")
    if isinstance(kind, str):
        with VISUALIZERS.switch_scope_and_registry(config.get("_scope_")) as registry:
            kind = registry.get(kind)
    if isinstance(kind, type) and issubclass(kind, Visualizer):
        cast(Any, kind)._instance_dict.pop(config["name"], None)  # ManagerMixin's instances (mmengine: no types)

def openmmlab_model(pl_module: torch.nn.Module, path: str | None) -> tuple[torch.nn.Module | None, str]:
    """The model hooks see as ``runner.model`` and its key prefix in ``pl_module.state_dict()``.

    ``path`` names it (``"model"``, ``"detector.model"``; ``""``: the LightningModule). Without one, it is the
    LightningModule when that is an ``mmengine.model.BaseModel``, else the one outermost ``BaseModel`` it holds; with
    none, the LightningModule (None here). Several outermost ones are ambiguous and raise."""
    if path is None:
        path = find_model(pl_module, lambda m: isinstance(m, BaseModel), adapter="MMEngineAdapter",
                          what="MMEngine models")  # fmt: skip  # arguments aligned under the call
        if path is None:
            return None, ""
    module = submodule(pl_module, path, adapter="MMEngineAdapter")
    return (None, "") if module is pl_module else (module, path + ".")


def build_log_processor(config: dict | LogProcessor | None) -> LogProcessor:
    """``Runner.build_log_processor``: an instance as given, a config with ``type`` through ``LOG_PROCESSORS``, else a
    ``LogProcessor``."""
    from mmengine.registry import LOG_PROCESSORS

    if isinstance(config, LogProcessor):
        return config
    config = dict(config or {})
    config.setdefault("type", "LogProcessor")
    processor = LOG_PROCESSORS.build(config)
    if not isinstance(processor, LogProcessor):
        raise TypeError(
            f"MMEngineAdapter(log_processor=...): {config['type']!r} built {type(processor).__name__}, not an "
            "mmengine LogProcessor (LoggerHook calls its get_log_after_iter/get_log_after_epoch)."
        )
    return processor
