"""``model_wrapper_cfg`` under ``lightning-hooks train``: the arguments MMEngine's ``Runner.wrap_model`` gives the model's
``DistributedDataParallel`` in a run of several processes are the arguments of Lightning's ``DDPStrategy``.

The values are every ``model_wrapper_cfg`` the installed OpenMMLab configs ship (all in mmagic:
``dict(find_unused_parameters=True)`` in singan, ``dict(type='MMSeparateDistributedDataParallel', ...)`` in
``_base_/gen_default_runtime.py``, ``_base_/models/base_glean.py`` and the inpainting / super-resolution bases), and
none (the Runner's default, with the top-level ``find_unused_parameters``). The reference is ``Runner.wrap_model``
itself, with the wrapper classes it builds replaced by recorders of their arguments (no process group needed).
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODEL_WRAPPERS
from mmengine.runner import Runner

from lightning_hooks.families.mmengine.train import wrapper_strategy

ONE_DDP = [
    pytest.param({}, id="none"),
    pytest.param(dict(find_unused_parameters=True), id="top-level find_unused_parameters"),
    pytest.param(dict(model_wrapper_cfg=dict(find_unused_parameters=True)), id="singan"),
    pytest.param(dict(model_wrapper_cfg=dict(type="MMDistributedDataParallel", broadcast_buffers=False,
                                             find_unused_parameters=False)), id="MMSeparate's way out"),  # fmt: skip
]
SEPARATE = [
    dict(type="MMSeparateDistributedDataParallel"),
    dict(type="MMSeparateDistributedDataParallel", broadcast_buffers=False, find_unused_parameters=False),
    dict(type="MMSeparateDistributedDataParallel", find_unused_parameters=True),
]


def runner_wrapper_arguments(cfg: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keyword arguments ``Runner.wrap_model`` builds the model's wrapper with in a distributed run (its type
    ``MMDistributedDataParallel``), without ``module`` and ``device_ids``."""
    import mmengine.runner.runner as runner_module

    seen: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> torch.nn.Module:
        seen.append(kwargs)
        return kwargs["module"]

    def build(config: dict, default_args: dict) -> torch.nn.Module:
        config = dict(config)
        assert config.pop("type") == "MMDistributedDataParallel"
        return record(**config, **default_args)

    monkeypatch.setattr(runner_module, "MMDistributedDataParallel", record)
    monkeypatch.setattr(MODEL_WRAPPERS, "build", build)
    monkeypatch.setenv("LOCAL_RANK", "0")
    runner = Runner.__new__(Runner)
    runner._distributed, runner.cfg = True, Config(cfg)
    runner.wrap_model(Config(cfg).get("model_wrapper_cfg"), torch.nn.Linear(2, 2))
    (kwargs,) = seen
    return {k: v for k, v in kwargs.items() if k not in ("module", "device_ids")}


@pytest.mark.parametrize("cfg", ONE_DDP)
def test_several_processes_get_the_ddp_arguments_the_runner_gives_its_wrapper(cfg, monkeypatch):
    strategy = wrapper_strategy(Config(cfg), "auto", world_size=2)
    assert isinstance(strategy, pl.strategies.DDPStrategy)
    assert strategy._ddp_kwargs == runner_wrapper_arguments(cfg, monkeypatch)
    assert strategy._start_method == "popen"
    assert wrapper_strategy(Config(cfg), "ddp_spawn", world_size=2)._start_method == "spawn"


@pytest.mark.parametrize("wrapper", SEPARATE, ids=str)
def test_a_wrapper_of_each_submodule_is_refused_in_several_processes_and_runs_in_one(wrapper):
    cfg = Config(dict(model_wrapper_cfg=wrapper))
    with pytest.raises(ValueError, match=r"model_wrapper_cfg=dict\(type='MMSeparateDistributedDataParallel'\) has no "
                       r"Lightning counterpart in a run of 2 processes .*train on one device, or .*--cfg-options "
                       r"model_wrapper_cfg\.type=MMDistributedDataParallel"):  # fmt: skip
        wrapper_strategy(cfg, "auto", world_size=2)
    assert wrapper_strategy(cfg, "auto", world_size=1) == "auto"  # the Runner wraps nothing in one process


def test_a_wrapper_option_lightning_lacks_is_refused_and_another_strategy_is_kept_with_a_warning():
    cfg = Config(dict(model_wrapper_cfg=dict(detect_anomalous_params=True)))
    with pytest.raises(ValueError, match=r"detect_anomalous_params=True\) is MMDistributedDataParallel's own .*drop it"):
        wrapper_strategy(cfg, "ddp", world_size=2)
    cfg = Config(dict(model_wrapper_cfg=dict(find_unused_parameters=True)))
    with pytest.warns(UserWarning, match=r"model_wrapper_cfg=\{'find_unused_parameters': True\} does not apply under "
                      r"the strategy you chose \('fsdp'\)"):  # fmt: skip
        assert wrapper_strategy(cfg, "fsdp", world_size=2) == "fsdp"
