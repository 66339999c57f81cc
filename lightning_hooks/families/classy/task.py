"""The ``task`` facade Classy Vision and VISSL hooks receive, and its helper objects (meters, optimizer, last batch)."""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_hooks.core.facade import Facade


@dataclass
class LastBatch:
    """Classy's ``LastBatchInfo`` plus VISSL's ``model_output``: what the last step saw and produced.

    ``sample`` is the batch exactly as the step received it; ``output`` is the step's ``output`` (falls back to the
    module's forward output); ``loss`` is the undivided loss of the step, detached.
    """

    sample: Any
    loss: torch.Tensor | None = None
    output: Any = None
    target: Any = None
    model_output: Any = None
    step_data: dict[str, Any] = field(default_factory=dict)


class OptionsView:
    """Classy's ``optimizer.options_view``: ``options_view.lr`` reads the option from the param groups.

    One distinct value gives that value, several give the list of distinct values, none raises AttributeError.
    ``used`` maps an optimizer to the options its last step ran with while ``on_step`` fires: Lightning steps the
    schedulers before ``on_train_batch_end``, Classy sets the options inside ``optimizer.step``.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, used: Mapping[Any, list[dict[str, Any]]]) -> None:
        self._optimizer = optimizer
        self._used = used

    def __getattr__(self, name: str) -> Any:
        values: list[Any] = []
        for group in self._used.get(self._optimizer, self._optimizer.param_groups):
            if name in group and group[name] not in values:
                values.append(group[name])
        if not values:
            raise AttributeError(f"no param group of {type(self._optimizer).__name__} has the option {name!r}")
        return values[0] if len(values) == 1 else values


class Optimizer:
    """Classy's ``ClassyOptimizer`` as hooks use it: ``options_view``, ``optimizer`` and the torch optimizer's API."""

    def __init__(self, optimizer: torch.optim.Optimizer, used: Mapping[Any, list[dict[str, Any]]]) -> None:
        self.optimizer = optimizer
        self.options_view = OptionsView(optimizer, used)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)


class MetricMeter:
    """A torchmetrics ``Metric`` behind Classy's meter interface (``name``, ``value`` dict, ``reset``, ``sync_state``).

    ``value`` is computed from the local state; ``sync_state()`` all-gathers the state across ranks (a collective,
    called on every rank at phase end as Classy does) and ``value`` then reflects the global state until ``reset``.

    Example::

        meter = MetricMeter("accuracy", torchmetrics.classification.MulticlassAccuracy(num_classes=3))
    """

    def __init__(self, name: str, metric: Any) -> None:
        self._name = name
        self.metric = metric
        metric.sync_on_compute = False
        metric._to_sync = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def value(self) -> dict[str, Any]:
        """The metric's value; before the first update, its value on the empty state (Classy's meters give zeros),
        or ``{}`` for a metric that cannot compute without samples."""
        if self.metric.update_called:
            result = self.metric.compute()
        else:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*was called before the ``update`` method")
                try:
                    result = self.metric.compute()
                except ValueError:  # "No samples to concatenate"
                    return {}
        if isinstance(result, Mapping):
            return {str(k): _number(v) for k, v in result.items()}
        return {self._name: _number(result)}

    def update(self, output: Any, target: Any) -> None:
        self.metric.update(output, target)

    def reset(self) -> None:
        if self.metric._is_synced:
            self.metric.unsync()
        self.metric.reset()

    def sync_state(self) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized() and not self.metric._is_synced:
            self.metric.sync()
            self.metric._computed = None

    def get_classy_state(self) -> dict[str, Any]:
        """The metric's accumulated state (tensors and lists of tensors) and its update count."""
        states = {name: _clone(getattr(self.metric, name)) for name in self.metric._defaults}
        return {"states": states, "update_count": self.metric._update_count}

    def set_classy_state(self, state: dict[str, Any]) -> None:
        self.reset()
        device = self.metric.device
        for name, value in state["states"].items():
            setattr(self.metric, name, [v.to(device) for v in value] if isinstance(value, list) else value.to(device))
        self.metric._update_count = state["update_count"]

    def __repr__(self) -> str:
        return f"{type(self.metric).__name__}({self._name}={self.value})"


def _clone(value: Any) -> Any:
    return [v.detach().clone() for v in value] if isinstance(value, list) else value.detach().clone()


def _batch_size(sample: Any) -> int:
    """The first dimension of the first tensor found in the sample (1 when there is none)."""
    while isinstance(sample, (list, tuple, Mapping)):
        sample = next(iter(sample.values())) if isinstance(sample, Mapping) else sample[0]
    return int(sample.shape[0]) if isinstance(sample, torch.Tensor) else 1


def _number(value: Any) -> Any:
    """A one-element tensor as a Python number, a larger one as a list."""
    if isinstance(value, torch.Tensor):
        return value.item() if value.numel() == 1 else value.tolist()
    return value


class SizedIterator:
    """An iterator over a fresh pass of a dataloader that also has ``len`` (PreciseBatchNormHook needs both)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._it: Iterator[Any] = iter(loader)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> SizedIterator:
        return self

    def __next__(self) -> Any:
        return next(self._it)


class Task(Facade):
    """Classy's ``ClassificationTask`` (and VISSL's ``SelfSupervisionTask``) as their hooks see it.

    Phase counters follow Classy: ``phase_idx`` counts train and test phases together, ``train_phase_idx`` the train
    phases, ``eval_phase_idx = phase_idx - train_phase_idx - 1``. VISSL's ``iteration`` counts train steps,
    ``local_iteration_num`` counts phase starts and batches of every phase (-1 before the first, never reset, as
    VISSL's trainer loop), ``batches`` the batches of the current phase. ``num_updates`` grows by the global batch
    size after each train step's ``on_update``.

    Example::

        adapter = ClassyAdapter([hook], meters={"acc": MulticlassAccuracy(num_classes=3)})
        adapter.task.phase_idx  # -1 until the first phase starts
    """

    host = "task"

    def __init__(
        self,
        meters: Mapping[str, Any] | None = None,
        config: Any = None,
        checkpoint_folder: str | None = None,
        loss: Any = None,
    ) -> None:
        self.trainer: pl.Trainer | None = None
        self.hooks: list[Any] = []
        self.meters = [MetricMeter(name, metric) for name, metric in (meters or {}).items()]
        if config is not None:
            self.config = config
        if checkpoint_folder is not None:
            self.checkpoint_folder = checkpoint_folder
        if loss is not None:
            self.loss = loss
        self.metrics: dict[str, list[Any]] = {}
        self.dataloader: Any = None
        self.data_iterator: SizedIterator | None = None
        self._optimizer: Optimizer | None = None
        self.used_options: dict[torch.optim.Optimizer, list[dict[str, Any]]] = {}
        self.new_run()

    def new_run(self) -> None:
        """The counters, losses, meters and timings of a task that has not run yet (each ``fit`` is a new run)."""
        self.train = True
        self.phase_idx = -1
        self.train_phase_idx = -1
        self.num_updates = 0
        self.iteration = 0
        self.local_iteration_num = -1
        self.batches = 0
        self.batch_time: list[float] = []
        self.losses: list[float] = []
        self.last_batch: LastBatch | None = None
        self.phase_start_time = self.phase_start_time_train = time.perf_counter()
        self.perf_log: list[dict[str, Any]] = []
        for meter in self.meters:
            meter.reset()

    # ------------------------------------------------------------------------------------------------- models
    @property
    def base_model(self) -> pl.LightningModule:
        """The LightningModule itself."""
        return self._lightning_trainer().lightning_module

    @property
    def model(self) -> torch.nn.Module:
        """The LightningModule, or its DDP wrapper when distributed."""
        return self._lightning_trainer().strategy.model

    @property
    def distributed_model(self) -> torch.nn.Module:
        return self.model

    @property
    def device(self) -> torch.device:
        return self.base_model.device

    @property
    def use_gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def amp_args(self) -> dict[str, Any] | None:
        """``None`` without mixed precision, else Classy's PyTorch-AMP form."""
        precision = str(self._lightning_trainer().precision)
        return {"amp_type": "pytorch", "precision": precision} if "mixed" in precision else None

    @property
    def optimizer(self) -> Optimizer:
        optimizers = self._lightning_trainer().optimizers
        if not optimizers:
            raise RuntimeError("task.optimizer: the LightningModule has no optimizer (configure_optimizers)")
        if self._optimizer is None or self._optimizer.optimizer is not optimizers[0]:
            self._optimizer = Optimizer(optimizers[0], self.used_options)
        return self._optimizer

    # ------------------------------------------------------------------------------------------------- phases
    @property
    def phase_type(self) -> str:
        return "train" if self.train else "test"

    @property
    def eval_phase_idx(self) -> int:
        return self.phase_idx - self.train_phase_idx - 1

    @property
    def num_train_phases(self) -> int:
        trainer = self._lightning_trainer()
        if trainer.max_epochs is not None and trainer.max_epochs >= 0:
            return trainer.max_epochs
        return math.ceil(trainer.max_steps / max(trainer.num_training_batches, 1))

    @property
    def test_only(self) -> bool:
        return self._lightning_trainer().state.fn != "fit"

    @property
    def num_batches_per_phase(self) -> int:
        trainer = self._lightning_trainer()
        if self.train:
            return int(trainer.num_training_batches)
        counts = trainer.num_test_batches if trainer.testing else trainer.num_val_batches
        return int(sum(counts))

    @property
    def max_iteration(self) -> int:
        return self.num_train_phases * int(self._lightning_trainer().num_training_batches)

    @property
    def where(self) -> float:
        """Fraction of training done, as Classy's ``task.where``; 0.0 outside ``fit``, as in Classy's test-only mode."""
        trainer = self._lightning_trainer()
        if self.test_only:
            return 0.0
        total = trainer.estimated_stepping_batches
        return min(trainer.global_step / total, 1.0) if total and math.isfinite(total) else 0.0

    def start_phase(self, train: bool, resumed: bool = False) -> None:
        """Classy's ``advance_phase``: counters, losses and meters reset.

        ``resumed``: reopen the phase a mid-phase checkpoint was written in; its counters, losses and meter states
        come from the checkpoint.
        """
        self.train = train
        self.last_batch = None
        self.batch_time = []
        self.phase_start_time = time.perf_counter()
        if resumed:
            return
        self.phase_idx += 1
        self.train_phase_idx += int(train)
        self.losses = []
        self.local_iteration_num += 1
        self.batches = 0
        for meter in self.meters:
            meter.reset()

    # ----------------------------------------------------------------------------------------------------- data
    def get_global_batchsize(self) -> int:
        """Classy's: the phase loader's ``batch_size`` (the last sample's size without one) times the world size."""
        size = getattr(self._current_loader(), "batch_size", None)
        if size is None:
            size = _batch_size(self.last_batch.sample) if self.last_batch is not None else 0
        return size * self._lightning_trainer().world_size

    def log_phase_end(self, tag: str) -> None:
        """Classy's ``log_phase_end``: append the phase's images per second under ``tag`` to ``perf_log``."""
        start = self.phase_start_time_train if tag == self.phase_type else self.phase_start_time
        im_per_sec = self.get_global_batchsize() * self.num_batches_per_phase / (time.perf_counter() - start)
        self.perf_log.append({"tag": tag, "phase_idx": self.train_phase_idx, "im_per_sec": im_per_sec})

    def get_batchsize_per_replica(self) -> int:
        loader = self.dataloader if self.dataloader is not None else self._current_loader()
        return int(loader.batch_size)

    def build_dataloaders_for_current_phase(self) -> None:
        """Point ``task.dataloader`` at the Lightning dataloader of the current phase."""
        self.dataloader = self._current_loader()

    def create_data_iterators(self) -> None:
        """A fresh, sized iterator over ``task.dataloader``; nothing is cached."""
        if self.dataloader is None:
            self.build_dataloaders_for_current_phase()
        self.data_iterator = SizedIterator(self.dataloader)

    @property
    def dataloaders(self) -> dict[str, Any]:
        """VISSL's ``task.dataloaders``: the Lightning loaders Lightning has set up, under ``"train"`` and ``"test"``
        (the validation loader inside ``fit``, the test loader in ``trainer.test``)."""
        trainer = self._lightning_trainer()
        test = trainer.test_dataloaders if trainer.testing else trainer.val_dataloaders
        loaders = {"train": trainer.train_dataloader, "test": test[0] if isinstance(test, (list, tuple)) else test}
        return {phase: loader for phase, loader in loaders.items() if loader is not None}

    def _current_loader(self) -> Any:
        trainer = self._lightning_trainer()
        if self.train:
            loader = trainer.train_dataloader
        else:
            loaders = trainer.test_dataloaders if trainer.testing else trainer.val_dataloaders
            loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        if loader is None:
            raise RuntimeError(f"task: Lightning has no {self.phase_type} dataloader for the current phase")
        return loader

    # --------------------------------------------------------------------------------------------------- state
    def get_classy_state(self, deep_copy: bool = False) -> dict[str, Any]:
        """Classy's task checkpoint dict; ``hooks`` holds every hook's state under its ``name()``."""
        trainer = self._lightning_trainer()
        state = {
            "train": self.train,
            "base_model": self.base_model.state_dict(),
            "meters": [meter.get_classy_state() for meter in self.meters],
            "optimizer": trainer.optimizers[0].state_dict() if trainer.optimizers else None,
            "phase_idx": self.phase_idx,
            "train_phase_idx": self.train_phase_idx,
            "num_updates": self.num_updates,
            "iteration": self.iteration,
            "losses": list(self.losses),
            "hooks": {hook.name(): hook.get_classy_state() for hook in self.hooks},
            "loss": {},
        }
        return copy.deepcopy(state) if deep_copy else state

    def set_classy_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_classy_state` returned (model, optimizer, meters, counters, hook states)."""
        trainer = self._lightning_trainer()
        self.train = state["train"]
        self.base_model.load_state_dict(state["base_model"])
        if state.get("optimizer") is not None and trainer.optimizers:
            trainer.optimizers[0].load_state_dict(state["optimizer"])
        for meter, meter_state in zip(self.meters, state.get("meters", [])):
            meter.set_classy_state(meter_state)
        self.load_counters(state)
        self.losses = list(state.get("losses", []))
        for hook in self.hooks:
            if hook.name() in state.get("hooks", {}):
                hook.set_classy_state(state["hooks"][hook.name()])

    def counters(self) -> dict[str, int]:
        return {
            "phase_idx": self.phase_idx,
            "train_phase_idx": self.train_phase_idx,
            "num_updates": self.num_updates,
            "iteration": self.iteration,
        }

    def phase_state(self) -> dict[str, Any]:
        """What a mid-phase checkpoint needs to reopen the phase: counters, losses, batches and meter states."""
        return {
            **self.counters(),
            "local_iteration_num": self.local_iteration_num,
            "batches": self.batches,
            "losses": list(self.losses),
            "meters": [meter.get_classy_state() for meter in self.meters],
        }

    def load_phase_state(self, state: Mapping[str, Any]) -> None:
        self.load_counters(state)
        self.local_iteration_num = state.get("local_iteration_num", -1)
        self.batches = state.get("batches", 0)
        self.losses = list(state.get("losses", []))
        for meter, meter_state in zip(self.meters, state.get("meters", [])):
            meter.set_classy_state(meter_state)

    def load_counters(self, state: Mapping[str, Any]) -> None:
        self.phase_idx = state.get("phase_idx", -1)
        self.train_phase_idx = state.get("train_phase_idx", -1)
        self.num_updates = state.get("num_updates", 0)
        self.iteration = state.get("iteration", 0)

    # ---------------------------------------------------------------------------------------------------- VISSL
    def run_hooks(self, name: str) -> None:
        """VISSL's ``task.run_hooks``: call ``name`` on every hook that has it, in hook order."""
        for hook in self.hooks:
            fn = getattr(hook, name, None)
            if fn is not None:
                fn(self)

    def _lightning_trainer(self) -> pl.Trainer:
        if self.trainer is None:
            raise RuntimeError("task: the adapter is not attached to a Trainer yet (Lightning's setup has not run)")
        return self.trainer

    def __repr__(self) -> str:
        return f"Task(phase_type={self.phase_type!r}, phase_idx={self.phase_idx}, meters={self.meters})"
