"""The OpenMMLab 1.x libraries whose ``tools/train.py`` ``lightning-hooks train`` stands in for (mmcls 0.x, mmdet 2.x,
mmseg 0.x), each as a :class:`Library`: what their scripts and training APIs do differently is data here, read by
:mod:`~lightning_hooks.families.mmcv.tools_train`, which has no per-library branch.

This module imports no mmcv, and a library only when a function of it is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any

from lightning_hooks.core.errors import ConfigError


@dataclass(frozen=True)
class Library:
    """One OpenMMLab 1.x library: where its functions are and what its ``tools/train.py`` does its own way.

    The functions are ``"module:name"`` paths (:meth:`function` imports them).

    Args:
        package: its import name (``"mmcls"``).
        models: its model registry, where :meth:`owns` looks a ``cfg.model.type`` up.
        builder: what builds ``cfg.model`` (``build_classifier``).
        builder_cfgs: the top-level config keys its script passes the builder by name (mmdet 2.x and mmseg 0.x take
            ``train_cfg`` / ``test_cfg``; old configs give them at top level).
        datasets: what builds ``cfg.data.train``.
        root_logger: its ``get_root_logger``, the run's logger (``{work_dir}/{timestamp}.log``).
        collect_env: its ``collect_env``, the environment its script logs and records in ``meta['env_info']``.
        init_seed, set_seed: its ``init_random_seed`` and ``set_random_seed``.
        setup_processes: its ``setup_multi_processes(cfg)`` (the multiprocessing start method, OpenCV's threads, and
            ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` for data loader workers), which its script calls first.
        train: its training API (``train_model``), whose module's ``build_runner`` and ``ddp`` are replaced while it
            runs (:class:`~lightning_hooks.families.mmcv.lightning_runner.LightningRunnerSwap`).
        ddp: the name that training API wraps a distributed model with, in ``train``'s module.
        train_takes_device: whether its script passes ``device=cfg.device`` to the training API (mmcls).
        finds_latest_checkpoint: whether the training API itself resumes from the latest checkpoint of the work dir
            when ``cfg.auto_resume`` is set (mmdet, mmseg); where not, the command looks it up first (mmcls).
        auto_resume: where its script sets ``cfg.auto_resume`` (to its ``--auto-resume`` flag, always) relative to
            ``cfg.gpu_ids``: ``"before"`` (mmdet), ``"after"`` (mmseg), or ``""`` where it has no such flag (mmcls:
            the command sets it only when the flag is given).
        meta: the keys of ``meta`` its script fills before recording the version, in its order: ``env_info``,
            ``config`` (the config's text before its device and seed are set: mmdet), ``seed``, ``exp_name`` (the
            config's file name).
        record: the keys of the version record: ``"version"`` (``{package}_version``), ``"config"`` (the config's
            text), then attributes of the train dataset (``CLASSES``, ``PALETTE``).
        record_in: where the script puts that record: ``"meta"``, ``"checkpoint_config"`` (its ``meta``, written into
            every checkpoint; only where the config has a ``checkpoint_config``), or both, in that order.
        version_separator: between the version and the short git hash in the record (mmdet: none); None: the version
            alone (mmcls).
        model_attributes: the train dataset's attributes its script sets on the model (``model.CLASSES``).
        revert_sync_batchnorm: whether its script turns ``SyncBatchNorm`` into ``BatchNorm`` in a single process
            (mmseg).
        log_model: whether its script logs the model (mmseg).
        setup_after_logger: whether its script sets the processes up (``setup_processes``) after its logger, so that
            what that logs goes into the run's log file (mmseg); the others set them up first thing.
    """

    package: str
    models: str
    builder: str
    datasets: str
    root_logger: str
    collect_env: str
    init_seed: str
    set_seed: str
    setup_processes: str
    train: str
    ddp: str = "build_ddp"
    builder_cfgs: tuple[str, ...] = ("train_cfg", "test_cfg")
    train_takes_device: bool = False
    finds_latest_checkpoint: bool = True
    auto_resume: str = "after"
    meta: tuple[str, ...] = ("env_info", "seed", "exp_name")
    record: tuple[str, ...] = ("version", "CLASSES")
    record_in: tuple[str, ...] = ("checkpoint_config",)
    version_separator: str | None = "+"
    model_attributes: tuple[str, ...] = ("CLASSES",)
    revert_sync_batchnorm: bool = False
    log_model: bool = False
    setup_after_logger: bool = False

    def __post_init__(self) -> None:
        if self.auto_resume not in ("before", "after", ""):
            raise ValueError(f"Library {self.package}: auto_resume must be 'before', 'after' or '', got {self.auto_resume!r}")
        if not self.record_in or set(self.record_in) - {"meta", "checkpoint_config"}:
            raise ValueError(f"Library {self.package}: record_in takes 'meta' and/or 'checkpoint_config', got {self.record_in!r}")

    @staticmethod
    def function(path: str) -> Any:
        """The object at ``"module:name"``, its module imported."""
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)

    @property
    def train_module(self) -> Any:
        """The module of the training API (where it looks ``build_runner`` and :attr:`ddp` up)."""
        return importlib.import_module(self.train.partition(":")[0])

    def owns(self, model_type: str) -> bool:
        """Whether ``model_type`` is in this library's own model registry (installed libraries only)."""
        if importlib.util.find_spec(self.package) is None:
            return False
        try:
            registry = self.function(self.models)  # importing it registers the library's models
        except ImportError:  # e.g. mmdet's models without mmcv's compiled ops (mmcv._ext)
            return False
        return model_type in registry.module_dict


def _library(package: str, builder: str, train: str, **differences: Any) -> Library:
    """A library laid out as the three are: ``models.builder.MODELS``, ``datasets.build_dataset``, ``utils``'
    logger and environment, ``apis``' seed functions."""
    return Library(package, models=f"{package}.models.builder:MODELS", builder=f"{package}.models:{builder}",
                   datasets=f"{package}.datasets:build_dataset", root_logger=f"{package}.utils:get_root_logger",
                   collect_env=f"{package}.utils:collect_env", init_seed=f"{package}.apis:init_random_seed",
                   set_seed=f"{package}.apis:set_random_seed", setup_processes=f"{package}.utils:setup_multi_processes",
                   train=f"{package}.apis.train:{train}", **differences)  # fmt: skip  # one call, one row per concern


#: the libraries, in the order a model type is looked up
LIBRARIES = (
    _library("mmcls", "build_classifier", "train_model", ddp="wrap_distributed_model", builder_cfgs=(),
             train_takes_device=True, finds_latest_checkpoint=False, auto_resume="", meta=("env_info", "seed"),
             record=("version", "config", "CLASSES"), record_in=("meta",), version_separator=None,
             model_attributes=()),
    _library("mmdet", "build_detector", "train_detector", auto_resume="before",
             meta=("env_info", "config", "seed", "exp_name"), version_separator=""),
    _library("mmseg", "build_segmentor", "train_segmentor", record=("version", "config", "CLASSES", "PALETTE"),
             record_in=("checkpoint_config", "meta"), revert_sync_batchnorm=True, log_model=True,
             setup_after_logger=True),
)  # fmt: skip  # a row per library, its keywords aligned under the call


def library_of(cfg: Any) -> Library:
    """The installed library whose model registry has ``cfg.model.type``."""
    kind = cfg.model.get("type")
    for library in LIBRARIES:
        if library.owns(kind):
            return library
    installed = [lib.package for lib in LIBRARIES if importlib.util.find_spec(lib.package) is not None]
    raise ConfigError(
        f"model.type: {kind!r} is in the model registry of none of the installed OpenMMLab 1.x libraries "
        f"({', '.join(installed) or 'none installed'}; lightning-hooks train knows {', '.join(lib.package for lib in LIBRARIES)}). "
        "Install the library the config is written for (its models must import: mmdet's need mmcv-full's ops), "
        "or import the module that registers the model "
        "(custom_imports = dict(imports=[...]) in the config)."
    )
