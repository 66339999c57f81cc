"""What VISSL's ``SelfSupervisionTrainer`` sets up around its hooks: which hooks and models are VISSL's, the process
group and device it prepares, and the hooks and checkpoint folder its config gives.

- :func:`is_vissl_hook` / :func:`is_vissl_model`: a VISSL hook, a VISSL model (``trunk`` + ``heads``).
- :data:`RUNTIME`: the process group and Classy's device index VISSL's trainer sets before it builds anything.
- :func:`check_loss_device`: a VISSL loss built for the wrong device.
- :data:`RANK_VARIABLES`: the rank variables VISSL reads from the environment, set for the run and restored.
- :func:`tests_after` / :func:`tests_before`: VISSL's test schedule (``TEST_MODEL``, ``TEST_EVERY_NUM_EPOCH``).
- :func:`ends_train_phase`: the last batch of a train phase whose stateful sampler skips batches (a resumed phase).
- :func:`compose` / :func:`hooks_from_config` / :func:`with_config_hooks`: a VISSL config, and VISSL's own
  ``default_hook_generator(cfg)`` before the hooks given.

VISSL is imported lazily: nothing here needs it unless a VISSL config is composed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lightning_hooks.core.triggers import Patch, Remove


def is_vissl_hook(hook: Any) -> bool:
    """Whether the hook's class comes from VISSL (its trainer then hosts the run)."""
    return type(hook).__module__.split(".")[0] == "vissl"


def is_vissl_model(module: Any) -> bool:
    """A VISSL model as its hooks use it: ``trunk`` and ``heads`` modules (``BaseSSLMultiInputOutputModel``)."""
    return isinstance(module, torch.nn.Module) and all(
        isinstance(getattr(module, part, None), torch.nn.Module) for part in ("trunk", "heads")
    )


# --------------------------------------------------------------------------------------------------------- runtime
@dataclass(frozen=True)
class Runtime(Patch):
    """The process group and Classy's device index, set up for the run as VISSL's trainer does before it builds
    anything.

    VISSL's hooks call ``torch.distributed`` (DINOHook, SwAVMomentumHook, MoCoHook) and its losses ask Classy's
    ``get_cuda_device_index()`` for the device (SwAV moves tensors to CUDA unless ``set_cpu_device()`` ran). On one
    device with no process group, a single-process gloo group is opened; Classy's device index becomes the run's
    device. Removing it undoes exactly that (the group destroyed, the index as it was).
    """

    environment = True

    def __str__(self) -> str:
        return "VISSL's process group and Classy's device index"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        import classy_vision.generic.distributed_util as classy_dist

        group = False
        if trainer.world_size == 1 and torch.distributed.is_available() and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
            group = True
        device_index = classy_dist.get_cuda_device_index()
        device = trainer.strategy.root_device
        if device.type == "cuda":
            classy_dist.set_cuda_device_index(device.index or 0)
        else:
            classy_dist.set_cpu_device()

        def remove() -> None:
            classy_dist._cuda_device_index = device_index  # set_cuda_device_index would select a CUDA device
            if group:
                torch.distributed.destroy_process_group()

        return remove


#: the one :class:`Runtime` patch
RUNTIME = Runtime()


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


class DDPView(torch.nn.parallel.DistributedDataParallel):
    """A VISSL model as VISSL's trainer hands it to hooks on several processes: wrapped in DDP (``isinstance`` of
    ``DistributedDataParallel``, the model as ``.module``, its parameters named ``module.<name>``, the names VISSL's
    ``FreezeParametersHook`` looks up). A view: it holds the model and syncs nothing (Lightning's DDP does); its
    forward is the model's.

    Example::

        view = DDPView(model)
        [name for name, _ in view.named_parameters()][0]  # 'module.trunk....'
    """

    def __init__(self, module: torch.nn.Module) -> None:
        torch.nn.Module.__init__(self)  # not DDP's: no second reducer, no broadcast
        self.module = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)


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


def with_config_hooks(
    hooks: Any, config: Any, given_config: Any, folder: str | None, generator: Callable[[Any], list[Any]] | None = None
) -> tuple[list[Any], Any, str]:
    """``ClassyAdapter(hooks, vissl=config)``: VISSL's ``default_hook_generator(cfg)`` (or ``generator(cfg)``) before
    ``hooks``; the composed config and its checkpoint folder (``folder`` unless None)."""
    if given_config is not None:
        raise ValueError("ClassyAdapter: pass the VISSL config as vissl=... only (it becomes task.config), not config=")
    composed = compose(config)
    built, default_folder = hooks_from_config(composed, generator)
    extra = [] if hooks is None else list(hooks) if isinstance(hooks, (list, tuple)) else [hooks]
    return built + extra, composed, folder if folder is not None else default_folder


def hooks_from_config(config: Any, generator: Callable[[Any], list[Any]] | None = None) -> tuple[list[Any], str]:
    """The hooks ``generator(config)`` builds (VISSL's ``default_hook_generator`` unless given: the ``hook_generator``
    of VISSL's ``launch_distributed``) and the checkpoint folder VISSL's trainer would use."""
    from vissl.hooks import default_hook_generator
    from vissl.utils.checkpoint import get_checkpoint_folder

    return (generator or default_hook_generator)(config), get_checkpoint_folder(config)


def tests_after(config: Any, train_phase: int) -> bool:
    """Whether VISSL's ``_build_phases`` puts a test phase after train phase ``train_phase`` (from 0): with
    ``TEST_MODEL``, after phases 0, ``TEST_EVERY_NUM_EPOCH``, 2 x ``TEST_EVERY_NUM_EPOCH``, ... and the last
    (``OPTIMIZER.num_epochs - 1``); without it (or no config: hooks given without one) after every phase."""
    if config is None or not config.get("TEST_MODEL"):
        return True
    every, last = int(config.get("TEST_EVERY_NUM_EPOCH", 1)), int(config.OPTIMIZER.num_epochs) - 1
    return train_phase % every == 0 or train_phase == last


def tests_before(config: Any, train_phase: int) -> int:
    """The test phases VISSL runs before train phase ``train_phase`` ends (:func:`tests_after` of the phases before)."""
    return sum(tests_after(config, phase) for phase in range(train_phase))


def ends_train_phase(trainer: Any, batch_idx: int, skipped: int) -> bool:
    """Whether train batch ``batch_idx`` is the last of the phase when VISSL's ``StatefulDistributedSampler`` skips
    ``skipped`` of the batches Lightning counts in the loader's length (its ``start_iter``: a phase resumed from a
    checkpoint written inside it; 0 otherwise). Lightning, which counts the skipped batches too, sees no last batch
    there."""
    return batch_idx + 1 + skipped == trainer.num_training_batches


@dataclass(frozen=True)
class RankVariables(Patch):
    """``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` in ``os.environ`` for the run (VISSL's
    ``get_machine_local_and_dist_rank()`` reads them; Lightning's launcher exports only ``LOCAL_RANK``); removing it
    puts back what the process had."""

    environment = True
    NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")

    def __str__(self) -> str:
        return "os.environ RANK, LOCAL_RANK, WORLD_SIZE"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        saved = {name: os.environ.get(name) for name in self.NAMES}
        ranks = dict(RANK=str(trainer.global_rank), LOCAL_RANK=str(trainer.local_rank), WORLD_SIZE=str(trainer.world_size))
        os.environ.update(ranks)

        def remove() -> None:
            # two adapters of a Trainer each install it and remove theirs in callback order, not in reverse: a name
            # another removal already put back is left as it is
            for name, value in saved.items():
                if os.environ.get(name) != ranks[name]:
                    continue
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

        return remove


#: the one :class:`RankVariables` patch
RANK_VARIABLES = RankVariables()
