"""The ``task`` facade Classy Vision hooks receive (``ClassificationTask``), and VISSL's (``SelfSupervisionTask``) as
a subclass: counters, phases, model, data, and what a step records into it."""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from lightning_hooks.core import models
from lightning_hooks.core.dispatch import HookCaller
from lightning_hooks.core.facade import Facade
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.classy.loop import ClassyLoop
from lightning_hooks.families.classy.meters import MetricMeter, classy_meters
from lightning_hooks.families.classy.optimizer import Optimizer, param_options
from lightning_hooks.families.classy.state import ClassyTaskState, has_classy_state
from lightning_hooks.families.classy.vissl import is_vissl_model


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


def batch_size(sample: Any) -> int:
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


def loop_counter(name: str) -> property:
    """A counter the task shows from its :class:`~lightning_hooks.families.classy.loop.ClassyLoop`, which moves it,
    read through ``operator.attrgetter`` (in C: hooks read ``task.train`` every step). A hook may write it, as Classy's
    task attributes are plain (VISSL's ``SetDataSamplerEpochHook`` resets ``task.batches``): the write goes to the
    loop."""

    def write(task: Any, value: Any) -> None:
        setattr(task._loop, name, value)

    return property(operator.attrgetter(f"_loop.{name}"), write, doc=f"The loop's ``{name}``.")


class Task(ClassyTaskState, Facade):
    """Classy's ``ClassificationTask`` as its hooks see it.

    Phase counters follow Classy: ``phase_idx`` counts train and test phases together, ``train_phase_idx`` the train
    phases, ``eval_phase_idx = phase_idx - train_phase_idx - 1``. VISSL's ``iteration`` counts train steps,
    ``local_iteration_num`` counts phase starts and batches of every phase (-1 before the first, never reset, as
    VISSL's trainer loop), ``batches`` the batches of the run (-1 at ``on_start``; VISSL's SetDataSamplerEpochHook
    resets it per phase) and ``batch_time`` the seconds of each of them. ``num_updates`` grows by the global batch
    size after each train step's ``on_update``.

    ``model`` names the attribute of the LightningModule that holds the model (``task.model`` / ``task.base_model``);
    by default the one VISSL model (``trunk`` and ``heads``), else the one ``ClassyModel``. VISSL's task is
    :class:`VisslTask`.

    Example::

        adapter = ClassyAdapter([hook], meters={"acc": MulticlassAccuracy(num_classes=3)})
        adapter.task.phase_idx  # -1 until the first phase starts
    """

    host = "task"
    #: whether this is VISSL's ``SelfSupervisionTask`` (VISSL's trainer hosts the hooks)
    vissl = False

    def __init__(
        self,
        meters: Mapping[str, Any] | Sequence[Any] | None = None,
        config: Any = None,
        checkpoint_folder: str | None = None,
        loss: Any = None,
        model: str | None = None,
    ) -> None:
        self.trainer: pl.Trainer | None = None
        self.model_name = model
        self.model_path: str | None = None
        self.hooks: list[Any] = []
        self._caller: HookCaller  # set by the adapter, with the hooks
        self._loop: ClassyLoop  # set by the adapter: the counters the task shows
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
        """The losses, meters and timings of a task that has not run yet (each ``fit`` is a new run); its loop's
        counters start over with :meth:`ClassyLoop.new_run`."""
        self.perf_stats: Any = None
        self.losses: list[float] = []
        self.last_batch: LastBatch | None = None
        self.phase_start_time = time.perf_counter()
        self.perf_log: list[dict[str, Any]] = []
        self.used_options.clear()
        self._batchsize: int | None = None  # the open phase's loader batch size x world size (None: read it)
        self._device: torch.device | None = None  # the open phase's device (None: read it)
        for meter in self.meters:
            meter.reset()

    # --------------------------------------------------------------------------------------- loop's counters
    phase_idx = loop_counter("phase_idx")
    train_phase_idx = loop_counter("train_phase_idx")
    num_updates = loop_counter("num_updates")
    iteration = loop_counter("iteration")
    local_iteration_num = loop_counter("local_iteration_num")
    batches = loop_counter("batches")
    phase_batches = loop_counter("phase_batches")
    batch_time = loop_counter("batch_time")
    train = loop_counter("train")
    phase_ended = loop_counter("phase_ended")
    phase_start_time_train = loop_counter("phase_start_time_train")

    # ------------------------------------------------------------------------------------------------- models
    def find_model(self, pl_module: pl.LightningModule) -> None:
        """Locate the model hooks see in ``pl_module``: the ``model`` option, else detected: a VISSL model (``trunk`` +
        ``heads``), else a ``ClassyModel`` (``ClassificationTask.base_model`` is the ClassyModel), else the
        LightningModule. Several of a kind are ambiguous: an error naming ``ClassyAdapter(..., model=...)``."""
        if self.model_name is not None:
            models.submodule(pl_module, self.model_name, adapter="ClassyAdapter")
            path: str | None = self.model_name
        else:
            path = models.find_model(pl_module, is_vissl_model, adapter="ClassyAdapter", what="VISSL models (trunk + heads)")
            if path is None:
                path = models.find_model(pl_module, has_classy_state, adapter="ClassyAdapter", what="ClassyModels")
        self.model_path = path or None

    @property
    def base_model(self) -> torch.nn.Module:
        """The model: the LightningModule, or its attribute named by ``model`` (or detected)."""
        return models.submodule(self._lightning_trainer().lightning_module, self.model_path or "", adapter="ClassyAdapter")

    @property
    def model(self) -> torch.nn.Module:
        """The LightningModule or its DDP wrapper when distributed; a model kept in an attribute, unwrapped."""
        if self.model_path is not None:
            return self.base_model
        model = self._lightning_trainer().strategy.model
        if model is None:
            raise RuntimeError("task.model: Lightning's strategy holds no model yet (the fit has not connected it)")
        return model

    @property
    def distributed_model(self) -> torch.nn.Module:
        return self.model

    @property
    def device(self) -> torch.device:
        """The LightningModule's device (kept from its first read in a phase while the phase is open)."""
        if self._device is not None:
            return self._device
        device = self._lightning_trainer().lightning_module.device
        if self._loop.phase_open:
            self._device = device
        return device

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
        """Whether the model is on CUDA (the EMA hook asks every step: the phase's kept device, read directly)."""
        device = self._device
        return (device if device is not None else self.device).type == "cuda"

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
        """Fraction of training done, as Classy's ``task.where``; 0.0 outside ``fit``, as in Classy's test-only mode."""
        trainer = self._lightning_trainer()
        if self.test_only:
            return 0.0
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

    # --------------------------------------------------------------------------- phase records (PhaseRecords)
    def open_phase(self, resumed: bool) -> None:
        """Classy's ``advance_phase`` beside the counters: ``last_batch`` cleared, the phase's start time, the phase
        loader's global batch size kept for its steps; unless ``resumed`` (a mid-phase checkpoint's phase reopened:
        its losses and meter states come from the checkpoint), losses and meters reset."""
        self.last_batch = None
        self.phase_start_time = time.perf_counter()
        self._batchsize = self._device = None
        if resumed:
            return
        self.losses = []
        for meter in self.meters:
            meter.reset()

    def close_phase(self) -> None:
        """Classy's ``on_phase_end`` before the hooks: the phase's speed into ``perf_log``, ``last_batch`` None (from
        here to the next step, as in Classy, whose loop ends on a step that finds no batch), the options of a train
        phase's end, ``synchronize_losses`` (mean over ranks) and the meters' sync."""
        self.log_phase_end(self.phase_type)
        self.last_batch = None
        if self.train:
            self.options_at_phase_end()
        self.synchronize_losses()
        for meter in self.meters:
            meter.sync_state()

    def after_phase_end(self) -> None:
        """After the ``on_phase_end`` hooks: a fresh ``perf_log`` holding the phase's total speed."""
        self.perf_log = []
        self.log_phase_end(f"{self.phase_type}_total")
        self._batchsize = self._device = None

    def global_batchsize(self) -> int:
        size = self._batchsize  # kept while the phase is open: read every step
        return size if size is not None else self.get_global_batchsize()

    # ----------------------------------------------------------------------------------------------------- data
    def get_global_batchsize(self) -> int:
        """Classy's: the phase loader's ``batch_size`` (the last sample's size without one) times the world size
        (kept from the phase's start while it is open)."""
        if self._batchsize is not None:
            return self._batchsize
        size = getattr(self._current_loader(), "batch_size", None)
        if size is not None and self._loop.phase_open:
            self._batchsize = size * self._lightning_trainer().world_size
            return self._batchsize
        if size is None:
            size = batch_size(self.last_batch.sample) if self.last_batch is not None else 0
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

    # ---------------------------------------------------------------------------------------------------- steps
    def model_output(self, output: Any) -> Any:
        """``last_batch.model_output`` from the output of the step's first forward of ``base_model``."""
        return output

    def record_loss(self, loss: torch.Tensor, target: Any) -> None:
        """``last_batch.loss`` (detached) and its entry in ``losses``, as Classy's train and eval steps keep them."""
        last_batch = self.last_batch
        assert last_batch is not None, "the step fills last_batch before its loss"
        last_batch.loss = loss.detach()
        self.losses.append(last_batch.loss.item())

    def meters_on(self) -> bool:
        """Whether this step updates the meters (Classy: every step)."""
        return True

    def update_meters(self, output: torch.Tensor, target: torch.Tensor) -> None:
        """Classy's ``update_meters``: Classy meters on CPU with ``is_train``; torchmetrics on the device."""
        output, target = output.detach(), target.detach()
        for meter in self.meters:
            if isinstance(meter, MetricMeter):
                meter.update(output, target)
            else:
                meter.update(output.cpu(), target.cpu(), **self._meter_arguments())

    def _meter_arguments(self) -> dict[str, Any]:
        return {"is_train": self.train}

    def synchronize_losses(self) -> None:
        """Classy's ``synchronize_losses`` at a phase end: ``losses`` averaged over ranks."""
        if distributed():
            losses = torch.tensor(self.losses)
            torch.distributed.all_reduce(losses)
            self.losses = (losses / torch.distributed.get_world_size()).tolist()

    # ---------------------------------------------------------------------------------------------------- VISSL
    def run_hooks(self, name: str) -> None:
        """VISSL's ``task.run_hooks``: call ``name`` on every hook that has it, in hook order, through the adapter (an
        error names the hook; ``fast_dev_run``'s muted checkpoint hooks are skipped)."""
        self._caller.call_hook(name)

    def _lightning_trainer(self) -> pl.Trainer:
        if self.trainer is None:
            raise RuntimeError("task: the adapter is not attached to a Trainer yet (Lightning's setup has not run)")
        return self.trainer

    def __repr__(self) -> str:
        return f"Task(phase_type={self.phase_type!r}, phase_idx={self.phase_idx}, meters={self.meters})"


def distributed() -> bool:
    """Whether a process group is up."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()

