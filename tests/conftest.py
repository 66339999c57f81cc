"""Fixtures shared by every test directory."""

from __future__ import annotations

import sys

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_process_group_left():
    """Lightning's DDP strategy leaves its default process group after a single-process fit (the process may fit
    again); tests that build their own then fail with "initialize the default process group twice", depending on
    the order tests run in. Each test starts without one."""
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


@pytest.fixture(autouse=True)
def mmengine_current_instances_restored():
    """MMEngine's current ``DefaultScope`` / ``Visualizer`` / ``MessageHub`` / ``MMLogger`` are process-wide (the
    latest instance of each class): a test that creates one (a Runner, a config with ``default_scope``) would leave
    it current for the tests after it. Each test ends with the current instances it started with; the default
    scopes it created are dropped (no scope current means MMEngine's own), other instances stay reachable by name."""
    mixin = getattr(sys.modules.get("mmengine.utils.manager"), "ManagerMixin", None)
    classes = [c for c in _subclasses(mixin) if "_instance_dict" in vars(c)] if mixin is not None else []
    saved = {c: list(c._instance_dict) for c in classes}
    yield
    for cls, names in saved.items():
        instances = cls._instance_dict
        if cls.__name__ == "DefaultScope":
            for name in [n for n in instances if n not in names]:
                del instances[name]
        elif names and names[-1] in instances:
            instances.move_to_end(names[-1])


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


@pytest.fixture
def trainer_kwargs(tmp_path):
    """Quiet, CPU-only Trainer settings writing under tmp_path."""
    return dict(
        default_root_dir=tmp_path,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
