"""What an OpenMMLab 1.x ``tools/train.py`` (mmcls 0.x, mmdet 2.x, mmseg 0.x) does after parsing its arguments, under
Lightning: the processes, the work dir and config dump, the run's logger, the seed, the model from ``cfg.model`` with
its ``init_weights``, the datasets from ``cfg.data``, ``meta``, then the library's own training API (``train_model``
/ ``train_detector`` / ``train_segmentor``), so the data loaders, the optimizer (``build_optimizer``), the hooks
(``register_training_hooks(cfg.lr_config, cfg.optimizer_config, ...)``, the eval hook from ``cfg.evaluation``) and
``load_from`` are built by the library's code. Only the runner differs
(:mod:`~lightning_hooks.families.mmcv.lightning_runner`). Where the libraries' scripts differ, :func:`train` reads
the :class:`~lightning_hooks.families.mmcv.library.Library`.
"""

from __future__ import annotations

import copy
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lightning_hooks.families.mmcv.library import Library, library_of
from lightning_hooks.families.mmcv.lightning_runner import LightningRunnerSwap


def train(cfg: Any, *, validate: bool = True, seed: int | None = None, diff_seed: bool = False,
          deterministic: bool = False, timestamp: str | None = None, **trainer_options: Any) -> Any:  # fmt: skip  # arguments aligned under the call
    """``tools/train.py``'s ``main`` after parsing: the processes (``init_dist``), the run's logger, seed, model,
    datasets, ``meta``, then the library's training API with a
    :class:`~lightning_hooks.families.mmcv.lightning_runner.LightningRunner`. Returns the Lightning trainer.
    ``trainer_options`` go to ``lightning.Trainer``; where they ask for several processes, Lightning's DDP launches
    them now (each runs the same command), as ``dist_train.sh`` does before its ``tools/train.py`` builds anything."""
    import mmcv

    library = library_of(cfg)
    if not library.setup_after_logger:
        setup_env(library, cfg)
    processes = _start_processes(trainer_options)
    distributed = processes > 1
    if distributed:  # as the scripts record it under their launcher (mmcv's resume rescales the iteration by it)
        init_dist_start_method()
        cfg.gpu_ids = range(processes)
    if not library.finds_latest_checkpoint and cfg.get("auto_resume") and cfg.get("resume_from") is None:
        cfg.resume_from = latest_checkpoint(cfg.work_dir)
    mmcv.mkdir_or_exist(os.path.abspath(cfg.work_dir))
    if cfg.filename:
        cfg.dump(os.path.join(cfg.work_dir, os.path.basename(cfg.filename)))
    timestamp = timestamp or time.strftime("%Y%m%d_%H%M%S", time.localtime())
    log_file = os.path.join(cfg.work_dir, f"{timestamp}.log")
    with run_logger(library, log_file, cfg.get("log_level", "INFO")) as logger:
        if library.setup_after_logger:  # what it logs goes into the run's log
            setup_env(library, cfg)
        model, datasets, meta = _prepare(library, cfg, logger, distributed=distributed, seed=seed,
                                         diff_seed=diff_seed, deterministic=deterministic,
                                         accelerator=trainer_options.get("accelerator"))  # fmt: skip  # arguments aligned under the call
        device_kwargs = {"device": cfg.device} if library.train_takes_device else {}
        if deterministic:
            trainer_options.setdefault("deterministic", True)
        with LightningRunnerSwap(library, trainer_options) as swap:
            library.function(library.train)(model, datasets, cfg, distributed=distributed, validate=validate,
                                            timestamp=timestamp, meta=meta, **device_kwargs)  # fmt: skip  # arguments aligned under the call
    return swap.runners[-1].trainer


def setup_env(library: Library, cfg: Any) -> None:
    """What the script does first with its config, for its process: the library's ``setup_multi_processes(cfg)``
    (``mp_start_method``, ``opencv_num_threads``, one OpenMP / MKL thread for data loader workers) and
    ``cudnn_benchmark``."""
    import torch

    library.function(library.setup_processes)(cfg)
    if cfg.get("cudnn_benchmark", False):
        torch.backends.cudnn.benchmark = True


def _prepare(library: Library, cfg: Any, logger: logging.Logger, *, distributed: bool, seed: int | None,
             diff_seed: bool, deterministic: bool, accelerator: Any) -> tuple[Any, list[Any], dict[str, Any]]:  # fmt: skip  # arguments aligned under the call
    """The script's steps between its logger and its training API call: the environment and config logged, the
    seed, the model (``init_weights``), the datasets, ``meta`` and the version record. Returns the model, the
    datasets and ``meta``."""
    import torch

    env_info = "\n".join(f"{k}: {v}" for k, v in library.function(library.collect_env)().items())
    meta: dict[str, Any] = dict(env_info=env_info)
    if "config" in library.meta:  # the config before its device and seed are set
        meta["config"] = cfg.pretty_text
    dash_line = "-" * 60 + "\n"
    logger.info(f"Environment info:\n{dash_line}{env_info}\n{dash_line}")
    logger.info(f"Distributed training: {distributed}")
    logger.info(f"Config:\n{cfg.pretty_text}")  # as the scripts log it: before its device is set
    cfg.device = "cuda" if torch.cuda.is_available() and accelerator not in ("cpu",) else "cpu"
    seed = library.function(library.init_seed)(seed, device=cfg.device)
    if diff_seed and torch.distributed.is_available() and torch.distributed.is_initialized():
        seed += torch.distributed.get_rank()
    logger.info(f"Set random seed to {seed}, deterministic: {deterministic}")
    library.function(library.set_seed)(seed, deterministic=deterministic)
    cfg.seed = meta["seed"] = seed
    if "exp_name" in library.meta:
        meta["exp_name"] = os.path.basename(cfg.filename)
    model = library.function(library.builder)(cfg.model, **{key: cfg.get(key) for key in library.builder_cfgs})
    with closed_log_files_aside():
        model.init_weights()
    if library.revert_sync_batchnorm and not distributed:  # SyncBN needs a process group
        from mmcv.cnn.utils import revert_sync_batchnorm

        model = revert_sync_batchnorm(model)
    if library.log_model:
        logger.info(model)
    build_dataset = library.function(library.datasets)
    datasets = [build_dataset(cfg.data.train)]
    if len(cfg.workflow) == 2:
        val = copy.deepcopy(cfg.data.val)
        val.pipeline = cfg.data.train.pipeline
        datasets.append(build_dataset(val))
    _record_version(library, cfg, meta, datasets[0])
    for name in library.model_attributes:
        setattr(model, name, getattr(datasets[0], name))
    return model, datasets, meta


def _record_version(library: Library, cfg: Any, meta: dict[str, Any], dataset: Any) -> None:
    """The library version, the config and the dataset's ``CLASSES`` (``PALETTE``) where its ``tools/train.py``
    records them (:attr:`Library.record`, :attr:`Library.record_in`); in the checkpoints only where the config has
    a ``checkpoint_config``."""
    from mmcv.utils import get_git_hash

    version = library.function(f"{library.package}:__version__")
    if library.version_separator is not None:
        version = f"{version}{library.version_separator}{get_git_hash()[:7]}"
    record = {}
    for key in library.record:
        if key == "version":
            record[f"{library.package}_version"] = version
        else:
            record[key] = cfg.pretty_text if key == "config" else getattr(dataset, key)
    if "checkpoint_config" in library.record_in:
        if cfg.checkpoint_config is None:
            return
        cfg.checkpoint_config.meta = record
    if "meta" in library.record_in:
        meta.update(record)


@contextmanager
def run_logger(library: Library, log_file: str, log_level: Any) -> Iterator[logging.Logger]:
    """Inside: the library's root logger set up for this run, as its ``tools/train.py`` gets it in a fresh process
    (:func:`open_run_logger`). On the way out, also after a failure, it is undone."""
    logger, undo = open_run_logger(library, log_file, log_level)
    try:
        yield logger
    finally:
        undo()


@contextmanager
def closed_log_files_aside() -> Iterator[None]:
    """While ``init_weights`` runs: the closed file handlers of the logger it writes its parameters' initialisation to
    (the first of mmcv's ``logger_initialized``) set aside, and given back after. mmcv's ``_dump_init_info`` writes to
    each ``FileHandler``'s stream itself, which is None once the handler is closed, where logging would open it again;
    importing mlflow closes every handler of the process (``logging.config.dictConfig``), so an earlier run's log file
    on mmcv's logger (``MMCVAdapter`` in a notebook) failed the next run with an AttributeError."""
    from mmcv.utils import logging as mmcv_logging

    names = list(mmcv_logging.logger_initialized)
    logger = logging.getLogger(names[0] if names else "mmcv")
    closed = [h for h in logger.handlers if isinstance(h, logging.FileHandler) and h.stream is None]
    for handler in closed:
        logger.removeHandler(handler)
    try:
        yield
    finally:
        for handler in closed:
            logger.addHandler(handler)


def open_run_logger(library: Library, log_file: str, log_level: Any) -> tuple[logging.Logger, Callable[[], None]]:
    """The library's root logger (``get_root_logger(log_file=..., log_level=...)``) as its ``tools/train.py`` builds
    it first thing in a fresh process: its own handlers (the console, and ``log_file`` on rank 0), none of an
    earlier run's in this process, and set up after the loggers set up before it, as there: importing the library
    sets mmcv's own logger up (mmcv 1.7's ``mmcv.cnn.rfsearch``), so ``init_weights``, which writes the parameters'
    initialisation to the first of ``logger_initialized``, writes it to mmcv's logger, not into the run's log file.

    mmcv's ``get_logger`` sets a logger up once per process and returns it unchanged afterwards: without this, a
    second run in a process (a notebook, a test) would write into the first run's log file, or fail on it once
    closed. Returns the logger and the undo, which closes this run's handlers and gives the logger its earlier
    handlers and level and mmcv's ``logger_initialized`` its earlier entries, in their order (entries added by
    others meanwhile stay)."""
    from mmcv.utils import logging as mmcv_logging

    initialized = mmcv_logging.logger_initialized
    logger = logging.getLogger(library.package)
    before, handlers, level = dict(initialized), list(logger.handlers), logger.level
    for handler in handlers:
        logger.removeHandler(handler)
    initialized.pop(library.package, None)  # set up anew, after the others, as in the script's fresh process
    logger = library.function(library.root_logger)(log_file=log_file, log_level=log_level)

    def undo() -> None:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        added = {name: value for name, value in initialized.items() if name not in before and name != library.package}
        initialized.clear()
        initialized.update({**before, **added})

    return logger, undo


def _start_processes(trainer_options: dict[str, Any]) -> int:
    """The processes the Trainer options ask for, started now under Lightning's DDP launcher, this one joined to
    their process group (``init_dist``); their number. Several processes need ``--strategy ddp`` (or none)."""
    from lightning_hooks.core import lightning_api

    launch = {k: v for k, v in trainer_options.items() if k in ("accelerator", "devices", "num_nodes", "strategy")}
    launch = {k: v for k, v in launch.items() if v is not None}
    if lightning_api.world_size(**{**launch, "strategy": "ddp"}) == 1:
        return 1
    if launch.get("strategy", "auto") not in ("auto", "ddp"):
        from lightning_hooks.families.mmcv.distributed import ddp_strategy

        ddp_strategy(launch["strategy"], None, lightning_api.world_size(**launch))  # raises
    return lightning_api.launch_processes(**{**launch, "strategy": "ddp"})


def init_dist_start_method() -> None:
    """What mmcv's ``init_dist`` (the scripts' ``--launcher``) does to the process besides joining the process group:
    the multiprocessing start method ``spawn`` where none is set yet. The scripts that set the processes up first
    (mmcls, mmdet: ``setup_multi_processes``, ``fork`` by default) keep theirs; mmseg 0.x's, which sets them up after,
    starts its data loader workers with ``spawn`` unless its config names an ``mp_start_method``."""
    import multiprocessing

    if multiprocessing.get_start_method(allow_none=True) is None:
        multiprocessing.set_start_method("spawn")


def latest_checkpoint(work_dir: str) -> str | None:
    """What ``--auto-resume`` resumes from, as mmdet's and mmseg's ``find_latest_checkpoint``: ``latest.pth`` in
    ``work_dir``, else the ``*.pth`` whose name ends in the highest number (``epoch_3.pth``), else None."""
    if os.path.exists(os.path.join(work_dir, "latest.pth")):
        return os.path.join(work_dir, "latest.pth")
    numbered = {}
    for name in os.listdir(work_dir) if os.path.isdir(work_dir) else []:
        count = re.search(r"_(\d+)\.pth$", name)
        if count:
            numbered[int(count.group(1))] = os.path.join(work_dir, name)
    return numbered[max(numbered)] if numbered else None
