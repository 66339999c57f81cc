"""Reliability round 3 (issue #24): ordinary Lightning settings and reuse that legacy hosts never met."""

from __future__ import annotations

import pytest
from reliability_kit import fit

from lightning_hooks import ClassyAdapter, MMEngineAdapter


# ------------------------------------------------------------------------ one hook object in two adapters
def _shared_hooks() -> list[tuple[type, object]]:
    from classy_vision.hooks import ClassyHook
    from mmengine.hooks import Hook

    class MMCount(Hook):
        def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
            pass

    class ClassyCount(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def on_step(self, task):
            pass

    return [(MMEngineAdapter, MMCount()), (ClassyAdapter, ClassyCount())]


# (iMIX refuses a hook another live IMIXAdapter drives when the second adapter is built, and one IMIXAdapter per Trainer)
@pytest.mark.parametrize("family", ["mmengine", "classy"])
def test_reliability_one_hook_object_in_two_adapters_of_a_trainer_is_refused(tmp_path, family):
    adapter, hook = {a.family: (a, h) for a, h in _shared_hooks()}[family]
    first = adapter([hook], work_dir=tmp_path) if family != "classy" else adapter([hook])
    second = adapter([hook], work_dir=tmp_path) if family != "classy" else adapter([hook])
    with pytest.raises(ValueError, match=rf"at setup.*same hook object\(s\): {type(hook).__qualname__}\..*one adapter only"):
        fit(tmp_path, [first, second], max_steps=2)


def test_reliability_one_hook_object_in_adapters_of_two_trainers_is_accepted(tmp_path):
    (_, hook), *_ = _shared_hooks()
    fit(tmp_path, [MMEngineAdapter([hook], work_dir=tmp_path / "a")], max_steps=1)
    fit(tmp_path, [MMEngineAdapter([hook], work_dir=tmp_path / "b")], max_steps=1)
