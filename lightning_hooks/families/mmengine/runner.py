"""The ``runner`` facade MMEngine hooks receive: MMEngine's ``Runner`` surface, backed by a Lightning trainer."""

from __future__ import annotations

import itertools
import logging
import math
import os
import time
from typing import Any

import lightning.pytorch as pl
import torch
from mmengine.config import Config
from mmengine.logging import HistoryBuffer, MessageHub, MMLogger
from mmengine.optim import OptimWrapper, OptimWrapperDict
from mmengine.runner import LogProcessor
from mmengine.visualization import Visualizer

from lightning_hooks.console import DropMessages, route_console
from lightning_hooks.core.facade import Facade, WorkDir
from lightning_hooks.core.safety import plain
from lightning_hooks.families.mmengine.events import LOAD_CHECKPOINT

_instances = itertools.count()


# MMEngine's own CheckpointHook and LoggerHook build a FileClient on every run ("kept until MMEngine 1.0"), which
# warns that FileClient and HardDiskBackend are deprecated: nothing a user can change, so these two are dropped.
UPSTREAM_NOTICES = DropMessages('"FileClient" will be deprecated', '"HardDiskBackend" is the alias of "LocalBackend"')


class _Loop:
    """``runner.val_loop`` / ``runner.test_loop``: what hooks and ``LogProcessor`` read from a loop."""

    def __init__(self, runner: Runner, stage: str) -> None:
        self._runner = runner
        self._stage = stage

    @property
    def dataloader(self) -> Any:
        return getattr(self._runner, f"{self._stage}_dataloader")


class TrainLoop(_Loop):
    """``runner.train_loop``: dataloader, limits, counters, and ``stop_training``, which stops the Lightning trainer
    between epochs as MMEngine's ``EpochBasedTrainLoop`` does: set inside a train epoch, Lightning stops after it."""

    def __init__(self, runner: Runner) -> None:
        super().__init__(runner, "train")
        self.in_epoch = False  # a train epoch started and has not ended yet
        self._stop = False

    @property
    def max_iters(self) -> int:
        return self._runner.max_iters

    @property
    def max_epochs(self) -> int:
        return self._runner.max_epochs

    @property
    def iter(self) -> int:
        return self._runner.iter

    @property
    def epoch(self) -> int:
        return self._runner.epoch

    @property
    def stop_training(self) -> bool:
        trainer = self._runner.trainer
        return self._stop or (trainer is not None and trainer.should_stop)

    @stop_training.setter
    def stop_training(self, value: bool) -> None:
        self._stop = bool(value)
        if not self.in_epoch:
            self._apply_stop()

    def end_epoch(self) -> None:
        """The train epoch ended: a stop requested during it stops Lightning now (after the epoch's validation)."""
        self.in_epoch = False
        self._apply_stop()

    def _apply_stop(self) -> None:
        if self._stop and self._runner.trainer is not None:
            self._runner.trainer.should_stop = True


class Runner(Facade):
    """MMEngine's ``Runner`` as its hooks see it, backed by a Lightning trainer.

    ``iter`` is the 0-based index of the current train iteration inside iter hooks and the number of finished
    iterations elsewhere; ``epoch`` is the current epoch in train hooks and epoch + 1 during the validation that
    follows it. ``message_hub`` is a real ``MessageHub`` (one per facade), ``logger`` an ``MMLogger`` writing
    ``{log_dir}/{timestamp}.log``, ``visualizer`` a ``Visualizer`` with a local backend under ``log_dir``.

    Example::

        adapter = MMEngineAdapter([EMAHook()], work_dir="work")
        adapter.runner.message_hub.get_scalar("train/loss").current()  # after some training
    """

    host = "runner"

    def __init__(
        self,
        work_dir: str | os.PathLike | None = None,
        experiment_name: str | None = None,
        cfg: dict | Config | None = None,
        seed: int | None = None,
        log_processor: dict | LogProcessor | None = None,
        param_schedulers: Any = None,
        log_level: str = "INFO",
    ) -> None:
        self.trainer: pl.Trainer | None = None
        self._work_dir = WorkDir(work_dir, "MMEngineAdapter")
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
            self.log_processor = LogProcessor(**(log_processor or {}))
        #: mmengine schedulers or their configs; configs are built on Lightning's optimizer at each ``on_fit_start``.
        self.param_schedulers = param_schedulers
        self._scheduler_configs = param_schedulers
        self._log_level = log_level
        self._logger: MMLogger | None = None
        self._visualizer: Visualizer | None = None
        self.iter = 0
        self.epoch = 0
        self._resume = False
        self.train_loop = TrainLoop(self)
        self.val_loop = _Loop(self, "val")
        self.test_loop = _Loop(self, "test")
        self._pending_save: dict[str, Any] | None = None

    def attach(self, trainer: pl.Trainer) -> None:
        """Serve ``trainer``'s run; build the logger and visualizer before ``before_run``, as the Runner does."""
        self.trainer = trainer
        self._resume = False
        self.train_loop = TrainLoop(self)
        self.epoch = trainer.current_epoch
        if self._logger is None:
            self._share_timestamp()
        self._logger = self._logger or self.logger
        self._visualizer = self._visualizer or self.visualizer

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
        return self._work_dir.resolve(self.trainer)

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
        if self._visualizer is None:
            self._visualizer = Visualizer.get_instance(
                self._instance_name, vis_backends=[dict(type="LocalVisBackend")], save_dir=self.log_dir
            )
        return self._visualizer

    # ------------------------------------------------------------------------------------------------ model
    @property
    def model(self) -> Any:
        """The LightningModule, or the DDP wrapper around it when the strategy wrapped it."""
        return self.trainer.strategy.model if self.trainer is not None else None

    @property
    def optim_wrapper(self) -> OptimWrapper | OptimWrapperDict:
        """An ``OptimWrapper`` view of Lightning's optimizer (``OptimWrapperDict`` when there are several)."""
        optimizers = self.trainer.optimizers if self.trainer is not None else []
        if not optimizers:
            raise AttributeError("runner.optim_wrapper: the Lightning trainer has no optimizer (yet)")
        # read every iteration (RuntimeInfoHook): compare the optimizers to the cached wrappers' without new lists
        source, cached = getattr(self, "_optim_wrappers", ((), ()))
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
        if trainer is None:
            return 0
        if trainer.max_steps < 0:
            return trainer.max_epochs
        batches = self._train_batches()
        if batches in (0, float("inf")):
            return trainer.max_epochs if trainer.max_epochs > 0 else 1
        return math.ceil(self.max_iters / batches)

    @property
    def max_iters(self) -> int:
        """Train iterations (batches) of the whole run, as MMEngine counts them: ``max_epochs`` or ``max_steps``,
        whichever ends the run first."""
        trainer = self.trainer
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
            trainer.fit_loop.setup_data()  # hooks read the limits in before_run, before Lightning sized the loader
        return trainer.num_training_batches

    # ------------------------------------------------------------------------------------------ dataloaders
    @property
    def train_dataloader(self) -> Any:
        trainer = self.trainer
        if trainer.train_dataloader is None and trainer.state.fn == "fit":
            trainer.fit_loop.setup_data()  # asked for before Lightning sized the loader (before_run, on_fit_start)
        return trainer.train_dataloader

    @property
    def val_dataloader(self) -> Any:
        return _first(self.trainer.val_dataloaders)

    @property
    def test_dataloader(self) -> Any:
        return _first(self.trainer.test_dataloaders)

    @property
    def _train_loop(self) -> TrainLoop | None:
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
        meta = dict(meta or {})
        if by_epoch:
            meta.setdefault("epoch", self.epoch + 1)
            meta.setdefault("iter", self.iter)
        else:
            meta.setdefault("epoch", self.epoch)
            meta.setdefault("iter", self.iter + 1)
        self._pending_save = {"meta": meta, "optimizer": save_optimizer, "param_schedulers": save_param_scheduler}
        try:
            # a full checkpoint: before_save_checkpoint hooks (EMAHook) only run on those
            self.trainer.save_checkpoint(os.path.join(out_dir, filename), weights_only=False)
        finally:
            self._pending_save = None

    def load_checkpoint(self, filename: str, map_location: Any = "cpu", strict: bool = False) -> dict:
        """Load weights from ``filename`` into the model; ``after_load_checkpoint`` hooks run first, as in MMEngine.

        Local files load with ``weights_only=False`` (MMEngine checkpoints pickle MessageHub buffers, which
        mmengine 0.10's own loader cannot read under torch >= 2.6): load only checkpoints you trust.
        """
        from mmengine.runner.checkpoint import _load_checkpoint, _load_checkpoint_to_model

        if os.path.isfile(filename):
            checkpoint = torch.load(filename, map_location=map_location, weights_only=False)
        else:
            checkpoint = _load_checkpoint(filename, map_location=map_location)
        self._adapter.fire(LOAD_CHECKPOINT, checkpoint=checkpoint)
        model = self.model.module if hasattr(self.model, "module") else self.model
        return _load_checkpoint_to_model(model, checkpoint, strict)

    def mmengine_checkpoint(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """Add MMEngine's checkpoint layout to Lightning's ``checkpoint`` dict, in place, sharing its tensors."""
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
        checkpoint["message_hub"] = hub_state(self.message_hub)
        states = checkpoint.get("optimizer_states")
        if pending["optimizer"] and states:
            checkpoint["optimizer"] = states[0] if len(states) == 1 else {f"optimizer{i}": s for i, s in enumerate(states)}
        elif not pending["optimizer"]:
            checkpoint.pop("optimizer_states", None)
        if pending["param_schedulers"] and self._built_schedulers():
            checkpoint["param_schedulers"] = [plain(s.state_dict()) for s in self._built_schedulers()]
        return checkpoint

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
                err.add_note(
                    f"[lightning-hooks] MMEngineAdapter(param_schedulers=...) could not build {item!r} "
                    f"(end={cfg['end']}). A config without 'end' ends at runner.max_epochs (by_epoch) or "
                    f"runner.max_iters, here {self.max_epochs} and {self.max_iters}, from "
                    f"Trainer(max_epochs={trainer.max_epochs}, max_steps={trainer.max_steps}): bound the Trainer with "
                    "max_epochs or max_steps, or set 'begin' and 'end' in the config."
                )
                raise
        self.param_schedulers = built
        wrapper = self.optim_wrapper
        if isinstance(wrapper, OptimWrapper) and hasattr(wrapper, "_global_step"):
            # schedulers count OptimWrapper.step calls to check the step order; Lightning steps the torch optimizer
            wrapper.optimizer.register_step_post_hook(lambda *_: setattr(wrapper, "_global_step", wrapper._global_step + 1))


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


def _first(loaders: Any) -> Any:
    return loaders[0] if isinstance(loaders, (list, tuple)) else loaders

