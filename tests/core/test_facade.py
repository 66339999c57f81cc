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
