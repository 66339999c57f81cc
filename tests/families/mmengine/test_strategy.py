"""FlexibleRunner configs' ``strategy=`` as Lightning's ``FSDPStrategy`` / ``DeepSpeedStrategy``
(``lightning_hooks/families/mmengine/strategy.py``).

Lightning refuses FSDP and DeepSpeed without a GPU, so here each of the five FlexibleRunner configs mmpretrain ships
(no other installed OpenMMLab library ships one) gives its strategy object and ``inputs_to_half`` cast, and every
option that reaches it is checked; ``scripts/gpu-check.sh`` trains them on a GPU. DeepSpeed's strategy is built in a
subprocess with ``.venv/deepspeed-site`` (``tests/helpers/deepspeed_strategies.py`` says why), inside a CPU Trainer,
against MMEngine's ``FlexibleRunner.from_cfg(cfg).strategy``: DeepSpeed's own parse of each side's config is compared.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from torch.distributed.fsdp import BackwardPrefetch, CPUOffload, MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy, size_based_auto_wrap_policy, transformer_auto_wrap_policy

from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine import strategy
from lightning_hooks.families.mmengine.strategy import StrategyError

CONFIGS = Path(importlib.util.find_spec("mmpretrain").origin).parent / ".mim" / "configs"
MAE = "mae/benchmarks/vit-{}_8xb128-{}-coslr-50e_in1k.py"
FSDP_CONFIGS = [MAE.format(arch, "fsdp") for arch in ("large-p16", "huge-p14")]
DEEPSPEED_CONFIGS = [MAE.format(arch, "ds") for arch in ("large-p16", "huge-p14")]
MINIGPT4 = "minigpt4/minigpt-4_baichuan-7b_caption.py"
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
#: DeepSpeed (and what it imports), outside the venv's import path: scripts/setup.sh test installs it there
DEEPSPEED_SITE = Path(sys.prefix) / "deepspeed-site"
HELPERS = Path(__file__).resolve().parents[2] / "helpers"
#: a FlexibleRunner config derived from the shipped MAE ViT-L one that gives each DeepSpeedStrategy option MMEngine
#: takes (those Lightning's counterpart refuses aside: test_an_option_lightning_cannot_stand_for_is_refused_by_name)
EVERY_DEEPSPEED_OPTION = """
strategy = dict(
    config={config!r},
    zero_optimization=dict(_delete_=True, stage=3, overlap_comm=False, reduce_bucket_size=1e6,
                           offload_optimizer=dict(device="cpu", pin_memory=True),
                           offload_param=dict(device="cpu", pin_memory=True, buffer_count=4)),
    fp16=dict(_delete_=True, enabled=False), bf16=dict(enabled=True), amp=dict(enabled=False, opt_level="O2"),
    gradient_clipping=0.5, activation_checkpointing=dict(partition_activations=True, cpu_checkpointing=True,
                                                          number_checkpoints=3),
    aio=dict(block_size=262144, queue_depth=4), steps_per_print=50, inputs_to_half=["inputs", "data_samples"])
train_dataloader = dict(batch_size=6)
"""
#: the base DeepSpeed config file (``strategy.config``) of :data:`EVERY_DEEPSPEED_OPTION`, which the sections update
DEEPSPEED_JSON = {"wall_clock_breakdown": True, "prescale_gradients": True, "zero_allow_untested_optimizer": True,
                  "bf16": {"enabled": False}}  # fmt: skip


def _shipped_config_folders() -> list[Path]:
    """``<package>/.mim/configs`` of every installed package that ships one (the OpenMMLab libraries: mmpretrain,
    mmdet, mmseg, mmpose, mmyolo, mmagic, ...)."""
    names = {name for name in importlib.metadata.packages_distributions() if name.isidentifier()}
    specs = (importlib.util.find_spec(name) for name in sorted(names))
    folders = (Path(spec.origin).parent / ".mim" / "configs" for spec in specs if spec is not None and spec.origin)
    return [folder for folder in folders if folder.is_dir()]


def test_the_shipped_flexible_runner_configs_are_these_five():
    """Every config of every installed OpenMMLab library that names a runner type or a strategy (a FlexibleRunner's
    ``strategy=dict(...)``) is one of the five the tests below build the strategy of."""
    folders = _shipped_config_folders()
    assert CONFIGS in folders and {"mmdet", "mmseg", "mmpose"} <= {folder.parents[1].name for folder in folders}
    named = re.compile(r"^(runner_type\s*=|strategy\s*=\s*dict\()|FlexibleRunner", re.MULTILINE)
    found = sorted(str(p) for folder in folders for p in folder.rglob("*.py") if named.search(p.read_text()))
    assert found == sorted(str(CONFIGS / name) for name in [*FSDP_CONFIGS, *DEEPSPEED_CONFIGS, MINIGPT4])


@pytest.mark.parametrize("name", FSDP_CONFIGS)
def test_shipped_fsdp_config_gives_lightnings_fsdp_strategy_with_its_auto_wrap_policy(name):
    cfg = Config.fromfile(str(CONFIGS / name))
    built = strategy.from_config(cfg)
    assert isinstance(built, pl.strategies.FSDPStrategy)
    policy = built.kwargs["auto_wrap_policy"]
    assert policy.func is size_based_auto_wrap_policy and policy.keywords == {"min_num_params": 1e7}
    assert built.kwargs["use_orig_params"] is True  # MMFullyShardedDataParallel's default
    assert built.sharding_strategy == ShardingStrategy.FULL_SHARD  # torch's default, MMEngine's too
    assert built.mixed_precision is None and built.cpu_offload == CPUOffload(offload_params=False)
    assert built._activation_checkpointing_kwargs == {}  # (a Lightning attribute, read by this test only)
    assert built._state_dict_type == "full"  # one epoch_N.pth, as CheckpointHook names it
    # the policy wraps as MMEngine's: a module of 1e7 parameters or more is a unit
    big, small = torch.nn.Linear(4000, 2500), torch.nn.Linear(10, 10)
    assert policy(big, recurse=False, nonwrapped_numel=10_002_500) and not policy(small, False, 110)


@pytest.mark.parametrize("name", [*DEEPSPEED_CONFIGS, MINIGPT4])
def test_shipped_deepspeed_config_gives_mmengines_deepspeed_config(name):
    cfg = Config.fromfile(str(CONFIGS / name))
    options = strategy.strategy_config(cfg)
    config = strategy.deepspeed_config({k: v for k, v in options.items() if k != "type"}, cfg)
    shipped = cfg.strategy
    assert config["zero_optimization"] == shipped.zero_optimization
    assert config["fp16"] == shipped.fp16 and config["fp16"]["enabled"] is True and "bf16" not in config
    assert config["zero_optimization"]["stage"] == (2 if name == MINIGPT4 else 1)
    assert not config["zero_optimization"].get("cpu_offload")  # no offload in any of them
    assert config["train_micro_batch_size_per_gpu"] == cfg.train_dataloader.batch_size  # as FlexibleRunner sets it
    assert config["steps_per_print"] == 10_000_000_000_000  # MMEngine's: DeepSpeed prints nothing
    assert "gradient_accumulation_steps" not in config  # Lightning sets it (to 1: accumulate_grad_batches)
    assert set(config) == {"zero_optimization", "fp16", "train_micro_batch_size_per_gpu", "steps_per_print"}


@pytest.mark.parametrize("name", [*DEEPSPEED_CONFIGS, MINIGPT4])
def test_shipped_deepspeed_config_gives_lightnings_deepspeed_strategy(name):
    cfg = Config.fromfile(str(CONFIGS / name))
    if not HAS_DEEPSPEED:
        with pytest.raises(StrategyError, match=r"strategy=dict\(type='DeepSpeedStrategy'\) needs DeepSpeed.*pip install"):
            strategy.from_config(cfg)
        return
    built = strategy.from_config(cfg)
    assert isinstance(built, pl.strategies.DeepSpeedStrategy)
    assert built.config["zero_optimization"] == cfg.strategy.zero_optimization
    assert built.inputs_to_half == tuple(cfg.strategy.inputs_to_half)


def test_deepspeed_optim_wrapper_becomes_mmengines_optim_wrapper_whose_backward_the_strategy_runs():
    cfg = Config.fromfile(str(CONFIGS / DEEPSPEED_CONFIGS[0]))
    assert cfg.optim_wrapper.type == "DeepSpeedOptimWrapper"
    strategy.prepare_config(cfg)
    assert cfg.optim_wrapper.type == "OptimWrapper" and cfg.optim_wrapper.optimizer.type == "AdamW"
    fsdp = Config.fromfile(str(CONFIGS / FSDP_CONFIGS[0]))
    strategy.prepare_config(fsdp)
    assert fsdp.optim_wrapper.type == "AmpOptimWrapper"  # kept: FSDP runs MMEngine's AMP as Runner does


def test_every_fsdp_option_reaches_lightnings_strategy():
    from torch.nn import TransformerEncoderLayer

    def check_fn(module):
        return isinstance(module, TransformerEncoderLayer)

    options = dict(
        model_wrapper=dict(
            type="MMFullyShardedDataParallel",
            auto_wrap_policy=dict(type="torch.distributed.fsdp.wrap.transformer_auto_wrap_policy",
                                  transformer_layer_cls=["torch.nn.TransformerEncoderLayer"]),
            sharding_strategy="SHARD_GRAD_OP", cpu_offload=True, backward_prefetch="BACKWARD_PRE",
            mixed_precision=dict(param_dtype="float16", reduce_dtype="float32", buffer_dtype="float16"),
            use_orig_params=False, limit_all_gathers=True),
        activation_checkpointing=dict(check_fn=check_fn),
        state_dict_cfg=dict(state_dict_type="FULL_STATE_DICT",
                            state_dict_config=dict(type="FullStateDictConfig", offload_to_cpu=True)),
    )  # fmt: skip
    built = strategy.from_config(Config(dict(runner_type="FlexibleRunner", strategy=dict(type="FSDPStrategy", **options))))
    policy = built.kwargs["auto_wrap_policy"]
    assert policy.func is transformer_auto_wrap_policy
    assert policy.keywords == {"transformer_layer_cls": {TransformerEncoderLayer}}
    assert built.sharding_strategy == ShardingStrategy.SHARD_GRAD_OP
    assert built.cpu_offload == CPUOffload(offload_params=True)
    assert built.kwargs["backward_prefetch"] == BackwardPrefetch.BACKWARD_PRE
    assert built.mixed_precision == MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float32,
                                                   buffer_dtype=torch.float16)  # fmt: skip
    assert built.kwargs["use_orig_params"] is False and built.kwargs["limit_all_gathers"] is True
    checkpointing = built._activation_checkpointing_kwargs["auto_wrap_policy"]
    assert checkpointing.func is lambda_auto_wrap_policy and checkpointing.keywords == {"lambda_fn": check_fn}
    assert built._state_dict_type == "full"


def test_registered_policy_and_check_fn_are_found_by_name_as_mmengine_finds_them():
    from mmengine.registry import FUNCTIONS

    @FUNCTIONS.register_module(name="lh_test_check_fn", force=True)
    def picks_linear(module, kind="Linear"):
        return type(module).__name__ == kind

    options = dict(type="FSDPStrategy", model_wrapper=dict(auto_wrap_policy="torch.distributed.fsdp.wrap."
                                                                             "always_wrap_policy"),
                   activation_checkpointing=dict(check_fn=dict(type="lh_test_check_fn", kind="Conv2d")))  # fmt: skip
    built = strategy.from_config(Config(dict(runner_type="FlexibleRunner", strategy=options)))
    assert built.kwargs["auto_wrap_policy"].__name__ == "always_wrap_policy"
    check_fn = built._activation_checkpointing_kwargs["auto_wrap_policy"].keywords["lambda_fn"]
    assert isinstance(check_fn, functools.partial) and check_fn.func is picks_linear
    assert check_fn(torch.nn.Conv2d(1, 1, 1)) and not check_fn(torch.nn.Linear(1, 1))


def test_a_config_without_flexible_runner_or_with_a_plain_strategy_keeps_runners_ddp():
    fsdp = dict(type="FSDPStrategy")
    assert strategy.from_config(Config(dict(strategy=fsdp))) is None  # Runner ignores strategy=
    assert strategy.from_config(Config(dict(runner_type="FlexibleRunner"))) is None
    assert strategy.from_config(Config(dict(runner_type="FlexibleRunner", strategy=dict(type="DDPStrategy")))) is None


@pytest.mark.parametrize(("options", "named"), [
    (dict(type="FSDPStrategy", skip_init_weights=True), "strategy.skip_init_weights"),
    (dict(type="FSDPStrategy", state_dict_cfg="local"), "strategy.state_dict_cfg"),
    (dict(type="FSDPStrategy", state_dict_cfg=dict(state_dict_type="LOCAL_STATE_DICT")), "strategy.state_dict_cfg"),
    (dict(type="FSDPStrategy", model_wrapper=dict(process_group=None)), "strategy.model_wrapper.process_group"),
    (dict(type="FSDPStrategy", model_wrapper=dict(ignored_modules=["head"])), "strategy.model_wrapper.ignored_modules"),
    (dict(type="FSDPStrategy", model_wrapper=dict(type="MyFSDP")), "strategy.model_wrapper.type"),
    (dict(type="FSDPStrategy", model_wrapper=dict(sharding_strategy="HALF")), "strategy.model_wrapper.sharding_strategy"),
    (dict(type="FSDPStrategy", model_wrapper=dict(auto_wrap_policy="no_such_policy")),
     "strategy.model_wrapper.auto_wrap_policy"),
    (dict(type="FSDPStrategy", model_wrapper=dict(mixed_precision=dict(param_dtype="half16"))),
     "strategy.model_wrapper.mixed_precision"),
    (dict(type="FSDPStrategy", activation_checkpointing=dict(check_fn="torch.nn.Linear", checkpoint_impl=1)),
     "strategy.activation_checkpointing.checkpoint_impl"),
    (dict(type="FSDPStrategy", sync_bn="torch"), "strategy.sync_bn"),
    (dict(type="FSDPStrategy", work_dir="elsewhere"), "strategy.work_dir"),
    (dict(type="DDPStrategy", model_wrapper=dict(find_unused_parameters=True)), "strategy.model_wrapper"),
    (dict(type="ColossalAIStrategy"), "strategy.type"),
    (dict(type="DeepSpeedStrategy", gradient_accumulation_steps=4), "strategy.gradient_accumulation_steps"),
    (dict(type="DeepSpeedStrategy", exclude_frozen_parameters=True), "strategy.exclude_frozen_parameters"),
    (dict(type="DeepSpeedStrategy", pipeline=dict(stages=2)), "strategy.pipeline"),
])  # fmt: skip
def test_an_option_lightning_cannot_stand_for_is_refused_by_name(options, named):
    cfg = Config(dict(runner_type="FlexibleRunner", strategy=options, optim_wrapper=dict(type="DeepSpeedOptimWrapper")))
    with pytest.raises(StrategyError, match=f"the config's {named} has no Lightning counterpart: .+"):
        strategy.from_config(cfg)


@pytest.mark.parametrize(("wrapper", "named"), [
    (dict(type="AmpOptimWrapper"), r"optim_wrapper=dict\(type='AmpOptimWrapper'\) under .+DeepSpeedOptimWrapper"),
    (dict(type="DeepSpeedOptimWrapper", clip_grad=dict(max_norm=1.0)), r"optim_wrapper.clip_grad .+gradient_clipping"),
    (dict(type="DeepSpeedOptimWrapper", accumulative_counts=2), "optim_wrapper.accumulative_counts"),
])  # fmt: skip
def test_deepspeed_refuses_an_optim_wrapper_that_scales_clips_or_accumulates_itself(wrapper, named):
    cfg = Config(dict(runner_type="FlexibleRunner", strategy=dict(type="DeepSpeedStrategy"), optim_wrapper=wrapper))
    with pytest.raises(StrategyError, match=named):
        strategy.from_config(cfg)


def test_the_command_lines_strategy_beside_the_configs_is_refused_naming_both():
    cfg = Config.fromfile(str(CONFIGS / FSDP_CONFIGS[0]))
    with pytest.raises(StrategyError, match=r"--strategy 'ddp' and the config's strategy=dict\(type='FSDPStrategy'\)"):
        strategy.from_config(cfg, "ddp")
    assert isinstance(strategy.from_config(cfg, "auto"), pl.strategies.FSDPStrategy)


@pytest.mark.parametrize("name", [FSDP_CONFIGS[0], DEEPSPEED_CONFIGS[0]])
def test_resume_under_a_sharded_strategy_is_refused_saying_what_to_do(name):
    cfg = Config.fromfile(str(CONFIGS / name))
    cfg.resume = True  # what --resume sets, as tools/train.py
    with pytest.raises(StrategyError, match=r"--resume \(resume=True\) under strategy=dict\(type='(FSDP|DeepSpeed)Strategy'\) "
                                            r"is not supported yet: .+ Drop --resume \(resume=True\) .+ "
                                            r"--cfg-options load_from=<checkpoint>"):
        strategy.from_config(cfg)


def test_lightning_hooks_train_prints_a_refused_option_as_one_short_error(tmp_path, capsys):
    from lightning_hooks import train

    derived = tmp_path / "local_state_dict.py"
    derived.write_text(f"_base_ = [{str(CONFIGS / FSDP_CONFIGS[0])!r}]\n"
                       "strategy = dict(state_dict_cfg='local')\n")  # fmt: skip  # a derived config as users write it
    with pytest.raises(SystemExit) as exit:
        train.main([str(derived), "--work-dir", str(tmp_path / "work")])
    assert exit.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("lightning-hooks train: error: the config's strategy.state_dict_cfg has no Lightning counterpart")
    assert "Traceback" not in err and err.count("lightning-hooks train") == 1


def test_the_runners_optim_wrapper_under_deepspeed_wraps_the_optimizer_its_zero_optimizer_wraps():
    """DeepSpeed hands Lightning its ZeRO optimizer, no ``torch.optim.Optimizer`` (no ``defaults``, which MMEngine's
    ``OptimWrapper`` reads: ``AttributeError`` at the first hook that read ``runner.optim_wrapper``, seen on an H200):
    the facade wraps the config's optimizer inside it, the one whose ``param_groups`` DeepSpeed steps with."""
    from mmengine.optim import OptimWrapper

    from lightning_hooks.families.mmengine.runner import torch_optimizer

    class ZeroOptimizer:  # DeepSpeed's DeepSpeedZeroOptimizer as Lightning holds it: the client optimizer inside
        def __init__(self, optimizer):
            self.optimizer = optimizer
            self.param_groups = optimizer.param_groups

    adamw = torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=0.5)
    assert torch_optimizer(adamw) is adamw and torch_optimizer(ZeroOptimizer(adamw)) is adamw
    assert OptimWrapper(torch_optimizer(ZeroOptimizer(adamw))).get_lr() == {"lr": [0.5]}


class _Forward(torch.nn.Module):
    """A model of float16 weights whose forward records the dtypes of what it is given."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1, dtype=torch.float16))
        self.seen = []

    def forward(self, *args, mode="tensor", **kwargs):
        from mmengine.utils import apply_to

        def dtypes(value):
            return apply_to(value, lambda x: isinstance(x, torch.Tensor), lambda x: x.dtype)

        self.seen.append((dtypes(args), dtypes(kwargs), mode))
        return {}


@pytest.mark.parametrize("name", [DEEPSPEED_CONFIGS[0], MINIGPT4])
def test_inputs_to_half_casts_the_forwards_inputs_as_mmengines_deepspeed_wrapper(name):
    """The shipped ``inputs_to_half`` (MAE: ``['inputs']`` of a dict batch; MiniGPT-4: position ``[0]`` of a tuple),
    which reaches ``DeepSpeedStrategy(inputs_to_half=...)`` and its :class:`strategy.InputsToHalf` patch: the model's
    forward receives what MMEngine's ``MMDeepSpeedEngineWrapper`` hands it (its ``_cast_inputs_half`` and
    ``_run_forward``), the named inputs in the model's dtype and the others as they were."""
    from types import SimpleNamespace

    from mmengine._strategy.deepspeed import MMDeepSpeedEngineWrapper

    names = list(Config.fromfile(str(CONFIGS / name)).strategy.inputs_to_half)

    def batch():
        images, other = [torch.ones(2, 3)], torch.ones(2)
        return {"inputs": images, "data_samples": other} if isinstance(names[0], str) else (images, other)

    reference = _Forward()
    wrapper = MMDeepSpeedEngineWrapper(model=reference, inputs_to_half=names)
    wrapper._run_forward(wrapper._cast_inputs_half(batch()), mode="loss")
    ours = _Forward()
    remove = strategy.InputsToHalf(tuple(names)).install(None, None, SimpleNamespace(model=ours))
    data = batch()
    ours(**data, mode="loss") if isinstance(data, dict) else ours(*data, mode="loss")
    assert ours.seen == reference.seen and "float16" in repr(ours.seen) and "float32" in repr(ours.seen)
    remove()
    ours(*batch()) if isinstance(data, tuple) else ours(**batch())
    assert "float16" not in repr(ours.seen[-1])  # the patch undone


@pytest.fixture(scope="module")
def deepspeed_builds(tmp_path_factory):
    """For each shipped DeepSpeed config and :data:`EVERY_DEEPSPEED_OPTION`: DeepSpeed's parse of the config MMEngine's
    ``DeepSpeedStrategy`` and Lightning's (from ``strategy.from_config``, completed as a CPU Trainer's setup does)
    hand ``deepspeed.initialize``, and facts of Lightning's strategy object (``deepspeed_strategies.py``, ~15 s CPU)."""
    from lh_testing import subprocess_env

    assert (DEEPSPEED_SITE / "deepspeed").is_dir(), f"no DeepSpeed in {DEEPSPEED_SITE}: run bash scripts/setup.sh test"
    tmp = tmp_path_factory.mktemp("deepspeed")
    (tmp / "ds_config.json").write_text(json.dumps(DEEPSPEED_JSON))
    every = tmp / "every_deepspeed_option.py"
    every.write_text(f"_base_ = [{str(CONFIGS / DEEPSPEED_CONFIGS[0])!r}]\n"
                     + EVERY_DEEPSPEED_OPTION.format(config=str(tmp / "ds_config.json")))  # fmt: skip
    configs = [str(CONFIGS / name) for name in [*DEEPSPEED_CONFIGS, MINIGPT4]] + [str(every)]
    out = tmp / "builds.json"
    run = subprocess.run([sys.executable, str(HELPERS / "deepspeed_strategies.py"), str(out), *configs], cwd=tmp,
                         env=subprocess_env(DEEPSPEED_SITE, HELPERS), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    builds = json.loads(out.read_text())
    return {Path(path).name if path != str(every) else "every": found for path, found in builds.items()}


def _differences(build):
    mmengine, lightning = build["mmengine"], build["lightning"]
    return {key: (mmengine.get(key), lightning.get(key)) for key in {*mmengine, *lightning}
            if mmengine.get(key) != lightning.get(key)}  # fmt: skip


def _is_lightnings_strategy_in_the_trainer(built, inputs_to_half):
    assert built["class"][:2] == ["MMEngineDeepSpeedStrategy", "DeepSpeedStrategy"] and built["is_trainers"]
    assert built["precision"] == "32-true"  # DeepSpeed's fp16 / bf16 sections cast, as under MMEngine
    assert built["inputs_to_half"] == inputs_to_half


@pytest.mark.parametrize("name", [*DEEPSPEED_CONFIGS, MINIGPT4])
def test_shipped_deepspeed_config_builds_lightnings_strategy_that_deepspeed_reads_as_mmengines(name, deepspeed_builds):
    """The real ``DeepSpeedStrategy`` in a CPU Trainer: DeepSpeed's ``DeepSpeedConfig`` of its config equals that of
    MMEngine's ``DeepSpeedStrategy`` for the same config in every attribute (74: ZeRO, fp16 loss scaling, clipping,
    batch sizes, accumulation, ...), and the shipped options are those."""
    build, shipped = deepspeed_builds[Path(name).name], Config.fromfile(str(CONFIGS / name))
    assert _differences(build) == {}
    _is_lightnings_strategy_in_the_trainer(build["built"], list(shipped.strategy.inputs_to_half))
    parsed, zero, fp16 = build["lightning"], shipped.strategy.zero_optimization, shipped.strategy.fp16
    assert parsed["zero_enabled"] == "True" and parsed["zero_optimization_stage"] == str(zero.stage)
    assert build["built"]["zero_stage_3"] is False
    for key in ("allgather_partitions", "reduce_scatter", "overlap_comm", "contiguous_gradients"):
        assert f"{key}={zero[key]}" in parsed["zero_config"]
    assert "offload_optimizer=None" in parsed["zero_config"] and "offload_param=None" in parsed["zero_config"]
    assert parsed["float16_config"].startswith("DeepSpeedFP16Config(enabled=True")
    for key in ("loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "min_loss_scale"):
        assert f"{key}={float(fp16[key]) if key == 'loss_scale' else fp16[key]}" in parsed["float16_config"]
    assert parsed["bfloat16_config"].startswith("DeepSpeedBF16Config(enabled=False")
    assert parsed["train_micro_batch_size_per_gpu"] == str(shipped.train_dataloader.batch_size)
    assert parsed["gradient_accumulation_steps"] == "1" and parsed["gradient_clipping"] == "0.0"
    assert parsed["steps_per_print"] == "10000000000000"


def test_every_deepspeed_option_reaches_lightnings_strategy_as_mmengines(deepspeed_builds):
    """Each option of MMEngine's ``DeepSpeedStrategy`` that Lightning's counterpart takes (a base JSON ``config``, ZeRO
    stage 3 with optimizer and parameter offload, bf16 over the base's, apex amp, clipping, activation checkpointing,
    aio, ``steps_per_print``, ``inputs_to_half``, the loader's batch size) reaches the real strategy as MMEngine's
    hands it to DeepSpeed."""
    build = deepspeed_builds["every"]
    assert _differences(build) == {}
    _is_lightnings_strategy_in_the_trainer(build["built"], ["inputs", "data_samples"])
    parsed = build["lightning"]
    assert parsed["zero_optimization_stage"] == "3" and build["built"]["zero_stage_3"] is True
    zero = parsed["zero_config"]
    assert "overlap_comm=False" in zero and "reduce_bucket_size=1000000" in zero and "cpu_offload=None" in zero
    assert "offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu'" in zero
    assert "offload_param=DeepSpeedZeroOffloadParamConfig(device='cpu', nvme_path=None, buffer_count=4" in zero
    assert parsed["bfloat16_config"].startswith("DeepSpeedBF16Config(enabled=True")
    assert parsed["float16_config"].startswith("DeepSpeedFP16Config(enabled=False")
    assert parsed["amp_enabled"] == "False" and parsed["amp_params"] == "{'opt_level': 'O2'}"
    assert parsed["gradient_clipping"] == "0.5"
    checkpointing = parsed["activation_checkpointing_config"]
    assert '"partition_activations": true' in checkpointing and '"cpu_checkpointing": true' in checkpointing
    assert '"number_checkpoints": 3' in checkpointing
    assert "'block_size': 262144, 'queue_depth': 4" in parsed["aio_config"]
    assert parsed["steps_per_print"] == "50" and parsed["train_micro_batch_size_per_gpu"] == "6"
    for key in ("wall_clock_breakdown", "prescale_gradients", "zero_allow_untested_optimizer"):  # the JSON file's
        assert parsed[key] == "True"
