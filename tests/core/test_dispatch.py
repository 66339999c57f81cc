"""Ordering by each family's priority rule, dispatch to overriding hooks only, and errors raised inside hooks."""

from __future__ import annotations

import types

import classy_vision.hooks as classy_hooks
import imix.engine.hooks as imix_hooks
import lightning.pytorch as pl
import mmengine.hooks as mm_hooks
import pytest
import toy_family
from lh_testing import TinyModule, tiny_loader
from mmengine.runner import Runner as MMRunner

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.core.dispatch import HookDispatch
from lightning_hooks.core.events import EventTable, Mount
from lightning_hooks.core.triggers import ON


class Named(mm_hooks.Hook):
    def __init__(self, tag, priority):
        self.tag, self.priority = tag, priority


def test_mmengine_order_equals_real_runner_register_hook():
    hooks = [
        Named("a", "NORMAL"), Named("b", 10), Named("c", "LOWEST"), Named("d", "normal"),
        Named("e", 0), Named("f", 50), Named("g", "VERY_HIGH"),
    ]  # fmt: skip
    runner = types.SimpleNamespace(_hooks=[])
    for hook in hooks:
        MMRunner.register_hook(runner, hook)
    assert [h.tag for h in MMEngineAdapter(hooks).hooks] == [h.tag for h in runner._hooks]


class Leveled(imix_hooks.HookBase):
    def __init__(self, tag, level):
        super().__init__()
        self.tag, self.level = tag, level


def test_imix_order_follows_imix_insertion_rule():
    levels = [imix_hooks.PriorityStatus.NORMAL, 20, imix_hooks.PriorityStatus.LOWEST, 30, 0]
    hooks = [Leveled(str(i), lv) for i, lv in enumerate(levels)]
    engine = []  # iMIX's add_custom_hooks: insert after the last hook whose level <= the new one's
    for hook in hooks:
        idx = next((len(engine) - i for i, h in enumerate(reversed(engine)) if h.level.value <= hook.level.value), 0)
        engine.insert(idx, hook)
    assert [h.tag for h in IMIXAdapter(hooks).hooks] == [h.tag for h in engine] == ["4", "1", "0", "3", "2"]


def test_classy_order_keeps_list_order_with_checkpoint_hook_last(tmp_path):
    ckpt = classy_hooks.CheckpointHook(str(tmp_path), input_args={})
    meter, ema = classy_hooks.LossLrMeterLoggingHook(), classy_hooks.ExponentialMovingAverageModelHook(decay=0.9)
    assert ClassyAdapter([ckpt, meter, ema]).hooks == [meter, ema, ckpt]


class AfterIterOnly(mm_hooks.Hook):
    def __init__(self):
        self.iters = []

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.iters.append(batch_idx)


class BeforeIterDelegate(mm_hooks.Hook):
    """Like IterTimerHook: active at before_{train,val,test}_iter only through the base class' _before_iter."""

    def __init__(self):
        self.seen = []

    def _before_iter(self, runner, batch_idx, data_batch=None, mode="train"):
        self.seen.append((mode, batch_idx))


def test_only_hooks_overriding_a_mount_point_are_called(monkeypatch, trainer_kwargs):
    calls = []
    for mount in ("before_train", "before_train_epoch", "after_train_epoch", "before_run", "after_run"):
        original = getattr(mm_hooks.Hook, mount)
        monkeypatch.setattr(mm_hooks.Hook, mount, lambda self, *a, _m=mount, _o=original, **k: calls.append(_m))
    hook, delegating = AfterIterOnly(), BeforeIterDelegate()
    adapter = MMEngineAdapter([hook, delegating])
    pl.Trainer(max_epochs=2, limit_val_batches=0, callbacks=[adapter], **trainer_kwargs).fit(TinyModule(), tiny_loader())
    assert hook.iters == [0, 1, 2, 3] * 2
    assert calls == []  # no hook overrides these (nor their _before/_after_epoch delegates): never dispatched
    assert delegating.seen == [("train", i) for i in range(4)] * 2  # mmengine's before_train_iter -> _before_iter
    assert adapter.mount_counts(hook) == {"after_train_iter": 8}


class ClassyNoop(compat_classy.ClassyHook):
    on_start = on_phase_start = on_phase_end = on_end = compat_classy.ClassyHook._noop

    def __init__(self):
        super().__init__()
        self.steps = 0

    def on_step(self, task):
        self.steps += 1


def test_classy_noop_mount_points_are_not_dispatched(trainer_kwargs):
    hook = ClassyNoop()
    adapter = ClassyAdapter([hook])
    pl.Trainer(max_steps=3, limit_val_batches=0, callbacks=[adapter], **trainer_kwargs).fit(TinyModule(), tiny_loader())
    assert hook.steps == 3
    assert dict(adapter.fired) == {"on_step": 3}  # on_start, on_phase_start, ... = ClassyHook._noop never fire


class Boom(mm_hooks.Hook):
    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if batch_idx == 2:
            raise ValueError("boom")


class Witness(mm_hooks.Hook):
    def __init__(self):
        self.exceptions = []

    def on_exception(self, runner, exception):
        self.exceptions.append(exception)


def test_hook_exception_keeps_type_and_gets_a_note_naming_hook_mount_epoch_step(trainer_kwargs):
    witness = Witness()
    trainer = pl.Trainer(max_epochs=3, callbacks=[MMEngineAdapter([Boom(), witness])], **trainer_kwargs)
    with pytest.raises(ValueError, match="boom") as info:
        trainer.fit(TinyModule(), tiny_loader(), tiny_loader())
    note = "\n".join(info.value.__notes__)
    assert "mmengine hook Boom in mount point 'after_train_iter'" in note
    assert "Lightning event 'on_train_batch_end'" in note and "epoch 0, global step 3" in note
    assert witness.exceptions == [info.value]


class VisslOnException(compat_classy.ClassyHook):
    on_start = on_phase_start = on_step = on_phase_end = on_end = compat_classy.ClassyHook._noop

    def __init__(self, fail=False):
        super().__init__()
        self.fail, self.seen = fail, []

    def on_exception(self, task):
        self.seen.append(task.phase_type)
        if self.fail:
            raise RuntimeError("cleanup failed")

    @classmethod
    def name(cls):
        return f"{cls.__name__}"


class FailingStep(TinyModule):
    def training_step(self, batch, batch_idx):
        raise KeyError("bad batch")


def test_on_exception_reaches_hooks_and_their_own_failure_does_not_mask_the_error(trainer_kwargs):
    failing, ok = VisslOnException(fail=True), type("Second", (VisslOnException,), {})()
    trainer = pl.Trainer(max_steps=2, callbacks=[ClassyAdapter([failing, ok])], **trainer_kwargs)
    with pytest.warns(UserWarning, match="VisslOnException in mount point 'on_exception'.*cleanup failed"):
        with pytest.raises(KeyError, match="bad batch"):
            trainer.fit(FailingStep(), tiny_loader())
    assert failing.seen == ok.seen == ["train"]


#: one row passing ``batch_idx`` and ``outputs`` to its hooks
TOY_EVENTS = EventTable("toy", [Mount(ON["on_train_batch_end"], "batch", ("batch_idx", "outputs"))])


def Toy(hooks):
    """A bare dispatch plan (no Trainer) of ``hooks``, its host the string "host"."""
    toy = HookDispatch("Toy", "toy", TOY_EVENTS, hooks, (toy_family.ToyHook,))
    toy.build_plan(("host",))
    return toy


class Batch(toy_family.ToyHook):
    def __init__(self):
        self.calls = []

    def batch(self, host, **kwargs):
        self.calls.append(kwargs)


def _toy():
    return Toy([Batch()])


def test_fire_passes_a_row_exactly_the_arguments_it_names():
    toy = _toy()
    toy.fire(ON["on_train_batch_end"], batch_idx=1, outputs="o")
    toy.fire(ON["on_train_batch_end"], batch_idx=2, outputs="o", data_batch="b")  # a wider context: the row's names
    assert toy.hooks[0].calls == [dict(batch_idx=1, outputs="o"), dict(batch_idx=2, outputs="o")]


@pytest.mark.parametrize("context", [dict(batch_idx=1, data_batch="b"), dict(batch_idx=1)])
def test_fire_refuses_a_context_without_an_argument_the_row_names(context):
    """Keywords of the same count but other names (and too few) fail, naming the row, the trigger and the family."""
    toy = _toy()
    with pytest.raises(TypeError, match=r"toy event table's row 'batch' at trigger 'on_train_batch_end' passes "
                                        r"\['outputs'\] to its hooks, but the trigger fired with \['batch_idx'"):
        toy.fire(ON["on_train_batch_end"], **context)
    assert toy.hooks[0].calls == [] and not toy.fired


class ByName(toy_family.ToyHook):
    """A hook with a method no table row names, which its host calls by name (``runner.call_hook("custom")``)."""

    def __init__(self, fail=False):
        self.fail, self.calls = fail, []

    def custom(self, host, **kwargs):
        if self.fail:
            raise RuntimeError("custom failed")
        self.calls.append((host, kwargs))


def test_call_hook_calls_a_mount_point_by_name_on_active_hooks_and_counts_it():
    toy = Toy([ByName(), Batch(), ByName()])
    toy.call_hook("custom", step=3)
    toy.mute("fast_dev_run", [toy.hooks[2]])  # as under fast_dev_run
    toy.call_hook("custom", step=4)
    assert toy.hooks[0].calls == [("host", dict(step=3)), ("host", dict(step=4))]
    assert toy.hooks[2].calls == [("host", dict(step=3))]
    assert toy.fired == {"custom": 2} and toy.mount_counts(toy.hooks[0]) == {}  # not a mount point of the table


def test_call_hook_notes_the_hook_and_mount_point_of_an_error():
    toy = Toy([ByName(fail=True)])
    with pytest.raises(RuntimeError, match="custom failed") as info:
        toy.call_hook("custom")
    assert "raised by toy hook ByName in mount point 'custom' (called by name, before setup)" in "".join(info.value.__notes__)
    assert toy.failed_at == ("custom", toy.hooks[0])
    toy.clear_failure()
    assert toy.failed_at is None


def test_hooks_muted_for_one_reason_stay_muted_when_another_reasons_list_changes():
    """fast_dev_run's checkpoint hooks and iMIX's main-process-only hooks are two lists: setting one keeps the other."""
    toy = Toy([Batch(), Batch()])
    toy.mute("main process only", [toy.hooks[0]])
    toy.mute("checkpoint hooks under fast_dev_run", [toy.hooks[1]])
    toy.mute("checkpoint hooks under fast_dev_run", [])  # the next run has no fast_dev_run
    toy.fire(ON["on_train_batch_end"], batch_idx=0, outputs="o")
    assert (toy.hooks[0].calls, toy.hooks[1].calls) == ([], [dict(batch_idx=0, outputs="o")])


class Conditions:
    """An adapter's conditions: ``fixed`` holds for its life (``fixed_conditions``), ``live`` may change per step."""

    fixed_conditions = frozenset({"fixed"})

    def __init__(self, fixed):
        self.value, self.asked = fixed, []

    def fixed(self):
        self.asked.append("fixed")
        return self.value

    def live(self):
        self.asked.append("live")
        return True


@pytest.mark.parametrize("fixed", [True, False])
def test_a_fixed_condition_is_asked_once_when_the_plan_is_built(fixed):
    """ManualStepAdapter's hooks_step: the plan keeps its rows without asking at each fire, or leaves them out."""
    events = EventTable("toy", [Mount(ON["on_train_batch_end"], "batch", ("batch_idx", "outputs"), when="fixed"),
                                Mount(ON["on_train_batch_end"], "batch", ("batch_idx", "outputs"), when="live")],
                        conditions={"fixed": "for the adapter's life", "live": "asked at each fire"})  # fmt: skip
    conditions = Conditions(fixed)
    toy = HookDispatch("Toy", "toy", events, [Batch()], (toy_family.ToyHook,), conditions=conditions)
    toy.build_plan(("host",))
    for i in range(3):
        toy.fire(ON["on_train_batch_end"], batch_idx=i, outputs="o")
    assert conditions.asked == ["fixed", "live", "live", "live"]
    assert len(toy.hooks[0].calls) == (6 if fixed else 3)
    assert toy.fired == {"batch": 6 if fixed else 3}
