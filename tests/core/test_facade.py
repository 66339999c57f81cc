"""core/facade.py: the base of the host facades and the hosts' work dir."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from lightning_hooks.core.facade import Facade, WorkDir


class Runner(Facade):
    host = "runner"

    def __init__(self):
        self.epoch = 0

    @property
    def model(self):
        raise AttributeError("runner.model is set once the fit starts")


def test_a_missing_attribute_names_it_what_the_facade_provides_and_the_way_out():
    with pytest.raises(AttributeError) as err:
        Runner().max_epochs  # noqa: B018  # the read is the test
    message = str(err.value)
    assert "runner facade has no attribute 'max_epochs'" in message
    assert "It provides: epoch, model." in message
    assert "adapter.runner.max_epochs = ..." in message


def test_a_property_that_raises_keeps_its_own_message():
    with pytest.raises(AttributeError, match="set once the fit starts"):
        Runner().model  # noqa: B018  # the read is the test


def test_work_dir_given_default_and_fast_dev_run(tmp_path):
    trainer = SimpleNamespace(fast_dev_run=False, default_root_dir=str(tmp_path))
    assert WorkDir(tmp_path / "given", "A", family="mmengine").resolve(trainer) == str(tmp_path / "given")
    default = WorkDir(None, "A", family="mmengine")
    assert default.resolve(trainer, "configs/demo_2e.py") == os.path.join(tmp_path, "work_dirs", "demo_2e")
    assert default.resolve(trainer) == os.path.join(tmp_path, "work_dirs", "mmengine")
    trainer.fast_dev_run = True
    temporary = default.resolve(trainer)
    assert os.path.isdir(temporary) and default.temporary == temporary and default.resolve(trainer) == temporary
    default.release()
    assert not os.path.exists(temporary) and default.temporary is None
    default.release()  # idempotent


def test_work_dir_refuses_a_non_path():
    with pytest.raises(TypeError, match=r"A\(work_dir=3\): work_dir must be a path"):
        WorkDir(3, "A", family="mmengine")  # type: ignore[arg-type]  # the wrong type is the test


class Counters(Facade):
    """A facade whose property keeps the error it raises (as iMIX's engine does for its epoch-loop counters)."""

    host = "trainer"
    reads = 0

    @property
    def epoch(self):
        self.reads += 1
        error = AttributeError("trainer.epoch is not available by iteration")
        self._raised = ("epoch", error)
        raise error


def test_a_kept_property_error_is_raised_without_running_the_property_again():
    counters = Counters()
    assert getattr(counters, "epoch", "default") == "default"
    assert counters.reads == 1  # Python's fallback to __getattr__ does not run the property a second time
    with pytest.raises(AttributeError, match="not available by iteration"):
        counters.epoch  # noqa: B018  # the read is the test
    counters._raised = ("epoch", AttributeError("kept for another read"))
    with pytest.raises(AttributeError, match="trainer facade has no attribute 'iteration'"):
        counters.iteration  # noqa: B018  # a kept error of another name is not this read's


class Host(Facade):
    """A facade whose ``optimizer`` reads as mmcv's runner and iMIX's engine read theirs."""

    host = "runner"

    def __init__(self, trainer):
        self.trainer = trainer

    @property
    def optimizer(self):
        optimizer = self._optimizer
        return self._keep_first_optimizer(self.trainer) if optimizer is None else optimizer


@pytest.mark.parametrize("as_list", [True, False], ids=["optimizers-list", "one-optimizer"])
def test_keep_first_optimizer_reads_the_first_wrapper_once_with_direct_param_group_reads(as_list):
    import torch
    from lightning.pytorch.core.optimizer import LightningOptimizer

    first = LightningOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1))
    second = LightningOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.2))
    calls = []

    def optimizers():
        calls.append(1)
        return [first, second] if as_list else first

    host = Host(SimpleNamespace(lightning_module=SimpleNamespace(optimizers=optimizers)))
    assert host.optimizer is first and host.optimizer is first
    assert len(calls) == 1  # kept: hooks read it several times an iteration
    assert "param_groups" in vars(type(first))  # read by its class's property, not LightningOptimizer.__getattr__
    assert host.optimizer.param_groups[0]["lr"] == 0.1
    host._optimizer = None  # a facade bound to a new fit
    assert host.optimizer is first and len(calls) == 2
