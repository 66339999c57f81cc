"""The ``task`` facade Classy Vision and VISSL hooks receive, and its helper objects (meters, optimizer, last batch)."""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from lightning_hooks.core.facade import Facade
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.classy import checkpoint, vissl
from lightning_hooks.families.classy.meters import classy_meters


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
    ``used`` maps an optimizer to the options Classy's optimizer would hold now (see :meth:`Task.options_at_phase_end`);
    an optimizer that has not stepped yet shows its param groups.
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


def param_options(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """The optimizer's param-group options (everything but the parameters)."""
    return [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]


def _batch_size(sample: Any) -> int:
    """The first dimension of the first tensor found in the sample (1 when there is none)."""
    while isinstance(sample, (list, tuple, Mapping)):
        sample = next(iter(sample.values())) if isinstance(sample, Mapping) else sample[0]
    return int(sample.shape[0]) if isinstance(sample, torch.Tensor) else 1


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
    VISSL's trainer loop), ``batches`` the batches of the run (-1 at ``on_start``; VISSL's SetDataSamplerEpochHook
    resets it per phase) and ``batch_time`` the seconds of each of them. ``num_updates`` grows by the global batch
    size after each train step's ``on_update``.

    With ``vissl`` (VISSL hooks or a VISSL config), the task is VISSL's ``SelfSupervisionTask``: ``losses`` holds
    loss x batch size, a single model output is unwrapped from its list, ``perf_stats`` gets the step's timings and
    ``get_classy_state`` uses VISSL's checkpoint layout. ``model`` names the attribute of the LightningModule that
    holds the model (``task.model`` / ``task.base_model``); by default the one child with ``trunk`` and ``heads``.

    Example::

        adapter = ClassyAdapter([hook], meters={"acc": MulticlassAccuracy(num_classes=3)})
        adapter.task.phase_idx  # -1 until the first phase starts
    """

    host = "task"

    def __init__(
        self,
        meters: Mapping[str, Any] | Sequence[Any] | None = None,
        config: Any = None,
        checkpoint_folder: str | None = None,
        loss: Any = None,
        model: str | None = None,
        vissl: bool = False,
    ) -> None:
        self.trainer: pl.Trainer | None = None
        self.vissl = vissl
        self.model_name = model
        self.model_path: str | None = None
        self.hooks: list[Any] = []
        self.meters = classy_meters(meters)
        if config is not None:
            self.config = config
        if checkpoint_folder is not None:
            self.checkpoint_folder = checkpoint_folder
        self._loss = loss
        self.metrics: dict[str, list[Any]] = {}
        self.dataloader: Any = None
        self.data_iterator: SizedIterator | None = None
        self._optimizer: Optimizer | None = None
        #: Classy's options per optimizer: set by each step (Classy schedules inside ``optimizer.step``), kept until the
        #: next step, since Lightning has already stepped its schedulers when the hooks run.
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
        self.phase_batches = 0  # batches of the current phase (num_batches_per_phase of a loader without a length)
        self.phase_ended = False
        self.batches = -1
        self.batch_time: list[float] = []
        self.perf_stats: Any = None
        self.losses: list[float] = []
        self.last_batch: LastBatch | None = None
        self.phase_start_time = self.phase_start_time_train = time.perf_counter()
        self.perf_log: list[dict[str, Any]] = []
        self.used_options.clear()
        for meter in self.meters:
            meter.reset()

    # ------------------------------------------------------------------------------------------------- models
    def find_model(self, pl_module: pl.LightningModule) -> None:
        """Locate the model hooks see in ``pl_module`` (the ``model`` option, else detected: a VISSL model, else the
        one ``ClassyModel`` child, as ``ClassificationTask.base_model`` is the ClassyModel)."""
        self.model_path = vissl.find_model(pl_module, self.model_name)
        if self.model_path is None and self.model_name is None:
            found = checkpoint.classy_model(pl_module)
            self.model_path = next((name for name, child in pl_module.named_children() if child is found), None)

    @property
    def base_model(self) -> torch.nn.Module:
        """The model: the LightningModule, or its attribute named by ``model`` (or detected)."""
        return vissl.resolve(self._lightning_trainer().lightning_module, self.model_path)

    @property
    def model(self) -> torch.nn.Module:
        """The LightningModule or its DDP wrapper when distributed; a model kept in an attribute, unwrapped."""
        if self.model_path is not None:
            return self.base_model
        return self._lightning_trainer().strategy.model

    @property
    def distributed_model(self) -> torch.nn.Module:
        return self.model

    @property
    def device(self) -> torch.device:
        return self._lightning_trainer().lightning_module.device

    def has_loss(self) -> bool:
        return self._loss is not None

    def _loss_object(self) -> Any:
        return self.loss if self.has_loss() else None

    @property
    def loss(self) -> Any:
        """VISSL's ``task.loss``: the ``loss`` option, or the LightningModule's attribute it names."""
        if self._loss is None:
            raise AttributeError("loss")
        if isinstance(self._loss, str):
            module = self._lightning_trainer().lightning_module
            if not hasattr(module, self._loss):
                raise RuntimeError(
                    f"task.loss: ClassyAdapter(loss={self._loss!r}) but {type(module).__name__} has no attribute "
                    f"{self._loss!r} (yet): set it in __init__ or setup()"
                )
            return getattr(module, self._loss)
        return self._loss

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
        """``max_epochs`` (every train phase, also those of a checkpoint the fit resumed from), else the epochs
        ``max_steps`` spans."""
        trainer = self._lightning_trainer()
        if trainer.max_epochs is not None and trainer.max_epochs >= 0:
            return trainer.max_epochs
        return math.ceil(trainer.max_steps / max(trainer.num_training_batches, 1))

    @property
    def test_only(self) -> bool:
        return self._lightning_trainer().state.fn != "fit"

    @property
    def num_batches_per_phase(self) -> int:
        """The batches of the current phase. A loader without a length (an ``IterableDataset``) has its count only
        once the phase has run (at ``on_phase_end``); before that, reading it raises ``TypeError`` with the way out."""
        trainer = self._lightning_trainer()
        if self.train:
            count = trainer.num_training_batches
        else:
            count = sum(trainer.num_test_batches if trainer.testing else trainer.num_val_batches)
        if math.isfinite(count):
            return int(count)
        if self.phase_ended:
            return self.phase_batches
        raise TypeError(
            f"task.num_batches_per_phase: the {self.phase_type} dataloader has no length (an IterableDataset without "
            "__len__), so the batches of the phase are known only at its end. Give the dataset a __len__, or set "
            f"Trainer(limit_{'train' if self.train else 'val'}_batches=<number of batches>)."
        )

    @property
    def max_iteration(self) -> int:
        count = self._lightning_trainer().num_training_batches
        if not math.isfinite(count):
            raise TypeError(
                "task.max_iteration: the train dataloader has no length (an IterableDataset without __len__). Give the "
                "dataset a __len__, or set Trainer(limit_train_batches=<number of batches>)."
            )
        return self.num_train_phases * int(count)

    @property
    def where(self) -> float:
        """Fraction of training done, as Classy's ``task.where``; 0.0 outside ``fit``, as in Classy's test-only mode.

        With VISSL, VISSL's own formula (the one its param schedulers read): ``num_updates`` over the global batch
        size, over ``num_train_phases`` x ``num_batches_per_phase``, so that a run started from a VISSL checkpoint
        continues VISSL's schedule."""
        trainer = self._lightning_trainer()
        if self.test_only:
            return 0.0
        if self.vissl:
            current_step = self.num_updates / self.get_global_batchsize()
            return current_step / (self.num_train_phases * self.num_batches_per_phase)
        total = trainer.estimated_stepping_batches
        return min(trainer.global_step / total, 1.0) if total and math.isfinite(total) else 0.0

    def options_at_phase_end(self) -> None:
        """Classy's ``optimizer.on_epoch(where)`` before the train phase-end hooks: an optimizer with an epoch-interval
        scheduler (which Lightning has stepped by now) shows the stepped options, except after the last train phase
        (``where`` is 1), where Classy keeps the options the last step used. Step-interval schedules are not touched."""
        trainer = self._lightning_trainer()
        if self.where >= 1:
            return
        for config in trainer.lr_scheduler_configs:
            if config.interval == "epoch":
                optimizer = config.scheduler.optimizer
                self.used_options[optimizer] = param_options(optimizer)

    def start_phase(self, train: bool, resumed: bool = False) -> None:
        """Classy's ``advance_phase``: counters, losses and meters reset.

        ``resumed``: reopen the phase a mid-phase checkpoint was written in; its counters, losses and meter states
        come from the checkpoint.
        """
        self.train = train
        self.last_batch = None
        self.phase_start_time = time.perf_counter()
        self.phase_ended = False
        if resumed:
            return
        self.phase_batches = 0
        self.phase_idx += 1
        self.train_phase_idx += int(train)
        self.losses = []
        self.local_iteration_num += 1
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
        """Classy's task state in ``ClassificationTask``'s layout, so that a ``checkpoint.torch`` written from it loads
        in Classy: ``base_model`` as a ``ClassyModel`` gives it (``{"model": {"trunk", "heads"}}``), ``optimizer`` as
        ``{"optim": ...}``, meters, counters, ``losses``, every hook's state under its ``name()``, ``loss`` and ``amp``.
        With VISSL hooks, VISSL's layout (``vissl.classy_state``), which VISSL's trainer loads.
        """
        if self.vissl:
            state = vissl.classy_state(self)
            return copy.deepcopy(state) if deep_copy else state
        trainer = self._lightning_trainer()
        state = {
            "train": self.train,
            "base_model": checkpoint.model_state(checkpoint.classy_model(self.base_model)),
            "meters": [meter.get_classy_state() for meter in self.meters],
            "optimizer": {"optim": self._optimizer_state(trainer.optimizers[0])} if trainer.optimizers else {},
            "phase_idx": self.phase_idx,
            "train_phase_idx": self.train_phase_idx,
            "num_updates": self.num_updates,
            "iteration": self.iteration,
            "losses": list(self.losses),
            "hooks": {hook.name(): hook.get_classy_state() for hook in self.hooks},
            "loss": self._loss_state(),
        }
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        if scaler is not None:
            state["amp"] = scaler.state_dict()
        return copy.deepcopy(state) if deep_copy else state

    def set_classy_state(self, state: dict[str, Any]) -> None:
        """Restore Classy's task state (:meth:`get_classy_state`'s layout, as ``ClassificationTask`` writes it): model,
        optimizer, meters, counters, losses and hook states. Outside ``fit`` (a test-only task) only the model, as
        Classy does. With VISSL hooks, VISSL's layout."""
        if self.vissl:
            vissl.load_classy_state(self, state)
            return
        trainer = self._lightning_trainer()
        checkpoint.load_model_state(checkpoint.classy_model(self.base_model), state["base_model"], "set_classy_state")
        if self.test_only:
            self.train = False
            return
        self.train = state["train"]
        if state.get("optimizer") and trainer.optimizers:
            trainer.optimizers[0].load_state_dict(state["optimizer"]["optim"])
        for meter, meter_state in zip(self.meters, state["meters"]):
            meter.set_classy_state(meter_state)
        self.load_counters(state)
        self.losses = list(state["losses"])
        if state.get("loss") and callable(getattr(self._loss_object(), "set_classy_state", None)):
            self.loss.set_classy_state(state["loss"])
        for hook in self.hooks:
            if hook.name() in state["hooks"]:
                hook.set_classy_state(state["hooks"][hook.name()])
            else:
                warnings.warn(f"task.set_classy_state: no state found for hook {hook.name()!r}; it starts fresh")

    def _optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The optimizer's ``state_dict`` with the options Classy's optimizer holds (``used_options``: the last step's,
        not those Lightning's schedulers have already stepped to)."""
        state = optimizer.state_dict()
        used = self.used_options.get(optimizer)
        if used is not None:
            state["param_groups"] = [{**group, **options} for group, options in zip(state["param_groups"], used)]
        return state

    def _loss_state(self) -> dict[str, Any]:
        """A ``ClassyLoss``'s state, as Classy saves it; ``{}`` for other losses (Classy's value)."""
        loss = self._loss_object()
        return loss.get_classy_state() if callable(getattr(loss, "get_classy_state", None)) else {}

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
            "phase_batches": self.phase_batches,
            "losses": list(self.losses),
            "meters": [meter.get_classy_state() for meter in self.meters],
        }

    def load_phase_state(self, state: Mapping[str, Any]) -> None:
        self.load_counters(state)
        self.local_iteration_num = state.get("local_iteration_num", -1)
        self.batches = state.get("batches", 0)
        self.phase_batches = state.get("phase_batches", 0)
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
