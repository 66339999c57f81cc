"""The ``runner`` facade MMEngine hooks receive: MMEngine's ``Runner`` surface, backed by a Lightning trainer."""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from mmengine.config import Config
from mmengine.evaluator import Evaluator
from mmengine.logging import HistoryBuffer, MessageHub, MMLogger
from mmengine.optim import OptimWrapper, OptimWrapperDict
from mmengine.runner import LogProcessor
from mmengine.registry import VISUALIZERS, DefaultScope
from mmengine.visualization import Visualizer

from lightning_hooks.core.console import DropMessages, route_console
from lightning_hooks.core import lightning_api
from lightning_hooks.callbacks.checkpoint_io import durable_checkpoint_io
from lightning_hooks.core.checkpoint_files import load_checkpoint_file
from lightning_hooks.core.errors import unknown_name
from lightning_hooks.core.facade import Facade, WorkDir
from lightning_hooks.core.lightning_api import pl, rank_zero_warn
from lightning_hooks.core.safety import plain
from lightning_hooks.families.mmengine.events import LOAD_CHECKPOINT
from lightning_hooks.families.mmengine.iter_based import EndlessSource, IterLoopConfig, parse_train_cfg
from lightning_hooks.families.mmengine.loops import EvalTestLoop, EvalValLoop, train_loop

_instances = itertools.count()


class _PerTrainEpoch:
    """A read-only ``runner`` attribute that hooks read every iteration (IterTimerHook ``max_iters``, LoggerHook
    ``train_dataloader``, RuntimeInfoHook ``optim_wrapper``), computed by the decorated method once per train epoch.

    Lightning sets up an epoch's train data and optimizers before the epoch starts, so the value holds until the epoch
    ends (the train loop's ``start_epoch`` / ``end_epoch``, which keep the values in ``train_loop.epoch_values``) or a
    hook assigns ``train_loop.dataloader``. Outside a train epoch it is computed on every read.
    """

    def __init__(self, compute: Callable[[Runner], Any]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, runner: Runner | None, owner: type | None = None) -> Any:
        if runner is None:
            return self
        values = runner.train_loop.epoch_values
        if values is None:
            return self.compute(runner)
        try:
            return values[self.name]
        except KeyError:
            value = values[self.name] = self.compute(runner)
            return value

    def __set__(self, runner: Runner, value: Any) -> None:
        raise AttributeError(
            f"runner.{self.name} is read-only under lightning-hooks: it is computed from the Lightning trainer "
            "(the train loader, Trainer limits and the optimizers configure_optimizers() returns)"
        )


# MMEngine's own CheckpointHook and LoggerHook build a FileClient on every run ("kept until MMEngine 1.0"), which
# warns that FileClient and HardDiskBackend are deprecated: nothing a user can change, so these two are dropped.
UPSTREAM_NOTICES = DropMessages('"FileClient" will be deprecated', '"HardDiskBackend" is the alias of "LocalBackend"')


class Runner(Facade):
    """MMEngine's ``Runner`` as its hooks see it, backed by a Lightning trainer.

    ``iter`` is the 0-based index of the current train iteration inside iter hooks and the number of finished
    iterations elsewhere; ``epoch`` is the current epoch in train hooks and epoch + 1 during the validation that
    follows it. ``message_hub`` is a real ``MessageHub`` (one per facade), ``logger`` an ``MMLogger`` writing
    ``{log_dir}/{timestamp}.log``. ``train_loop``, ``val_loop`` and ``test_loop`` are MMEngine loops to hooks
    (:mod:`~lightning_hooks.families.mmengine.loops`).

    As MMEngine's ``Runner``, the facade sets up ``default_scope`` (a ``DefaultScope``, e.g. ``"mmdet"``, made
    current again for every run) and builds ``visualizer`` (a config dict, built through ``VISUALIZERS`` with the
    experiment name and ``save_dir=log_dir`` as defaults, or an instance; default: a ``Visualizer`` with a
    ``LocalVisBackend``, so images land in ``{work_dir}/{timestamp}/vis_data/``) when it is created, before the
    adapter builds hook configs: hooks that take ``Visualizer.get_current_instance()`` in ``__init__`` get this one.
    Each run hands the visualizer its datasets' ``metainfo`` (train, then val; test for ``trainer.test``), as
    MMEngine's loops do when they are built.

    Example::

        adapter = MMEngineAdapter([EMAHook()], work_dir="work")
        adapter.runner.message_hub.get_scalar("train/loss").current()  # after some training
    """

    host = "runner"
    #: the train loop MMEngine would run: ``EpochBasedTrainLoop`` (True) or ``IterBasedTrainLoop`` (False)
    by_epoch = True

    def __init__(
        self,
        work_dir: str | os.PathLike | None = None,
        experiment_name: str | None = None,
        cfg: dict | Config | None = None,
        seed: int | None = None,
        log_processor: dict | LogProcessor | None = None,
        param_schedulers: Any = None,
        log_level: str = "INFO",
        train_cfg: dict | None = None,
        visualizer: dict | Visualizer | None = None,
        default_scope: str | None = None,
        model: str | None = None,
    ) -> None:
        self.trainer: pl.Trainer | None = None
        self._model_path = model
        #: the OpenMMLab model hooks see as ``runner.model``, and its key prefix in the LightningModule's state_dict;
        #: None: the LightningModule itself is the model
        self._model: torch.nn.Module | None = None
        self._model_prefix = ""
        #: the ``train_cfg`` loop settings; an ``IterLoopConfig`` runs ``IterBasedTrainLoop``'s semantics
        self._loop_cfg = parse_train_cfg(train_cfg) if train_cfg is not None else None
        self._iter_based = isinstance(self._loop_cfg, IterLoopConfig)
        self.by_epoch = not self._iter_based
        self._work_dir = WorkDir(work_dir, "MMEngineAdapter", family="mmengine")
        self.timestamp = time.strftime("%Y%m%d_%H%M%S", time.localtime())
        self._experiment_name = experiment_name
        self.experiment_name = experiment_name or self.timestamp
        self._instance_name = f"lightning-hooks:{self.experiment_name}:{next(_instances)}"
        self.cfg = cfg if isinstance(cfg, Config) else Config(dict(cfg or {}))
        self._seed = seed
        self.message_hub = MessageHub.get_instance(self._instance_name)
        if isinstance(log_processor, LogProcessor):
            self.log_processor = log_processor
        else:
            self.log_processor = _build_log_processor(log_processor)
        #: mmengine schedulers or their configs; configs are built on Lightning's optimizer at each ``on_fit_start``.
        _check_scheduler_configs(param_schedulers)
        self.param_schedulers = param_schedulers
        self._scheduler_configs = param_schedulers
        self._log_level = log_level
        self._logger: MMLogger | None = None
        self.default_scope = None if default_scope is None else DefaultScope.get_instance(
            self._instance_name, scope_name=default_scope
        )
        self._visualizer = self._build_visualizer(visualizer)
        self._vis_log_dir = self.log_dir  # where a visualizer built with the default save_dir writes (vis_data/)
        self.iter = 0
        self.epoch = 0
        self._resume = False
        self.train_loop = train_loop(self, self.by_epoch)
        self.val_loop = EvalValLoop(self)
        self.test_loop = EvalTestLoop(self)
        self._pending_save: dict[str, Any] | None = None
        self._optim_wrappers: tuple[list[Any], list[OptimWrapper]] = ([], [])  # Lightning's optimizers, their views

    def attach(self, trainer: pl.Trainer) -> None:
        """Serve ``trainer``'s run; build the logger and visualizer before ``before_run``, as the Runner does."""
        self.trainer = trainer
        self._resume = False
        self._model, self._model_prefix = find_model(trainer.lightning_module, self._model_path)
        self.train_loop = train_loop(self, self.by_epoch)
        self.epoch = 0 if self._iter_based else trainer.current_epoch  # IterBasedTrainLoop's epoch stays 0
        if self._logger is None:
            self._share_timestamp()
            self._follow_log_dir()
            self._dump_config()
        self._logger = self._logger or self.logger
        self._hand_metainfo(trainer)

    def _dump_config(self) -> None:
        """As the Runner: ``cfg`` to the visualizer (``vis_data/config.py``) and, on rank 0, to
        ``{work_dir}/{its file name}``, or ``{work_dir}/{timestamp}.py`` (``Runner.dump_config``)."""
        if self.cfg:
            self._visualizer.add_config(self.cfg)
        if self.rank == 0:
            filename = os.path.basename(self.cfg.filename) if self.cfg.filename is not None else f"{self.timestamp}.py"
            os.makedirs(self.work_dir, exist_ok=True)
            self.cfg.dump(os.path.join(self.work_dir, filename))

    def _share_timestamp(self) -> None:
        """Rank 0's timestamp on every rank (one ``log_dir``), broadcast as ``Runner.setup_env`` does."""
        from mmengine.dist import broadcast, is_distributed

        if not is_distributed():
            return
        stamp = torch.tensor(time.mktime(time.strptime(self.timestamp, "%Y%m%d_%H%M%S")), dtype=torch.float64)
        broadcast(stamp)
        self.timestamp = time.strftime("%Y%m%d_%H%M%S", time.localtime(stamp.item()))
        self.experiment_name = self._experiment_name or self.timestamp

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
            self._logger.addFilter(UPSTREAM_NOTICES)
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
        ``log_dir``; backends create their folder when they first write."""
        old, new = os.path.join(self._vis_log_dir, "vis_data"), os.path.join(self.log_dir, "vis_data")
        for backend in getattr(self._visualizer, "_vis_backends", {}).values():
            if not getattr(backend, "_env_initialized", True) and getattr(backend, "_save_dir", None) == old:
                backend._save_dir = new
        self._vis_log_dir = self.log_dir

    def _build_visualizer(self, visualizer: dict | Visualizer | None) -> Visualizer:
        """``Runner.build_visualizer``: an instance as given, a config through ``VISUALIZERS``, else a local one."""
        if isinstance(visualizer, Visualizer):
            return visualizer
        if visualizer is None:
            return Visualizer.get_instance(
                self._instance_name, vis_backends=[dict(type="LocalVisBackend")], save_dir=self.log_dir
            )
        if not isinstance(visualizer, dict):
            raise TypeError(
                f"MMEngineAdapter(visualizer=...) takes a config dict (dict(type='Visualizer', "
                f"vis_backends=[dict(type='LocalVisBackend')])) or a Visualizer instance, got {type(visualizer).__name__}"
            )
        config = dict(visualizer)
        config.setdefault("name", self._instance_name)
        config.setdefault("save_dir", self.log_dir)
        return VISUALIZERS.build(config)

    def _hand_metainfo(self, trainer: pl.Trainer) -> None:
        """Give the visualizer each dataset's ``metainfo``, in the order MMEngine builds the run's loops, and the
        val/test evaluator (the LightningModule's, see ``val_evaluator``) its dataset's, as ``ValLoop`` and
        ``TestLoop`` do when they are built."""
        stages = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",)}.get(trainer.state.fn, ())
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
        """The OpenMMLab model the LightningModule holds (see :func:`find_model`); else the LightningModule, or the
        DDP wrapper around it when the strategy wrapped it."""
        if self._model is not None:
            return self._model
        return self.trainer.strategy.model if self.trainer is not None else None

    @_PerTrainEpoch
    def optim_wrapper(self) -> OptimWrapper | OptimWrapperDict:
        """An ``OptimWrapper`` view of Lightning's optimizer (``OptimWrapperDict`` when there are several)."""
        optimizers = self.trainer.optimizers if self.trainer is not None else []
        if not optimizers:
            raise AttributeError("runner.optim_wrapper: the Lightning trainer has no optimizer (yet)")
        # the wrappers stay the same objects while Lightning's optimizers do (hooks may keep them)
        source, cached = self._optim_wrappers
        if source != optimizers:
            source, cached = self._optim_wrappers = (list(optimizers), [OptimWrapper(o) for o in optimizers])
        if len(cached) == 1:
            return cached[0]
        return OptimWrapperDict(**{f"optimizer{i}": w for i, w in enumerate(cached)})

    # ------------------------------------------------------------------------------------------------ limits
    @property
    def max_epochs(self) -> int:
        """Train epochs of the run: ``Trainer(max_epochs)``, or the passes over the data that ``max_steps`` allows when
        it ends the run first (1, as MMEngine's ``IterBasedTrainLoop`` reports, when the loader has no length)."""
        trainer = self.trainer
        if self._iter_based:
            return 1  # IterBasedTrainLoop's max_epochs: the whole run is one epoch
        if trainer is None:
            return 0
        if trainer.max_steps < 0:
            return trainer.max_epochs
        batches = self._train_batches()
        if batches in (0, float("inf")):
            return trainer.max_epochs if trainer.max_epochs > 0 else 1
        return math.ceil(self.max_iters / batches)

    @_PerTrainEpoch
    def max_iters(self) -> int:
        """Train iterations (batches) of the whole run, as MMEngine counts them: ``max_epochs`` or ``max_steps``,
        whichever ends the run first; ``train_cfg``'s ``max_iters`` when iteration-based."""
        trainer = self.trainer
        if self._iter_based:
            return self._loop_cfg.max_iters
        if trainer is None:
            return 0
        batches = self._train_batches()
        if trainer.max_steps < 0:
            return int(trainer.max_epochs * batches)
        by_steps = trainer.max_steps * trainer.accumulate_grad_batches
        if trainer.max_epochs < 0 or batches == float("inf"):
            return by_steps
        return min(by_steps, trainer.max_epochs * batches)

    def _train_batches(self) -> int | float:
        trainer = self.trainer
        if trainer.num_training_batches == float("inf") and trainer.state.fn == "fit":
            # hooks read the limits in before_run, before Lightning sized the loader
            lightning_api.setup_train_data(trainer)
        return trainer.num_training_batches

    # ------------------------------------------------------------------------------------------ dataloaders
    @_PerTrainEpoch
    def train_dataloader(self) -> Any:
        """The loader Lightning trains on (iteration-based: the loader, not the endless view Lightning iterates)."""
        trainer = self.trainer
        source = lightning_api.train_data_source(trainer)
        if isinstance(source, EndlessSource):  # iteration-based: the loader, not the endless view Lightning iterates
            return source.loader
        if trainer.train_dataloader is None and trainer.state.fn == "fit":
            # asked for before Lightning sized the loader (before_run, on_fit_start)
            lightning_api.setup_train_data(trainer)
        return trainer.train_dataloader

    def set_train_dataloader(self, loader: Any) -> None:
        """``runner.train_loop.dataloader = loader``: train on ``loader`` from where MMEngine's epoch-based loop would.

        The loop iterates ``train_loop.dataloader`` after ``before_train_epoch``, so an assignment in that mount point
        trains the same epoch on the new loader; one anywhere else takes effect at the next epoch. Lightning gets
        the loader as its train data source and rebuilds its train data (distributed sampler, batch count, validation
        schedule) as ``Trainer(reload_dataloaders_every_n_epochs)`` does.
        """
        trainer = self.trainer
        if trainer is None or trainer.state.fn != "fit":
            raise RuntimeError(
                "runner.train_loop.dataloader = ...: assign the train dataloader while trainer.fit runs (a train hook); "
                "outside fit, pass the loader to trainer.fit(...)"
            )
        # inside before_train_epoch this epoch's batches are still to come; elsewhere the next epoch takes it
        if self.train_loop.epoch_values is not None:
            self.train_loop.epoch_values.clear()  # the new loader's length
        lightning_api.replace_train_loader(trainer, loader, now=lightning_api.train_epoch_pending(trainer))

    @property
    def val_dataloader(self) -> Any:
        trainer = self.trainer
        if trainer.val_dataloaders is None and trainer.state.fn == "fit" and trainer.enable_validation:
            # asked for before Lightning loaded it (before_run): load it as the fit loop's start would
            stage = trainer.state.stage
            trainer.validating = True
            lightning_api.setup_fit_val_data(trainer)
            trainer.state.stage = stage
        return _first(trainer.val_dataloaders)

    @property
    def test_dataloader(self) -> Any:
        return _first(self.trainer.test_dataloaders)

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
        if self.trainer is not None and self.trainer.fast_dev_run:
            rank_zero_warn(
                f"runner.save_checkpoint({out_dir!r}, {filename!r}) writes nothing under "
                f"Trainer(fast_dev_run={self.trainer.fast_dev_run}), which suppresses checkpointing (a hook called it). "
                "Run without fast_dev_run to save checkpoints."
            )
            return
        meta = dict(meta or {})
        if by_epoch:
            meta.setdefault("epoch", self.epoch + 1)
            meta.setdefault("iter", self.iter)
        else:
            meta.setdefault("epoch", self.epoch)
            meta.setdefault("iter", self.iter + 1)
        self._pending_save = {"meta": meta, "optimizer": save_optimizer, "param_schedulers": save_param_scheduler}
        try:
            # a full checkpoint: before_save_checkpoint hooks (EMAHook) only run on those; written atomically and
            # durably unless the Trainer has a CheckpointIO of the user's
            with durable_checkpoint_io(self.trainer):
                self.trainer.save_checkpoint(os.path.join(out_dir, filename), weights_only=False)
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
        from mmengine.runner.checkpoint import _load_checkpoint, _load_checkpoint_to_model

        if os.path.isfile(filename):
            checkpoint = load_checkpoint_file(filename, owner="runner.load_checkpoint", map_location=map_location,
                                              weights_only=weights_only)  # fmt: skip
        else:
            checkpoint = _load_checkpoint(filename, map_location=map_location)
        self._adapter.fire(LOAD_CHECKPOINT, checkpoint=checkpoint)
        model = self.model.module if hasattr(self.model, "module") else self.model
        return _load_checkpoint_to_model(model, checkpoint, strict)

    def mmengine_checkpoint(self, checkpoint: dict[str, Any], saved: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Add MMEngine's checkpoint layout to Lightning's ``checkpoint`` dict, in place, sharing its tensors, and the
        ``message_hub`` / ``param_schedulers`` states ``saved`` already holds (the adapter's, written once)."""
        saved = saved or {}
        import mmengine

        pending = self._pending_save or {"meta": {"epoch": self.epoch, "iter": self.iter}, "optimizer": True,
                                         "param_schedulers": True}
        meta = dict(pending["meta"])
        meta.update(
            cfg=self.cfg.pretty_text,
            seed=self.seed,
            experiment_name=self.experiment_name,
            time=time.strftime("%Y%m%d_%H%M%S", time.localtime()),
            mmengine_version=mmengine.__version__,
        )
        checkpoint["meta"] = meta
        checkpoint["message_hub"] = saved.get("message_hub") or hub_state(self.message_hub)
        if self._pending_save is not None:  # a file of runner.save_checkpoint (CheckpointHook): MMEngine's keys
            self._to_model_keys(checkpoint)
        states = checkpoint.get("optimizer_states")
        if pending["optimizer"] and states:
            checkpoint["optimizer"] = states[0] if len(states) == 1 else {f"optimizer{i}": s for i, s in enumerate(states)}
        elif not pending["optimizer"]:
            checkpoint.pop("optimizer_states", None)
        if pending["param_schedulers"] and self._built_schedulers():
            checkpoint["param_schedulers"] = saved.get("param_schedulers") or [
                plain(s.state_dict()) for s in self._built_schedulers()
            ]
        return checkpoint

    def _to_model_keys(self, checkpoint: dict[str, Any]) -> None:
        """``state_dict`` keyed as the Runner writes it, the model's own keys (so MMEngine, ``load_from`` and
        OpenMMLab's tools load the file); the LightningModule's other entries go to :data:`OUTSIDE_MODEL`."""
        prefix = self._model_prefix
        if not prefix:
            return
        state = checkpoint["state_dict"]
        checkpoint["state_dict"] = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        outside = {k: v for k, v in state.items() if not k.startswith(prefix)}
        checkpoint[OUTSIDE_MODEL] = {"model_prefix": prefix, "state_dict": outside}

    def _built_schedulers(self) -> list[Any]:
        schedulers = self.param_schedulers
        if not schedulers:
            return []
        if isinstance(schedulers, dict):
            return [s for group in schedulers.values() for s in group]
        return [s for s in schedulers if hasattr(s, "state_dict")]

    def build_param_schedulers(self) -> None:
        """Build scheduler configs on this fit's optimizer view, as ``Runner.build_param_scheduler`` does."""
        from mmengine.optim.scheduler import _ParamScheduler
        from mmengine.registry import PARAM_SCHEDULERS

        configs = self._scheduler_configs
        if configs is None:
            return
        items = configs if isinstance(configs, (list, tuple)) else [configs]
        built = []
        for item in items:
            if isinstance(item, _ParamScheduler):
                built.append(item)
                continue
            cfg = dict(item)
            cfg.setdefault("end", self.max_epochs if cfg.get("by_epoch", True) else self.max_iters)
            try:
                built.append(
                    PARAM_SCHEDULERS.build(
                        cfg, default_args=dict(optimizer=self.optim_wrapper, epoch_length=len(self.train_dataloader))
                    )
                )
            except Exception as err:
                trainer = self.trainer
                note = f"[lightning-hooks] MMEngineAdapter(param_schedulers=...) could not build {item!r}"
                if "end" not in item and cfg["end"] <= cfg.get("begin", 0):  # the end this facade filled in
                    note += (
                        f" (end={cfg['end']}). A config without 'end' ends at runner.max_epochs (by_epoch) or "
                        f"runner.max_iters, here {self.max_epochs} and {self.max_iters}, from "
                        f"Trainer(max_epochs={trainer.max_epochs}, max_steps={trainer.max_steps}): bound the Trainer "
                        "with max_epochs or max_steps, or set 'begin' and 'end' in the config"
                    )
                err.add_note(note + ".")
                raise
        self.param_schedulers = built
        wrapper = self.optim_wrapper
        if isinstance(wrapper, OptimWrapper) and hasattr(wrapper, "_global_step"):
            # schedulers count OptimWrapper.step calls to check the step order; Lightning steps the torch optimizer
            wrapper.optimizer.register_step_post_hook(lambda *_: setattr(wrapper, "_global_step", wrapper._global_step + 1))


#: checkpoint key of what :meth:`Runner.mmengine_checkpoint` moved out of ``state_dict``: the model's prefix in the
#: LightningModule and the LightningModule's entries outside the model
OUTSIDE_MODEL = "lightning_hooks_outside_model"


def to_lightning_keys(checkpoint: dict[str, Any]) -> None:
    """Undo :meth:`Runner._to_model_keys` in a checkpoint Lightning is about to load into the LightningModule."""
    layout = checkpoint.pop(OUTSIDE_MODEL, None)
    if layout is not None:
        prefix = layout["model_prefix"]
        checkpoint["state_dict"] = {**{prefix + k: v for k, v in checkpoint["state_dict"].items()}, **layout["state_dict"]}


def find_model(pl_module: torch.nn.Module, path: str | None) -> tuple[torch.nn.Module | None, str]:
    """The model hooks see as ``runner.model`` and its key prefix in ``pl_module.state_dict()``.

    ``path`` names it (``"model"``, ``"detector.model"``; ``""``: the LightningModule). Without one, it is the
    LightningModule when that is an ``mmengine.model.BaseModel``, else the one outermost ``BaseModel`` it holds; with
    none, the LightningModule (None here). Several outermost ones are ambiguous and raise."""
    from mmengine.model import BaseModel

    if path is not None:
        try:
            module = pl_module.get_submodule(path)
        except AttributeError as err:
            raise AttributeError(
                f"MMEngineAdapter(model={path!r}): {type(pl_module).__qualname__} has no submodule {path!r} ({err}). "
                "Name the attribute that holds your OpenMMLab model, e.g. model='model'."
            ) from None
        return (None, "") if module is pl_module else (module, path + ".")
    if isinstance(pl_module, BaseModel):
        return None, ""
    outermost: list[tuple[str, torch.nn.Module]] = []
    for name, module in pl_module.named_modules():  # parents come before their children
        if isinstance(module, BaseModel) and not any(name.startswith(outer + ".") for outer, _ in outermost):
            outermost.append((name, module))
    if len(outermost) > 1:
        names = ", ".join(repr(name) for name, _ in outermost)
        raise ValueError(
            f"MMEngineAdapter: {type(pl_module).__qualname__} holds several MMEngine models ({names}); name the one "
            f"hooks see as runner.model with MMEngineAdapter(..., model={outermost[0][0]!r}), or model='' for the "
            "LightningModule itself."
        )
    return (outermost[0][1], outermost[0][0] + ".") if outermost else (None, "")


def hub_state(hub: MessageHub) -> dict[str, Any]:
    """``hub.state_dict()`` in tensors and plain containers, so ``torch.load(weights_only=True)`` reads it.

    Each ``HistoryBuffer`` becomes ``{"log_history": tensor, "count_history": tensor, "max_length": int}``;
    :func:`load_hub_state` rebuilds it. (MMEngine's own ``MessageHub.load_state_dict`` skips such entries with a
    warning and restores only the runtime info.)
    """
    state = hub.state_dict()
    scalars = {
        key: {"log_history": plain(buf._log_history), "count_history": plain(buf._count_history),
              "max_length": buf.max_length}
        for key, buf in state["log_scalars"].items()
    }  # fmt: skip
    return {"log_scalars": scalars, "runtime_info": plain(state["runtime_info"]), "resumed_keys": dict(state["resumed_keys"])}


def load_hub_state(hub: MessageHub, state: dict[str, Any]) -> None:
    """Restore :func:`hub_state` (or a ``MessageHub.state_dict()`` of MMEngine objects) into ``hub``."""
    scalars = {
        key: HistoryBuffer(buf["log_history"].numpy(), buf["count_history"].numpy(), buf["max_length"])
        if isinstance(buf, dict) else buf
        for key, buf in state["log_scalars"].items()
    }  # fmt: skip
    hub.load_state_dict({**state, "log_scalars": scalars})


def _check_scheduler_configs(configs: Any) -> None:
    """Refuse, when the adapter is built, a scheduler config with a keyword its class does not take (``milestone``)."""
    from mmengine.registry import PARAM_SCHEDULERS

    for item in configs if isinstance(configs, (list, tuple)) else [configs]:
        if not isinstance(item, Mapping) or not isinstance(item.get("type"), (str, type)):
            continue
        cls = PARAM_SCHEDULERS.get(item["type"]) if isinstance(item["type"], str) else item["type"]
        if cls is None:
            known = PARAM_SCHEDULERS.module_dict
            raise KeyError(f"MMEngineAdapter(param_schedulers=...): {unknown_name('scheduler type', item['type'], known)}")
        accepted = _init_keywords(cls)
        if accepted is None:
            continue
        accepted -= {"self", "optimizer", "epoch_length"}
        unknown = [k for k in item if k not in accepted | {"type", "convert_to_iter_based", "_scope_"}]
        if unknown:
            raise TypeError(
                f"MMEngineAdapter(param_schedulers=...): {dict(item)!r}: "
                f"{unknown_name(f'{cls.__name__} argument', unknown[0], accepted)}"
            )


def _init_keywords(cls: type) -> set[str] | None:
    """The keywords ``cls(...)`` accepts, following ``**kwargs`` up the MRO (mixins); None if it takes any."""
    import inspect

    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass) or klass is object:
            continue
        params = inspect.signature(klass.__init__).parameters
        names |= {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return names
    return None


def _first(loaders: Any) -> Any:
    return loaders[0] if isinstance(loaders, (list, tuple)) else loaders



def _build_log_processor(config: dict | None) -> LogProcessor:
    """``Runner.build_log_processor``: a config with ``type`` through ``LOG_PROCESSORS``, else a ``LogProcessor``."""
    from mmengine.registry import LOG_PROCESSORS

    config = dict(config or {})
    config.setdefault("type", "LogProcessor")
    processor = LOG_PROCESSORS.build(config)
    if not isinstance(processor, LogProcessor):
        raise TypeError(
            f"MMEngineAdapter(log_processor=...): {config['type']!r} built {type(processor).__name__}, not an "
            "mmengine LogProcessor (LoggerHook calls its get_log_after_iter/get_log_after_epoch)."
        )
    return processor
