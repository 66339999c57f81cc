"""MMEngine's ``FlexibleRunner`` strategies as Lightning's: ``runner_type = 'FlexibleRunner'`` with
``strategy = dict(type='FSDPStrategy', ...)`` or ``dict(type='DeepSpeedStrategy', ...)``.

:func:`from_config` reads the config's ``strategy`` as ``FlexibleRunner.build_strategy`` and MMEngine's strategy
classes (``mmengine/_strategy/fsdp.py``, ``deepspeed.py``) read it, and returns Lightning's ``FSDPStrategy`` or
``DeepSpeedStrategy`` with the same options; an option with no Lightning counterpart is refused by name.
:func:`prepare_config` adapts the config's ``optim_wrapper`` to the strategy before the module is built.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from lightning_hooks.core.errors import InputError
from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.triggers import Patch, Remove
from lightning_hooks.families.mmengine.names import type_name

#: the strategy types ``FlexibleRunner`` runs as ``Runner`` does: one process, or DDP across several
_PLAIN = ("SingleDeviceStrategy", "DDPStrategy")
#: the FSDP module wrappers that are torch's ``FullyShardedDataParallel`` around the whole model, as Lightning wraps it
_FSDP_WRAPPERS = ("MMFullyShardedDataParallel", "FullyShardedDataParallel")
#: ``BaseStrategy`` arguments that ``FlexibleRunner`` fills from the config's top-level keys
_RUNNER_KEYS = {"work_dir": "work_dir", "experiment_name": "experiment_name", "env_kwargs": "env_cfg",
                "log_kwargs": "log_level", "auto_scale_lr": "auto_scale_lr"}  # fmt: skip  # key pairs wrapped at 120
#: the DeepSpeed config sections ``DeepSpeedStrategy`` takes as arguments (``mmengine/_strategy/deepspeed.py``)
_DEEPSPEED_SECTIONS = ("zero_optimization", "gradient_clipping", "fp16", "bf16", "amp", "activation_checkpointing",
                       "aio")  # fmt: skip  # names wrapped at 120


class StrategyError(InputError, ValueError):
    """A ``strategy=`` option of a FlexibleRunner config that Lightning cannot stand for: ``lightning-hooks train``
    prints it as one short message (an :class:`~lightning_hooks.core.errors.InputError`), without a traceback."""


def _refuse(option: str, why: str) -> StrategyError:
    return StrategyError(f"the config's strategy.{option} has no Lightning counterpart: {why}.")


def strategy_config(cfg: Mapping[str, Any]) -> dict | None:
    """The config's ``strategy`` dict when ``runner_type = 'FlexibleRunner'`` builds it (``Runner`` ignores the key),
    else ``None``."""
    runner = cfg.get("runner_type")
    name = runner if isinstance(runner, str) else getattr(runner, "__name__", None)
    strategy = cfg.get("strategy")
    if name != "FlexibleRunner" or strategy is None:
        return None
    return copy.deepcopy(dict(strategy))


def from_config(cfg: Mapping[str, Any], chosen: Any = None) -> Any:
    """Lightning's strategy for the config's FlexibleRunner ``strategy``: ``FSDPStrategy`` / ``DeepSpeedStrategy``
    with MMEngine's options, or ``None`` where the config names no sharded strategy (``Runner``'s plain DDP then
    applies). ``chosen``: the strategy given on the command line (``--strategy``), refused beside the config's.

    Example: the config ``strategy = dict(type='FSDPStrategy', model_wrapper=dict(auto_wrap_policy=dict(
    type='torch.distributed.fsdp.wrap.size_based_auto_wrap_policy', min_num_params=1e7)))`` gives
    ``FSDPStrategy(auto_wrap_policy=partial(size_based_auto_wrap_policy, min_num_params=1e7), state_dict_type='full')``.
    """
    options = strategy_config(cfg)
    if options is None:
        return None
    name = type_name(options.pop("type", None))
    if chosen not in (None, "auto"):
        raise StrategyError(
            f"--strategy {chosen!r} and the config's strategy=dict(type={name!r}) both name "
            "the strategy: drop one of them."
        )
    for key, top in _RUNNER_KEYS.items():
        if key in options:
            raise _refuse(key, f"set the config's top-level {top} instead, which lightning-hooks train applies")
    if name in _PLAIN:
        for key in options:
            raise _refuse(key, f"{name}'s {key} is Runner's own DDP set-up: use the config's model_wrapper_cfg "
                               "(and Lightning's --strategy) instead")  # fmt: skip  # the message continues under its first half
        return None
    if name in ("FSDPStrategy", "DeepSpeedStrategy") and cfg.get("resume"):
        raise StrategyError(
            f"--resume (resume=True) under strategy=dict(type={name!r}) is not supported yet: "
            f"Lightning's {name} loads a checkpoint's weights itself, before the LightningModule turns the layout "
            "CheckpointHook writes (the model's own keys, as MMEngine's) back into its own. Drop --resume (resume=True) and start from the checkpoint's weights with "
            "--cfg-options load_from=<checkpoint> (the optimizer, schedules and counters start anew)."
        )
    if name == "FSDPStrategy":
        return fsdp_strategy(options)
    if name == "DeepSpeedStrategy":
        return deepspeed_strategy(options, cfg)
    raise _refuse("type", f"{name!r} is not one of FSDPStrategy, DeepSpeedStrategy, {', '.join(_PLAIN)}")


# ------------------------------------------------------------------------------------------------------------ FSDP
def fsdp_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of Lightning's ``FSDPStrategy`` for MMEngine's ``FSDPStrategy`` options
    (``model_wrapper``, ``activation_checkpointing``, ``state_dict_cfg``, ``skip_init_weights``)."""
    options = dict(options)
    kwargs = _fsdp_wrapper_kwargs(dict(options.pop("model_wrapper", None) or {}))
    kwargs["state_dict_type"] = _state_dict_type(options.pop("state_dict_cfg", None))
    checkpointing = options.pop("activation_checkpointing", None)
    if checkpointing is not None:
        kwargs["activation_checkpointing_policy"] = _checkpointing_policy(dict(checkpointing))
    if options.pop("skip_init_weights", False):
        raise _refuse("skip_init_weights", "MMEngine then builds the model on the meta device and needs load_from to "
                                           "fill it; drop it, the model is built and initialised as under Runner")  # fmt: skip  # the message continues under its first half
    for key in options:
        raise _refuse(key, "FSDPStrategy takes model_wrapper, activation_checkpointing, state_dict_cfg and "
                           "skip_init_weights")  # fmt: skip  # the message continues under its first half
    return kwargs


def fsdp_strategy(options: Mapping[str, Any]) -> Any:
    """Lightning's ``FSDPStrategy`` with :func:`fsdp_options`."""
    return pl.strategies.FSDPStrategy(**fsdp_options(options))


def _fsdp_wrapper_kwargs(wrapper: dict[str, Any]) -> dict[str, Any]:
    """``model_wrapper``'s arguments as ``MMFullyShardedDataParallel`` parses them: the auto-wrap policy and
    ``param_init_fn`` by name or ``dict(type=..., **arguments)``, the sharding strategy and backward prefetch by
    name, ``cpu_offload`` a bool, ``mixed_precision`` a dict of dtype names. Other arguments go to torch's FSDP."""
    from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy

    kind = type_name(wrapper.pop("type", "MMFullyShardedDataParallel"))
    if kind not in _FSDP_WRAPPERS:
        raise _refuse("model_wrapper.type", f"{kind!r} wraps the model its own way; Lightning's FSDPStrategy wraps "
                                            "it in torch's FullyShardedDataParallel (MMFullyShardedDataParallel)")  # fmt: skip  # the message continues under its first half
    for key, why in (("process_group", "Lightning's FSDPStrategy makes the process group"),
                     ("device_id", "Lightning's FSDPStrategy sets it to the process's device"),
                     ("ignored_modules", "MMEngine resolves these names on the model, Lightning wraps the "
                                         "LightningModule around it: freeze those parameters or drop the option"),
                     ("ignored_parameters", "MMEngine resolves these names on the model, Lightning wraps the "
                                            "LightningModule around it: freeze those parameters or drop the option")):  # fmt: skip  # one (option, reason) pair per line, each reason continued under its first half
        if key in wrapper:
            raise _refuse(f"model_wrapper.{key}", why)
    kwargs: dict[str, Any] = {"use_orig_params": wrapper.pop("use_orig_params", True)}  # MMEngine's default, too
    for key in ("auto_wrap_policy", "param_init_fn"):
        function = wrapper.pop(key, None)
        if function is not None:
            kwargs[key] = _function(f"model_wrapper.{key}", function)
    sharding = wrapper.pop("sharding_strategy", None)
    if sharding is not None:
        kwargs["sharding_strategy"] = _enum("model_wrapper.sharding_strategy", ShardingStrategy, sharding)
    prefetch = wrapper.pop("backward_prefetch", None)
    if prefetch is not None:
        kwargs["backward_prefetch"] = _enum("model_wrapper.backward_prefetch", BackwardPrefetch, prefetch)
    offload = wrapper.pop("cpu_offload", None)
    if offload is not None:
        kwargs["cpu_offload"] = CPUOffload(offload_params=offload) if isinstance(offload, bool) else offload
    precision = wrapper.pop("mixed_precision", None)
    if isinstance(precision, Mapping):
        dtypes = ("param_dtype", "reduce_dtype", "buffer_dtype")
        fields: dict[str, Any] = {k: _dtype(v) if k in dtypes else v for k, v in precision.items()}
        precision = MixedPrecision(**fields)
    if precision is not None:
        kwargs["mixed_precision"] = precision
    return {**wrapper, **kwargs}  # the rest (limit_all_gathers, forward_prefetch, ...) is torch FSDP's own


def _state_dict_type(state_dict_cfg: Any) -> str:
    """Lightning's ``state_dict_type`` for MMEngine's ``state_dict_cfg``: ``'full'`` (or a ``FULL_STATE_DICT``
    dict) is one file that rank 0 writes, as ``CheckpointHook`` names it and ``load_from`` reads it.
    Without the option, too: MMEngine's default ``'local'`` (a folder of per-rank files in FSDP's local layout) has
    no Lightning counterpart, and given by name it is refused."""
    if state_dict_cfg is None or state_dict_cfg == "full":
        return "full"
    kind = state_dict_cfg.get("state_dict_type") if isinstance(state_dict_cfg, Mapping) else state_dict_cfg
    if str(getattr(kind, "name", kind)) in ("FULL_STATE_DICT", "full"):
        return "full"
    raise _refuse("state_dict_cfg", f"{kind!r} saves each rank's shard in FSDP's own layout, which Lightning's "
                                    "FSDPStrategy does not write (its sharded checkpoints are torch.distributed."
                                    "checkpoint folders that CheckpointHook and load_from do not read): use "
                                    "state_dict_cfg='full'")  # fmt: skip  # the message continues under its first half


def _checkpointing_policy(checkpointing: dict[str, Any]) -> Callable:
    """MMEngine's ``activation_checkpointing=dict(check_fn=...)`` (a function by name, ``dict(type=..., **args)`` or a
    callable, true for each submodule to checkpoint) as Lightning's ``activation_checkpointing_policy``."""
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

    if "check_fn" not in checkpointing:
        raise _refuse("activation_checkpointing", "it needs check_fn, the function that picks the submodules")
    check_fn = _function("activation_checkpointing.check_fn", checkpointing.pop("check_fn"))
    for key in checkpointing:
        raise _refuse(f"activation_checkpointing.{key}", "Lightning's FSDPStrategy checkpoints the submodules that "
                                                         "check_fn picks, with torch's default checkpoint wrapper")  # fmt: skip  # the message continues under its first half
    return functools.partial(lambda_auto_wrap_policy, lambda_fn=check_fn)


def _function(option: str, spec: Any) -> Callable:
    """A function named as MMEngine's ``FUNCTIONS`` registry resolves it (a registered name or a dotted import path),
    or ``dict(type=NAME, **arguments)`` as a partial; ``transformer_layer_cls`` may name its classes."""
    from mmengine.registry import FUNCTIONS

    arguments: dict[str, Any] = {}
    if isinstance(spec, Mapping):
        arguments = dict(spec)
        spec = arguments.pop("type", None)
    if isinstance(spec, str):
        with FUNCTIONS.switch_scope_and_registry(None):
            found = FUNCTIONS.get(spec)
        if found is None:
            raise _refuse(option, f"no function {spec!r} is registered in MMEngine's FUNCTIONS or importable by that "
                                  "dotted path")  # fmt: skip  # the message continues under its first half
        spec = found
    if not callable(spec):
        raise _refuse(option, f"{spec!r} is not a function, a function's name or dict(type=NAME, ...)")
    if "transformer_layer_cls" in arguments:
        arguments["transformer_layer_cls"] = {_class(option, c) for c in arguments["transformer_layer_cls"]}
    return functools.partial(spec, **arguments) if arguments else spec


def _class(option: str, spec: Any) -> type:
    if isinstance(spec, type):
        return spec
    from mmengine.utils import get_object_from_string

    found = get_object_from_string(spec) if isinstance(spec, str) else None
    if not isinstance(found, type):
        raise _refuse(f"{option}.transformer_layer_cls", f"{spec!r} is not a class or a class's dotted import path")
    return found


def _enum(option: str, enum: Any, value: Any) -> Any:
    if isinstance(value, enum):
        return value
    try:
        return enum[value]
    except KeyError:
        raise _refuse(option, f"{value!r} is not one of {', '.join(enum.__members__)}") from None


def _dtype(value: Any) -> torch.dtype | None:
    if value is None or isinstance(value, torch.dtype):
        return value
    dtype = getattr(torch, str(value), None)
    if not isinstance(dtype, torch.dtype):
        raise _refuse("model_wrapper.mixed_precision", f"{value!r} is not a torch dtype name")
    return dtype


# ------------------------------------------------------------------------------------------------------- DeepSpeed
def deepspeed_config(options: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The DeepSpeed config dict that MMEngine's ``DeepSpeedStrategy`` hands ``deepspeed.initialize``: its ``config``
    (a dict or a JSON file) with the sections given as arguments (``zero_optimization``, ``fp16``, ``bf16``,
    ``gradient_clipping``, ...), ``train_micro_batch_size_per_gpu`` the train loader's batch size (as
    ``FlexibleRunner`` sets it) and ``steps_per_print``. ``gradient_accumulation_steps`` is Lightning's to set (the
    OptimWrapper steps at every batch): only 1 is taken."""
    import json

    options = dict(options)
    base = options.pop("config", None)
    if isinstance(base, str):
        with open(base, encoding="utf-8") as f:
            base = json.load(f)
    config = copy.deepcopy(dict(base or {}))
    for section in _DEEPSPEED_SECTIONS:
        if options.get(section) is not None:
            config[section] = copy.deepcopy(options.pop(section))
        options.pop(section, None)
    accumulation = options.pop("gradient_accumulation_steps", None) or config.pop("gradient_accumulation_steps", 1)
    if accumulation != 1:
        raise _refuse("gradient_accumulation_steps", "Lightning sets DeepSpeed's from its accumulate_grad_batches, "
                                                     "which the module's OptimWrapper (one step per batch) does not "
                                                     "use: leave it at 1")  # fmt: skip  # the message continues under its first half
    loader = cfg.get("train_dataloader") or {}
    config["train_micro_batch_size_per_gpu"] = loader.get("batch_size", 1) if isinstance(loader, Mapping) else 1
    config["steps_per_print"] = options.pop("steps_per_print", 10_000_000_000_000)
    options.pop("train_micro_batch_size_per_gpu", None)  # FlexibleRunner overwrites it with the batch size
    options.pop("inputs_to_half", None)
    if options.pop("exclude_frozen_parameters", None):
        raise _refuse("exclude_frozen_parameters", "Lightning's DeepSpeedStrategy saves every parameter; drop it")
    for key in options:
        raise _refuse(key, "DeepSpeedStrategy takes config, inputs_to_half, train_micro_batch_size_per_gpu, "
                           f"gradient_accumulation_steps, steps_per_print and {', '.join(_DEEPSPEED_SECTIONS)}")  # fmt: skip  # the message continues under its first half
    return config


def deepspeed_strategy(options: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
    """Lightning's ``DeepSpeedStrategy`` with :func:`deepspeed_config`, casting the ``inputs_to_half`` of each model
    forward to the model's dtype as MMEngine's ``MMDeepSpeedEngineWrapper`` does."""
    config = deepspeed_config(options, cfg)
    _check_deepspeed_optim_wrapper(cfg.get("optim_wrapper") or {})
    try:
        import deepspeed  # noqa: F401
    except ImportError:
        raise StrategyError(
            "the config's strategy=dict(type='DeepSpeedStrategy') needs DeepSpeed, which is "
            "not installed: pip install deepspeed (on a machine with CUDA), or train with another strategy "
            "(--cfg-options runner_type=Runner optim_wrapper.type=OptimWrapper trains it as Runner does)."
        ) from None
    return _deepspeed_class()(config=config, inputs_to_half=options.get("inputs_to_half"))


def _check_deepspeed_optim_wrapper(wrapper: Mapping[str, Any]) -> None:
    """DeepSpeed scales, clips and accumulates itself: the optim wrapper may only be ``DeepSpeedOptimWrapper`` (or a
    plain ``OptimWrapper``) without ``clip_grad`` or ``accumulative_counts``, as MMEngine's ``DeepSpeedOptimWrapper``
    takes none."""
    kind = type_name(wrapper.get("type", "OptimWrapper"))
    if kind not in ("DeepSpeedOptimWrapper", "OptimWrapper"):
        raise StrategyError(
            f"optim_wrapper=dict(type={kind!r}) under strategy=dict(type='DeepSpeedStrategy'): "
            "DeepSpeed scales the loss and steps the optimizer itself; use type='DeepSpeedOptimWrapper' and the "
            "strategy's fp16 / bf16 sections."
        )
    for key, way_out in (("clip_grad", "strategy.gradient_clipping"),
                         ("accumulative_counts", "one optimizer step per batch")):  # fmt: skip  # one (option, way out) pair per line
        if wrapper.get(key) not in (None, 1):
            raise StrategyError(
                f"optim_wrapper.{key} under strategy=dict(type='DeepSpeedStrategy'): "
                f"DeepSpeedOptimWrapper takes no {key}; use {way_out}."
            )


def prepare_config(cfg: Any) -> None:
    """The config's ``optim_wrapper`` as the module builds it under the config's strategy: ``DeepSpeedOptimWrapper``
    becomes MMEngine's ``OptimWrapper``, whose backward Lightning's ``DeepSpeedStrategy`` runs through the DeepSpeed
    engine (see :class:`DeepSpeedBackward`)."""
    options = strategy_config(cfg)
    if options is None or type_name(options.get("type")) != "DeepSpeedStrategy":
        return
    wrapper = cfg.get("optim_wrapper")
    if wrapper is not None and type_name(wrapper.get("type", "OptimWrapper")) == "DeepSpeedOptimWrapper":
        wrapper["type"] = "OptimWrapper"


@dataclass(frozen=True)
class InputsToHalf(Patch):
    """``MMDeepSpeedEngineWrapper``'s ``inputs_to_half``: the model's forward receives these inputs (keyword names,
    or positions) in the model's own dtype, after the data preprocessor made them."""

    names: tuple

    def __str__(self) -> str:
        return "model.forward (inputs_to_half)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        names = self.names

        def cast(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
            dtype = next(module.parameters()).dtype
            to = functools.partial(_cast, dtype=dtype)
            args = tuple(to(v) if i in names else v for i, v in enumerate(args))
            return args, {k: to(v) if k in names else v for k, v in kwargs.items()}

        return pl_module.model.register_forward_pre_hook(cast, with_kwargs=True).remove


def _cast(value: Any, dtype: torch.dtype) -> Any:
    from mmengine.utils import apply_to

    return apply_to(value, lambda x: hasattr(x, "to"), lambda x: x.to(dtype))


@dataclass(frozen=True)
class DeepSpeedBackward(Patch):
    """The module's ``OptimWrapper.backward`` through the strategy (``DeepSpeedEngine.backward``: its loss scaling
    and ZeRO's gradient partitioning), counting the accumulation as MMEngine's ``OptimWrapper.backward`` does."""

    def __str__(self) -> str:
        return "OptimWrapper.backward (DeepSpeed)"

    def install(self, adapter: Any, trainer: Any, pl_module: Any) -> Remove:
        wrapper = pl_module.optim_wrapper

        def backward(loss: torch.Tensor, **kwargs: Any) -> None:
            trainer.strategy.backward(loss, None, **kwargs)
            wrapper._inner_count += 1

        wrapper.backward = backward
        return lambda: vars(wrapper).pop("backward", None)


@functools.cache
def _deepspeed_class() -> type:
    """Lightning's ``DeepSpeedStrategy`` that installs :class:`InputsToHalf` and :class:`DeepSpeedBackward` once the
    DeepSpeed engine and the module's optimizer exist, and removes them at teardown."""

    class MMEngineDeepSpeedStrategy(pl.strategies.DeepSpeedStrategy):
        def __init__(self, *, inputs_to_half: list | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.inputs_to_half = tuple(inputs_to_half) if inputs_to_half else None
            self._undo: list[Callable[[], None]] = []

        def setup(self, trainer: Any) -> None:
            super().setup(trainer)
            patches: list[Patch] = [DeepSpeedBackward()]
            if self.inputs_to_half:
                patches.append(InputsToHalf(self.inputs_to_half))
            self._undo = [p.install(None, trainer, self.lightning_module) for p in patches]

        def teardown(self) -> None:
            for undo in reversed(self._undo):
                undo()
            self._undo = []
            super().teardown()

    return MMEngineDeepSpeedStrategy
