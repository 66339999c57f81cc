"""core/checks.py: adapt-time checks of user hooks (misspelled mount points, signatures, period options), here on
MMEngine's real event table and real ``Hook`` base class."""

from __future__ import annotations

import warnings

import pytest
from mmengine.hooks import CheckpointHook, Hook

from lightning_hooks.core.checks import check_argument, check_hook, check_period, check_periods, is_int
from lightning_hooks.families.mmengine.events import EVENTS


def checked(hook: object) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_hook(hook, EVENTS, "MMEngine", ("runner",), ("mmengine.",))
    return [str(w.message) for w in caught]


def test_a_misspelled_mount_point_is_named_with_the_close_one():
    class Mine(Hook):
        def after_train_iters(self, runner, batch_idx, data_batch=None, outputs=None):
            pass

    (message,) = checked(Mine())
    assert "MMEngine hook " in message and "Mine defines 'after_train_iters'" in message
    assert "Did you mean 'after_train_iter'?" in message


def test_a_mount_point_the_host_cannot_call_is_named_with_the_hosts_signature():
    class Mine(Hook):
        def after_train_iter(self, runner):  # the Runner passes batch_idx, data_batch, outputs
            pass

    (message,) = checked(Mine())
    assert "Mine.after_train_iter cannot be called as the host calls it" in message
    assert "def after_train_iter(self, runner, batch_idx, data_batch, outputs)" in message


def test_the_librarys_own_classes_and_private_helpers_are_not_checked():
    class Mine(CheckpointHook):
        def _after_train_iterr(self):  # private: never a mount point
            pass

    assert checked(Mine()) == []


def test_check_argument_and_periods():
    hook = CheckpointHook(interval=1)
    check_argument("A", hook, "interval", is_int, "an int")  # valid: nothing
    hook.interval = "1"
    with pytest.raises(TypeError, match=r"A: CheckpointHook was built with interval='1' \(str\), but it needs an int"):
        check_argument("A", hook, "interval", is_int, "an int")
    assert not is_int(True)
    hook.interval = 0
    with pytest.raises(ValueError, match=r"interval=0, but after_train_epoch divides its counter by interval"):
        check_period("A", hook, "interval", "after_train_epoch")
    hook.interval = -1
    with pytest.warns(UserWarning, match=r"interval=-1: its periodic work in after_train_epoch never runs"):
        check_periods("A", hook, {"CheckpointHook": (("interval", "after_train_epoch", False),)}, never_ok=True)
    hook.interval = None
    check_period("A", hook, "interval", "after_train_epoch", allow_none=True)
    with pytest.raises(TypeError, match="an int > 0, e.g. interval=1"):
        check_period("A", hook, "interval", "after_train_epoch")
