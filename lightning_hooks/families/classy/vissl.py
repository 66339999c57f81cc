"""What VISSL's ``SelfSupervisionTrainer`` does around its hooks, for ``ClassyAdapter`` runs that drive VISSL hooks.

- :class:`StepClock`: the sections VISSL's standard train step times into ``task.perf_stats``.
- :func:`find_model`: the VISSL model (``trunk`` + ``heads``) wherever the LightningModule keeps it.
- :class:`Runtime`: the process group and Classy's device index VISSL's trainer sets before it builds anything.
- :func:`classy_state` / :func:`load_classy_state`: VISSL's checkpoint layout of ``task.get_classy_state()``.
- :func:`is_vissl_checkpoint` / :func:`check_checkpoint`: a VISSL checkpoint that ``fit(ckpt_path=...)`` starts from.
- :func:`hooks_from_config`: VISSL's own ``default_hook_generator(cfg)`` for a VISSL config.

VISSL is imported lazily: nothing here needs it unless a VISSL config is composed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lightning_hooks.families.classy.task import Task

#: The sections of VISSL's ``standard_train_step``, in the order it first records them.
SECTIONS = (
    "read_sample", "forward", "loss_compute", "loss_all_reduce", "meters_update", "backward", "optimizer_step",
    "train_step_total",
)  # fmt: skip


def is_vissl_hook(hook: Any) -> bool:
    """Whether the hook's class comes from VISSL (its trainer then hosts the run)."""
    return type(hook).__module__.split(".")[0] == "vissl"


def is_vissl_model(module: Any) -> bool:
    """A VISSL model as its hooks use it: ``trunk`` and ``heads`` modules (``BaseSSLMultiInputOutputModel``)."""
    return isinstance(module, torch.nn.Module) and all(
        isinstance(getattr(module, part, None), torch.nn.Module) for part in ("trunk", "heads")
    )


# ----------------------------------------------------------------------------------------------------- perf stats
class _Section:
    """One timed section in the form ``PerfStats.update_with_timer`` reads (VISSL's ``PerfTimer`` attributes)."""

    def __init__(self, name: str, start: tuple[float, Any], end: tuple[float, Any]) -> None:
        self.name = name
        self._last_interval = self.elapsed = end[0] - start[0]
        self._cuda_event_intervals = [(start[1], end[1])] if start[1] is not None and end[1] is not None else []


class StepClock:
    """Time points of the current step; each closed section goes into ``task.perf_stats`` as VISSL's train step
    records it. Nothing is recorded while ``task.perf_stats`` is None (VISSL's ``PerfTimer`` skips then too).

    A point is ``(perf_counter(), cuda event or None)``: CUDA events are recorded when the stats use them, so the
    report's CudaEvent column measures the device work as under VISSL.
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.points: dict[str, tuple[float, Any]] = {}

    def mark(self, point: str) -> None:
        stats = self.task.perf_stats
        event = None
        if stats is not None and stats.use_cuda_events():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        self.points[point] = (time.perf_counter(), event)

    def section(self, name: str, start: str, end: str | None = None) -> None:
        """Record ``name`` from point ``start`` to point ``end`` (now, when None)."""
        if end is None:
            self.mark(end := f"{name}.end")
        stats = self.task.perf_stats
        if stats is not None and start in self.points:
            stats.update_with_timer(_Section(name, self.points[start], self.points[end]))


# ----------------------------------------------------------------------------------------------------------- model
def find_model(pl_module: torch.nn.Module, name: str | None) -> str | None:
    """The dotted attribute path of the VISSL model in ``pl_module`` (None: the LightningModule itself).

    ``name`` is the user's choice; otherwise the LightningModule itself when it has ``trunk`` and ``heads``, else
    its one direct child that has them, else the LightningModule (a Classy model).
    """
    owner = type(pl_module).__name__
    if name is not None:
        module: Any = pl_module
        for part in name.split("."):
            if not hasattr(module, part):
                raise AttributeError(
                    f"ClassyAdapter(model={name!r}): {owner} has no attribute {name!r}. Name the attribute that holds "
                    "the model the hooks see as task.model / task.base_model (e.g. model='model' for self.model)."
                )
            module = getattr(module, part)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"ClassyAdapter(model={name!r}): {owner}.{name} is a {type(module).__name__}, not a Module")
        return name
    if is_vissl_model(pl_module):
        return None
    found = [child for child, module in pl_module.named_children() if is_vissl_model(module)]
    if len(found) > 1:
        raise ValueError(
            f"ClassyAdapter: {owner} has several VISSL models (trunk + heads): {found}. Name the one the hooks train "
            f"as task.model: ClassyAdapter(..., model={found[0]!r})."
        )
    return found[0] if found else None


def resolve(pl_module: torch.nn.Module, path: str | None) -> Any:
    """The attribute at dotted ``path`` of ``pl_module`` (the module itself for None)."""
    module: Any = pl_module
    for part in (path or "").split(".") if path else ():
        module = getattr(module, part)
    return module


# --------------------------------------------------------------------------------------------------------- runtime
class Runtime:
    """The process group and Classy's device index, set up as VISSL's trainer does before it builds anything.

    VISSL's hooks call ``torch.distributed`` (DINOHook, SwAVMomentumHook, MoCoHook) and its losses ask Classy's
    ``get_cuda_device_index()`` for the device (SwAV moves tensors to CUDA unless ``set_cpu_device()`` ran). On one
    device with no process group, :meth:`start` opens a single-process gloo group; it sets Classy's device index to
    the run's device. :meth:`stop` undoes exactly what :meth:`start` did.
    """

    def __init__(self) -> None:
        self._group = False
        self._device_index: int | None = None

    def start(self, device: torch.device, world_size: int) -> None:
        import classy_vision.generic.distributed_util as classy_dist

        if world_size == 1 and torch.distributed.is_available() and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
            self._group = True
        self._device_index = classy_dist.get_cuda_device_index()
        if device.type == "cuda":
            classy_dist.set_cuda_device_index(device.index or 0)
        else:
            classy_dist.set_cpu_device()

    def stop(self) -> None:
        if self._device_index is not None:
            import classy_vision.generic.distributed_util as classy_dist

            classy_dist._cuda_device_index = self._device_index  # set_cuda_device_index would select a CUDA device
            self._device_index = None
        if self._group:
            torch.distributed.destroy_process_group()
            self._group = False


def check_loss_device(loss: Any, device: torch.device) -> None:
    """A VISSL loss built before Classy's device was set reads the wrong device: say so before it fails in a step."""
    if not isinstance(loss, torch.nn.Module):
        return
    for name, module in loss.named_modules():
        use_gpu = getattr(module, "use_gpu", None)
        if isinstance(use_gpu, bool) and use_gpu != (device.type == "cuda"):
            raise RuntimeError(
                f"ClassyAdapter: the loss's {type(module).__name__} ({name or 'loss'}) has use_gpu={use_gpu} but the "
                f"run is on {device.type}: VISSL losses read Classy's device index when they are built, and VISSL's "
                "trainer sets it first. Build the loss in LightningModule.setup() and pass loss='<attribute name>', "
                "or call classy_vision.generic.distributed_util.set_cpu_device() before building it."
            )


# ------------------------------------------------------------------------------------------------ checkpoint layout
def model_state(model: torch.nn.Module) -> dict[str, Any]:
    """VISSL's ``base_model`` entry: ``{model: {trunk, heads}, meta: {trunk}}``. A model without ``trunk``/``heads``
    is saved whole as the trunk (VISSL's models load ``trunk`` and ``heads`` separately)."""
    if hasattr(model, "get_classy_state"):
        return model.get_classy_state()
    if is_vissl_model(model):
        parts = {"trunk": model.trunk.state_dict(), "heads": model.heads.state_dict()}
    else:
        parts = {"trunk": model.state_dict(), "heads": {}}
    return {"model": parts, "meta": {"trunk": {}}}


def load_model_state(model: torch.nn.Module, state: Mapping[str, Any], source: str) -> None:
    """Load :func:`model_state`'s layout into ``model`` (strictly); ``source`` names the file in errors."""
    if "model" not in state or not {"trunk", "heads"} <= set(state["model"]):
        raise KeyError(
            f"{source}: base_model state has keys {sorted(state)}, not VISSL's {{model: {{trunk, heads}}}}: it "
            "was not written by VISSL or by a ClassyAdapter driving VISSL hooks"
        )
    if hasattr(model, "set_classy_state"):
        model.set_classy_state(state)
    elif is_vissl_model(model):
        model.trunk.load_state_dict(state["model"]["trunk"])
        model.heads.load_state_dict(state["model"]["heads"])
    else:
        model.load_state_dict(state["model"]["trunk"])


def classy_state(task: Task) -> dict[str, Any]:
    """``task.get_classy_state()`` as VISSL's ``SelfSupervisionTask`` returns it."""
    trainer = task._lightning_trainer()
    loss = task.loss if task.has_loss() else None
    train_loader = trainer.train_dataloader
    dataset = getattr(train_loader, "dataset", None)
    return {
        "train": task.train,
        "base_model": model_state(task.base_model),
        "meters": [meter.get_classy_state() for meter in task.meters],
        "optimizer": {"optim": trainer.optimizers[0].state_dict()} if trainer.optimizers else {},
        "phase_idx": task.phase_idx,
        "train_phase_idx": task.train_phase_idx,
        "num_updates": task.num_updates,
        "losses": list(task.losses),
        "hooks": {hook.name(): hook.get_classy_state() for hook in task.hooks},
        "loss": loss.state_dict() if isinstance(loss, torch.nn.Module) else {},
        "train_dataset_iterator": dataset.get_classy_state() if hasattr(dataset, "get_classy_state") else {},
    }


def load_classy_state(task: Task, state: Mapping[str, Any]) -> None:
    """Restore :func:`classy_state` (as VISSL's ``_set_classy_state`` does, and the hooks' states)."""
    trainer = task._lightning_trainer()
    task.train = state["train"]
    load_model_state(task.base_model, state["base_model"], "task.set_classy_state")
    for meter, meter_state in zip(task.meters, state.get("meters", [])):
        meter.set_classy_state(meter_state)
    if state.get("optimizer") and trainer.optimizers:
        trainer.optimizers[0].load_state_dict(state["optimizer"]["optim"])
    task.load_counters(state)
    task.losses = list(state.get("losses", []))
    for hook in task.hooks:
        if hook.name() in state.get("hooks", {}):
            hook.set_classy_state(state["hooks"][hook.name()])


#: ``type`` of the VISSL checkpoints that hold a part of the model (``vissl.utils.checkpoint.CheckpointItemType``).
PARTIAL_TYPES = ("shard", "shard_list", "slice", "slice_list")


def is_vissl_checkpoint(checkpoint: Any) -> bool:
    """Whether a loaded file is a checkpoint VISSL's ``LogLossMetricsCheckpointHook`` wrote (not Classy's), or one of
    VISSL's sharded checkpoint files."""
    if not isinstance(checkpoint, Mapping) or "pytorch-lightning_version" in checkpoint:
        return False
    return checkpoint.get("type") in PARTIAL_TYPES or {"classy_state_dict", "iteration_num", "train_phase_idx"} <= set(
        checkpoint
    )


def check_checkpoint(checkpoint: Mapping[str, Any], source: str) -> None:
    """A VISSL checkpoint a Lightning run can start from: consolidated, with VISSL's counters."""
    if checkpoint.get("type") in PARTIAL_TYPES:
        raise ValueError(
            f"ClassyAdapter: {source} is a sharded VISSL checkpoint (type {checkpoint['type']!r}, written under "
            "FSDP): a Lightning run starts only from a consolidated one (LogLossMetricsCheckpointHook without "
            "FSDP). Resume it with VISSL's trainer, or start a new run from its trunk weights "
            "(CheckpointFormatConverter.sharded_to_consolidated_checkpoint)"
        )
    missing = [key for key in ("iteration", "phase_idx", "loss") if key not in checkpoint]
    if missing:
        raise KeyError(f"ClassyAdapter: {source} is a VISSL checkpoint without {missing}; it cannot be resumed")


# ------------------------------------------------------------------------------------------------------------ config
def compose(config: Any) -> Any:
    """A VISSL ``AttrDict`` from VISSL's command-line overrides (``["config=test/cpu_test/test_cpu_regnet_moco",
    "config.CHECKPOINT.DIR=ckpt"]``, composed with VISSL's hydra plugin), or an already composed config."""
    if isinstance(config, str):
        config = [config]
    if isinstance(config, Sequence):
        from vissl.utils.hydra_config import compose_hydra_configuration, convert_to_attrdict

        overrides = list(config)
        if not any(item.startswith("config=") for item in overrides):
            raise ValueError(
                f"ClassyAdapter(vissl={overrides!r}): VISSL's overrides need a config=<name> entry, e.g. "
                "['config=test/cpu_test/test_cpu_regnet_moco']"
            )
        _, config = convert_to_attrdict(compose_hydra_configuration(overrides))
        return config
    from vissl.config import AttrDict

    return config if isinstance(config, AttrDict) else AttrDict(dict(config))


def hooks_from_config(config: Any) -> tuple[list[Any], str]:
    """VISSL's ``default_hook_generator(config)`` and the checkpoint folder VISSL's trainer would use."""
    from vissl.hooks import default_hook_generator
    from vissl.utils.checkpoint import get_checkpoint_folder

    return default_hook_generator(config), get_checkpoint_folder(config)
