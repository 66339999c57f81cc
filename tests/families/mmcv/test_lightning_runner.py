"""``families/mmcv/lightning_runner.py``: the runner the OpenMMLab 1.x training API gets from ``lightning-hooks
train``, and :class:`LightningRunnerSwap`, the run-scoped change that hands it over (its fits run in
tests/families/mmcv/test_train*.py)."""

from __future__ import annotations

import pytest
import torch
from mmcv_testkit import import_with_stubbed_ops  # skips outside .venv-mmcv1

from lightning_hooks.core.errors import ConfigError
from lightning_hooks.families.mmcv.distributed import wrap_distributed
from lightning_hooks.families.mmcv.library import LIBRARIES
from lightning_hooks.families.mmcv.lightning_runner import LightningRunner, LightningRunnerSwap


@pytest.fixture(params=LIBRARIES, ids=lambda library: library.package)
def library(request):
    pytest.importorskip(request.param.package)
    import_with_stubbed_ops(request.param.train.partition(":")[0])  # mmdet's and mmseg's reach mmcv's ops
    return request.param


def test_the_training_api_builds_a_lightning_runner_inside_and_its_own_after(library):
    module = library.train_module
    originals = module.build_runner, getattr(module, library.ddp)
    model = torch.nn.Linear(2, 2)
    with LightningRunnerSwap(library, {"max_time": "00:00:01:00"}) as swap:
        runner = module.build_runner(dict(type="EpochBasedRunner", max_epochs=2), default_args=dict(model=model))
        assert isinstance(runner, LightningRunner) and swap.runners == [runner]
        assert runner.runner_cfg == dict(type="EpochBasedRunner", max_epochs=2) and runner.model is model
        assert runner.trainer_options == {"max_time": "00:00:01:00"}
        assert getattr(module, library.ddp) is wrap_distributed
    assert (module.build_runner, getattr(module, library.ddp)) == originals


def test_the_runner_is_an_instance_of_mmcvs_runner_of_its_type(library):
    """mmdet's and mmseg's training APIs register DistSamplerSeedHook only where ``isinstance(runner,
    EpochBasedRunner)`` (tests/families/mmcv/test_train_ddp.py checks the hooks they register in 2 processes)."""
    from mmcv.runner import EpochBasedRunner, IterBasedRunner

    with LightningRunnerSwap(library, {}) as swap:
        epochs, iters = (swap.build_runner(dict(type=kind, max_iters=2), dict(model=torch.nn.Linear(2, 2)))
                         for kind in ("EpochBasedRunner", "IterBasedRunner"))  # fmt: skip
    assert isinstance(epochs, EpochBasedRunner) and not isinstance(epochs, IterBasedRunner)
    assert isinstance(iters, IterBasedRunner) and not isinstance(iters, EpochBasedRunner)
    assert isinstance(epochs, LightningRunner) and isinstance(iters, LightningRunner)


def test_a_failure_inside_puts_the_library_functions_back(library):
    module = library.train_module
    originals = module.build_runner, getattr(module, library.ddp)
    with pytest.raises(RuntimeError, match="boom"), LightningRunnerSwap(library, {}):
        assert module.build_runner is not originals[0]
        raise RuntimeError("boom")
    assert (module.build_runner, getattr(module, library.ddp)) == originals


def test_install_returns_the_one_undo(library):
    module = library.train_module
    originals = module.build_runner, getattr(module, library.ddp)
    undo = LightningRunnerSwap(library, {}).install()
    assert (module.build_runner, getattr(module, library.ddp)) != originals
    undo()
    assert (module.build_runner, getattr(module, library.ddp)) == originals


def test_a_runner_lightning_cannot_stand_for_is_refused():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigError, match=r"runner.type: .*'MyRunner'.*Accepted"):
        LightningRunner(dict(type="MyRunner"), model)
    with pytest.raises(ConfigError, match="batch_processor is not supported; give the model a train_step"):
        LightningRunner(dict(type="EpochBasedRunner"), model, batch_processor=lambda *args: None)


def test_the_runner_registers_hooks_as_mmcvs_and_names_what_it_lacks():
    from mmcv.runner import Hook

    runner = LightningRunner(dict(type="IterBasedRunner", max_iters=2), torch.nn.Linear(2, 2), work_dir="w")
    hook = Hook()
    runner.register_hook(hook, priority="LOW")
    assert runner.hooks == [hook] and hook.priority == 70
    with pytest.raises(AttributeError, match="has no attribute 'data_loader'; open an issue naming the training"):
        runner.data_loader  # noqa: B018
