"""The ``runner`` facade MMEngine hooks receive: MMEngine's ``Runner`` surface, backed by a Lightning trainer.

The runner holds what MMEngine's ``Runner`` holds (work dir, logger, message hub, visualizer, scope, model,
optimizer view, schedulers) and reads the run's counters, limits and data from its loops, as the Runner does
(:mod:`~lightning_hooks.families.mmengine.loops`, :mod:`~lightning_hooks.families.mmengine.eval_loops`); what the
Runner builds once (timestamp, visualizer, log processor, config dump, model) comes from
:mod:`~lightning_hooks.families.mmengine.runner_setup`, checkpoints go through
:mod:`~lightning_hooks.families.mmengine.checkpoint` and schedulers through
:mod:`~lightning_hooks.families.mmengine.schedulers`.
"""

from __future__ import annotations

import itertools
import logging
import operator
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.logging import MessageHub, MMLogger
from mmengine.optim import OptimWrapper, OptimWrapperDict
from mmengine.registry import DefaultScope
from mmengine.visualization import Visualizer

from lightning_hooks.core.console import route_console
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.facade import Facade, WorkDir
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.families.mmengine import checkpoint, runner_setup, schedulers
from lightning_hooks.families.mmengine.eval_loops import EvalTestLoop, EvalValLoop
from lightning_hooks.families.mmengine.host_loop import MMEngineLoop
from lightning_hooks.families.mmengine.loops import train_loop

_instances = itertools.count()


class _ReadOnly(property):
    """A ``runner`` attribute that MMEngine's ``Runner`` computes (a property there), served by the decorated method;
    assigning it raises an error that says so. A ``property``: Python reads it without a frame of its own, and
    :meth:`of_train_loop`'s reads run only the loop's (hooks read ``runner.iter`` several times an iteration)."""

    def __init__(self, compute: Callable[[Runner], Any], doc: str | None = None) -> None:
        super().__init__(compute, self._refuse)
        self.__doc__ = doc or compute.__doc__

    @classmethod
    def of_train_loop(cls, name: str, what: str) -> _ReadOnly:
        """``runner.<attribute>``: ``train_loop.<name>`` (``what``), as MMEngine's ``Runner`` reads it."""
        return cls(operator.attrgetter(f"train_loop.{name}"), f"``train_loop.{name}``: {what}.")

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def _refuse(self, runner: Runner, value: Any) -> None:
        raise AttributeError(
            f"runner.{self.name} is read-only under lightning-hooks: it is computed from the Lightning trainer "
            "(the train loader, Trainer limits, the run's progress and the optimizers configure_optimizers() returns)"
        )


def torch_optimizer(optimizer: Any) -> torch.optim.Optimizer:
    """The torch optimizer behind one of Lightning's optimizers: under DeepSpeed, Lightning holds DeepSpeed's ZeRO
    optimizer, which wraps the config's optimizer (its ``optimizer``) and is no ``torch.optim.Optimizer`` (MMEngine's
    ``OptimWrapper`` reads its ``defaults``; ``DeepSpeedOptimWrapper`` never does); any other is that optimizer."""
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    inner = getattr(optimizer, "optimizer", None)
    return inner if isinstance(inner, torch.optim.Optimizer) else optimizer


class Runner(Facade):
    """MMEngine's ``Runner`` as its hooks see it, backed by a Lightning trainer.

    ``iter``, ``epoch``, ``max_iters``, ``max_epochs`` and ``train_dataloader`` are the train loop's
    (:class:`~lightning_hooks.families.mmengine.loops.EpochTrainLoop`), as in MMEngine. ``message_hub`` is a real
    ``MessageHub`` (one per facade), ``logger`` an ``MMLogger`` writing ``{log_dir}/{timestamp}.log``.
    ``train_loop``, ``val_loop`` and ``test_loop`` are MMEngine loops to hooks
    (:mod:`~lightning_hooks.families.mmengine.loops`).

    As MMEngine's ``Runner``, the facade sets up ``default_scope`` (a ``DefaultScope``, e.g. ``"mmdet"``, made
    current again for every run) and builds ``visualizer`` (a config dict, built through ``VISUALIZERS`` with the
    experiment name and ``save_dir=log_dir`` as defaults, or an instance; default: a ``Visualizer`` with a
    ``LocalVisBackend``, so images land in ``{work_dir}/{timestamp}/vis_data/``) when it is created, before the
    adapter builds hook configs: hooks that take ``Visualizer.get_current_instance()`` in ``__init__`` get this one.
    Each run hands the visualizer its datasets' ``metainfo`` (train, then val; test for ``trainer.test``), as
    MMEngine's loops do when they are built.

    The adapter builds it from its own options (``MMEngineAdapter(work_dir=..., ...)``, documented there), what it
    may call to run hooks (its ``hook_caller``) and its host loop
    (:class:`~lightning_hooks.families.mmengine.host_loop.MMEngineLoop`), whose counters ``runner.iter`` /
    ``runner.epoch`` read through ``train_loop``.

    Example::

        adapter = MMEngineAdapter([EMAHook()], work_dir="work")
        adapter.runner.message_hub.get_scalar("train/loss").current()  # after some training
    """

    host = "runner"
    #: the train loop MMEngine would run: ``EpochBasedTrainLoop`` (True) or ``IterBasedTrainLoop`` (False)
    by_epoch = True

    def __init__(self, options: Mapping[str, Any], hooks: HookCaller, loop: MMEngineLoop) -> None:
        self.trainer: pl.Trainer | None = None
        self._hooks = hooks
        self._model_path: str | None = options["model"]
        #: the OpenMMLab model hooks see as ``runner.model``, and its key prefix in the LightningModule's state_dict;
        #: None: the LightningModule itself is the model
        self._model: torch.nn.Module | None = None
        self._model_prefix = ""
        self._work_dir: WorkDir = WorkDir(options["work_dir"], "MMEngineAdapter", family="mmengine")
        self.timestamp = time.strftime("%Y%m%d_%H%M%S", time.localtime())
        self._experiment_name = options["experiment_name"]
        self._config_file: str | None = getattr(options["cfg"], "filename", None)  # a whole config's file
        self._config_name = options["cfg"].get("experiment_name") if hasattr(options["cfg"], "get") else None
        self.experiment_name = self._run_name()
        self._instance_name = f"lightning-hooks:{self.experiment_name}:{next(_instances)}"
        cfg = options["cfg"]
        self.cfg = cfg if isinstance(cfg, Config) else Config(dict(cfg or {}))
        self._seed: int | None = options["seed"]
        self.message_hub = MessageHub.get_instance(self._instance_name)
        #: mmengine schedulers or their configs; configs are built on Lightning's optimizer at each ``on_fit_start``.
        self._scheduler_configs = self.param_schedulers = options["param_schedulers"]
        schedulers.check_configs(self._scheduler_configs, options["default_scope"])
        self._log_level: str = options["log_level"]
        self._logger: MMLogger | None = None
        self._named = False  # the run's timestamp and experiment name are final (attach)
        default_scope = options["default_scope"]
        self.default_scope = None if default_scope is None else DefaultScope.get_instance(
            self._instance_name, scope_name=default_scope
        )
        self.log_processor = runner_setup.build_log_processor(options["log_processor"])  # in the scope, as the Runner
        self._visualizer = runner_setup.build_visualizer(options["visualizer"], self._instance_name, self.log_dir)
        self._vis_log_dir = self.log_dir  # where a visualizer built with the default save_dir writes (vis_data/)
        self._resume = False
        self.train_loop = train_loop(self, loop)
        self.by_epoch = loop.by_epoch
        self.val_loop = EvalValLoop(self, hooks)
        self.test_loop = EvalTestLoop(self, hooks)
        self._pending_save: checkpoint.PendingSave | None = None
        self._optim_wrappers: tuple[list[Any], list[OptimWrapper]] = ([], [])  # Lightning's optimizers, their views
        self._step_counted: OptimWrapper | None = None  # the view whose step count schedulers check (a fit's)
        self._resumed_optimizer: dict[str, Any] | None = None  # a resumed checkpoint's `optimizer`, until restored

    def _run_name(self) -> str:
        """``experiment_name``: the one given, else as ``Runner.from_cfg`` names a run of a config: the config's own
        ``experiment_name`` (mmagic's configs set one) or the file's name, and the start time; else the start time."""
        if self._experiment_name:
            return self._experiment_name
        if self._config_name:
            return f"{self._config_name}_{self.timestamp}"
        if self._config_file:
            return f"{os.path.splitext(os.path.basename(self._config_file))[0]}_{self.timestamp}"
        return self.timestamp

    def attach(self, trainer: pl.Trainer) -> None:
        """Serve ``trainer``'s run; build the logger and visualizer before ``before_run``, as the Runner does."""
        self.trainer = trainer
        self._resume = False
        self._model, self._model_prefix = runner_setup.openmmlab_model(trainer.lightning_module, self._model_path)
        for loop in (self.train_loop, self.val_loop, self.test_loop):
            loop.attach(trainer)
        if not self._named:  # once: rank 0's timestamp (a logger built before, on rank 0, already has it)
            self._named = True
            self.timestamp = runner_setup.shared_timestamp(self.timestamp)
            self.experiment_name = self._run_name()
            self._follow_log_dir()
            runner_setup.dump_config(self.cfg, self._visualizer, self.work_dir, self.timestamp, self.rank)
        self._logger = self._logger or self.logger
        self._hand_metainfo(trainer)

    def _running(self, what: str) -> pl.Trainer:
        """The running Lightning trainer, for ``runner.{what}``; an ``AttributeError`` before any run."""
        if self.trainer is None:
            raise AttributeError(f"runner.{what}: no Lightning trainer is running yet")
        return self.trainer

    # ------------------------------------------------------------------------------------------------ places
    @property
    def work_dir(self) -> str:
        return self._work_dir.resolve(self.trainer, self.cfg.filename)

    @property
    def log_dir(self) -> str:
        return os.path.join(self.work_dir, self.timestamp)

    @property
    def _log_dir(self) -> str:
        return self.log_dir

    @property
    def seed(self) -> int | None:
        if self._seed is not None:
            return self._seed
        env = os.environ.get("PL_GLOBAL_SEED")
        return int(env) if env is not None else None

    @property
    def logger(self) -> MMLogger:
        if self._logger is None:
            os.makedirs(self.log_dir, exist_ok=True)
            self._logger = MMLogger.get_instance(
                self._instance_name,
                log_file=os.path.join(self.log_dir, f"{self.timestamp}.log"),
                log_level=self._log_level,
            )
            route_console(self._logger)
            self._logger.addFilter(runner_setup.UPSTREAM_NOTICES)
        return self._logger

    def close_log_file(self) -> None:
        """Flush, close and remove the file handlers of ``logger`` (after a failed run; it then logs to the console)."""
        if self._logger is None:
            return
        for handler in [h for h in self._logger.handlers if isinstance(h, logging.FileHandler)]:
            handler.close()
            self._logger.removeHandler(handler)

    @property
    def visualizer(self) -> Visualizer:
        return self._visualizer

    @visualizer.setter
    def visualizer(self, visualizer: Visualizer) -> None:
        if not isinstance(visualizer, Visualizer):
            raise TypeError(f"runner.visualizer must be an mmengine Visualizer, got {type(visualizer).__name__}")
        self._visualizer = visualizer

    def _follow_log_dir(self) -> None:
        """Backends of the visualizer that write under the default ``{log_dir}/vis_data``, computed when the adapter
        was built (before a Trainer gave the work dir its root, or rank 0 its timestamp), write under this run's
        ``log_dir``; backends create their folder when they first write. A given ``work_dir`` (outside
        ``fast_dev_run``'s temporary one) was known then."""
        fast_dev_run = self.trainer is not None and self.trainer.fast_dev_run  # type: ignore[attr-defined]  # set by Lightning, undeclared
        if self._work_dir.given is not None and not fast_dev_run:
            return
        old, new = os.path.join(self._vis_log_dir, "vis_data"), os.path.join(self.log_dir, "vis_data")
        for backend in getattr(self._visualizer, "_vis_backends", {}).values():
            if not getattr(backend, "_env_initialized", True) and getattr(backend, "_save_dir", None) == old:
                backend._save_dir = new
        self._vis_log_dir = self.log_dir

    def _hand_metainfo(self, trainer: pl.Trainer) -> None:
        """Give the visualizer each dataset's ``metainfo``, in the order MMEngine builds the run's loops, and the
        val/test evaluator (the LightningModule's, see ``val_evaluator``) its dataset's, as ``ValLoop`` and
        ``TestLoop`` do when they are built."""
        fn = trainer.state.fn
        stages = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",)}.get(fn, ()) if fn is not None else ()
        for stage in stages:
            loader = getattr(self, f"{stage}_dataloader")
            metainfo = getattr(getattr(loader, "dataset", None), "metainfo", None)
            if metainfo is None:
                continue
            self._visualizer.dataset_meta = metainfo
            evaluator = getattr(self, f"{stage}_loop").found_evaluator() if stage != "train" else None
            if evaluator is not None:
                evaluator.dataset_meta = metainfo

    @property
    def val_evaluator(self) -> Evaluator:
        """``runner.val_loop.evaluator``, as ``Runner.val_evaluator``: the LightningModule's mmengine ``Evaluator``."""
        return self.val_loop.evaluator

    @property
    def test_evaluator(self) -> Evaluator:
        """``runner.test_loop.evaluator``, as ``Runner.test_evaluator``."""
        return self.test_loop.evaluator

    # ------------------------------------------------------------------------------------------------ model
    @property
    def model(self) -> Any:
        """The OpenMMLab model the LightningModule holds (see :func:`_openmmlab_model`); else the LightningModule, or
        the DDP wrapper around it when the strategy wrapped it."""
        if self._model is not None:
            return self._model
        return self.trainer.strategy.model if self.trainer is not None else None

    @_ReadOnly
    def optim_wrapper(self) -> OptimWrapper | OptimWrapperDict:
        """The ``OptimWrapper`` (``OptimWrapperDict``) the LightningModule steps Lightning's optimizers through, as
        ``MMEngineModule.optim_wrapper`` (an ``AmpOptimWrapper`` with its loss scaler, the config's names of a
        multi-optimizer config); else an ``OptimWrapper`` view of Lightning's optimizer (``OptimWrapperDict`` of
        ``optimizer{i}`` when there are several). The same objects for a whole train epoch."""
        return self.train_loop.per_epoch("optim_wrapper", self._optim_wrapper)

    def _optim_wrapper(self) -> OptimWrapper | OptimWrapperDict:
        optimizers = self.trainer.optimizers if self.trainer is not None else []
        if not optimizers:
            raise AttributeError("runner.optim_wrapper: the Lightning trainer has no optimizer (yet)")
        module_wrappers = self._module_wrappers()
        if module_wrappers is not None:
            return module_wrappers
        # the wrappers stay the same objects while Lightning's optimizers do (hooks may keep them)
        source, cached = self._optim_wrappers
        if source != optimizers:
            source, cached = self._optim_wrappers = (list(optimizers), [OptimWrapper(torch_optimizer(o)) for o in optimizers])
        if len(cached) == 1:
            return cached[0]
        return OptimWrapperDict(**{f"optimizer{i}": w for i, w in enumerate(cached)})

    def _module_wrappers(self) -> OptimWrapper | OptimWrapperDict | None:
        """The LightningModule's ``optim_wrapper`` when it is an ``OptimWrapper`` (``OptimWrapperDict``) whose
        optimizers are Lightning's, in order (``MMEngineModule`` hands Lightning its wrappers' optimizers); else
        None."""
        trainer = self.trainer
        module = trainer.lightning_module if trainer is not None else None
        wrappers = getattr(module, "optim_wrapper", None)
        if trainer is None or not isinstance(wrappers, (OptimWrapper, OptimWrapperDict)):
            return None
        steps = list(wrappers.values()) if isinstance(wrappers, OptimWrapperDict) else [wrappers]
        lightning_optimizer = pl.core.optimizer.LightningOptimizer  # MMEngineModule steps through it
        inner = [w.optimizer.optimizer if isinstance(w.optimizer, lightning_optimizer) else w.optimizer for w in steps]
        optimizers = trainer.optimizers
        same = len(inner) == len(optimizers) and all(
            a is torch_optimizer(b) for a, b in zip(inner, optimizers, strict=True)
        )
        return wrappers if same else None

    def restore_optim_wrappers(self) -> None:
        """After Lightning restored its optimizers in a resumed fit: ``runner.optim_wrapper`` loads the checkpoint's
        ``optimizer``, as ``Runner.resume`` does (``AmpOptimWrapper``'s loss scale, ``base_param_settings``)."""
        entry, self._resumed_optimizer = self._resumed_optimizer, None
        if entry is not None and self._running("restore_optim_wrappers()").optimizers:
            checkpoint.restore_wrappers(entry, self._optim_wrapper())

    def build_param_schedulers(self) -> None:
        """Build scheduler configs on this fit's optimizer view, as ``Runner.build_param_scheduler`` does."""
        if self._scheduler_configs is not None:
            built = schedulers.build(self._scheduler_configs, lambda: self.optim_wrapper, self.train_loop)
            self.param_schedulers = built
            self._step_counted = schedulers.step_counted(self.optim_wrapper)

    # ------------------------------------------------------------------------------------ train loop's values
    iter = _ReadOnly.of_train_loop("iter", "the 0-based index of the current train iteration inside iter hooks, the "
                                   "number of finished iterations elsewhere")
    epoch = _ReadOnly.of_train_loop("epoch", "the current epoch in train hooks, + 1 during the validation after it")
    max_iters = _ReadOnly.of_train_loop("max_iters", "train iterations of the whole run")
    max_epochs = _ReadOnly.of_train_loop("max_epochs", "train epochs of the run")
    train_dataloader = _ReadOnly.of_train_loop("dataloader", "the loader Lightning trains on")

    @property
    def val_dataloader(self) -> Any:
        return self.val_loop.dataloader

    @property
    def test_dataloader(self) -> Any:
        return self.test_loop.dataloader

    @property
    def _train_loop(self) -> Any:
        """MMEngine's private "was a train loop configured" marker: None outside ``trainer.fit``."""
        trainer = self.trainer
        return self.train_loop if trainer is not None and trainer.state.fn == "fit" else None

    # ------------------------------------------------------------------------------------------ distribution
    @property
    def rank(self) -> int:
        return self.trainer.global_rank if self.trainer is not None else 0

    @property
    def world_size(self) -> int:
        return self.trainer.world_size if self.trainer is not None else 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    # ------------------------------------------------------------------------------------------ checkpoints
    def save_checkpoint(
        self,
        out_dir: str,
        filename: str,
        file_client_args: dict | None = None,
        save_optimizer: bool = True,
        save_param_scheduler: bool = True,
        meta: dict | None = None,
        by_epoch: bool = True,
        backend_args: dict | None = None,
    ) -> None:
        """Write ``{out_dir}/{filename}`` through ``trainer.save_checkpoint`` (collective, written by rank 0).

        The file holds Lightning's checkpoint plus MMEngine's layout (``meta``, ``message_hub``, ``optimizer``,
        ``param_schedulers``) and whatever ``before_save_checkpoint`` hooks add, so both hosts can resume from it.
        """
        fast_dev_run = self.trainer is not None and self.trainer.fast_dev_run  # type: ignore[attr-defined]  # set by Lightning, undeclared
        if fast_dev_run:
            rank_zero_warn(
                f"runner.save_checkpoint({out_dir!r}, {filename!r}) writes nothing under "
                f"Trainer(fast_dev_run={fast_dev_run}), which suppresses checkpointing (a hook called it). "
                "Run without fast_dev_run to save checkpoints."
            )
            return
        meta = checkpoint.save_meta(meta, by_epoch, self.epoch, self.iter)
        self._pending_save = checkpoint.PendingSave(meta, save_optimizer, save_param_scheduler, model_keys=True)
        try:
            checkpoint.write(self._running("save_checkpoint()"), os.path.join(out_dir, filename))
        finally:
            self._pending_save = None

    def load_checkpoint(
        self, filename: str, map_location: Any = "cpu", strict: bool = False, *, weights_only: bool = True
    ) -> dict:
        """Load weights from ``filename`` into the model; ``after_load_checkpoint`` hooks run first, as in MMEngine.

        Local files load with ``torch.load(weights_only=True)``: tensors and plain containers only, which is what
        ``runner.save_checkpoint`` writes. A checkpoint written by MMEngine itself pickles its MessageHub: if you trust
        the file, pass ``weights_only=False``. URLs and other backends go to MMEngine's loader.
        """
        loaded = checkpoint.read(filename, map_location, weights_only)
        self._hooks.call_hook("after_load_checkpoint", checkpoint=loaded)  # as the Runner: not a resume
        loaded = checkpoint.load_into_model(self.model, loaded, strict)
        self.logger.info(f"Load checkpoint from {filename}")  # Runner.load_checkpoint's line
        return loaded

    def mmengine_checkpoint(self, lightning: dict[str, Any], saved: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Add MMEngine's checkpoint layout to Lightning's checkpoint dict ``lightning``, in place (see
        :func:`~lightning_hooks.families.mmengine.checkpoint.add_mmengine_layout`); ``saved``: the ``message_hub`` /
        ``param_schedulers`` states the adapter's own state already holds."""
        pending = self._pending_save or checkpoint.PendingSave({"epoch": self.epoch, "iter": self.iter})
        run_meta = dict(cfg=self.cfg.pretty_text, seed=self.seed, experiment_name=self.experiment_name)
        loader = self.train_dataloader if self.trainer is not None and self.trainer.state.fn == "fit" else None
        metainfo = getattr(getattr(loader, "dataset", None), "metainfo", None)
        if metainfo is not None:  # as Runner.save_checkpoint: the train dataset's classes, for inference to read
            run_meta["dataset_meta"] = metainfo
        return checkpoint.add_mmengine_layout(
            lightning, pending, run_meta=run_meta, hub=self.message_hub, model_prefix=self._model_prefix,
            schedulers=schedulers.stateful(self.param_schedulers), saved=saved,
            wrappers=self._optim_wrapper() if self.trainer is not None and self.trainer.optimizers else None,
        )  # fmt: skip  # the keywords grouped by what they hand over, a few to a line
