"""adapt(): family detection, grouping, routing of host options and errors for bad input."""

from __future__ import annotations

import classy_vision.hooks as classy_hooks
import imix.engine.hooks as imix_hooks
import mmengine.hooks as mm_hooks
import lightning.pytorch as pl
import pytest
from lh_testing import TinyModule, tiny_loader

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, adapt
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.compat import imix as compat_imix


class VisslStyleHook(compat_classy.ClassyHook):
    """Written against VISSL's mount points without classy_vision."""

    on_start = on_phase_start = on_step = on_phase_end = on_end = compat_classy.ClassyHook._noop

    def on_forward(self, task):
        pass


class CompatImixHook(compat_imix.HookBase):
    def after_train_iter(self):
        pass


@pytest.mark.parametrize(
    ("hook", "adapter"),
    [
        (mm_hooks.IterTimerHook(), MMEngineAdapter),
        (mm_hooks.EMAHook(), MMEngineAdapter),
        (classy_hooks.LossLrMeterLoggingHook(), ClassyAdapter),
        (VisslStyleHook(), ClassyAdapter),
        (imix_hooks.IterationTimerHook(), IMIXAdapter),
        (CompatImixHook(), IMIXAdapter),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, type) else v.__name__,
)
def test_family_detected_from_real_and_compat_base_classes(hook, adapter):
    [callback] = adapt(hook)
    assert type(callback) is adapter
    assert callback.hooks == [hook]


def test_mixed_families_give_one_adapter_per_family_in_first_seen_order(tmp_path):
    timer, ema = mm_hooks.IterTimerHook(), mm_hooks.EMAHook()
    meter = classy_hooks.LossLrMeterLoggingHook()
    imix_timer = imix_hooks.IterationTimerHook()
    callbacks = adapt([meter, timer, imix_timer, ema], work_dir=tmp_path, by_epoch=False)
    assert [type(c) for c in callbacks] == [ClassyAdapter, MMEngineAdapter, IMIXAdapter]
    assert callbacks[1].hooks == [timer, ema]  # both NORMAL priority: registration order
    assert callbacks[1].runner.work_dir == str(tmp_path)
    assert callbacks[2].engine.work_dir == str(tmp_path) and callbacks[2].engine.by_epoch is False


def test_unknown_object_names_object_and_accepted_bases():
    with pytest.raises(TypeError, match=r"'not a hook'.*builtins\.str.*mmengine\.hooks\.Hook.*ClassyHook.*HookBase"):
        adapt([mm_hooks.IterTimerHook(), "not a hook"])


def test_option_no_adapter_accepts_is_an_error_naming_it():
    with pytest.raises(TypeError, match=r"\['gradient_accumulation_steps'\].*MMEngineAdapter"):
        adapt(mm_hooks.IterTimerHook(), gradient_accumulation_steps=2)


def test_family_adapter_rejects_a_hook_of_another_family():
    with pytest.raises(TypeError, match=r"MMEngineAdapter cannot drive .*IterationTimerHook.*not a mmengine hook"):
        MMEngineAdapter([mm_hooks.IterTimerHook(), imix_hooks.IterationTimerHook()])


class ClassyStepCounter(classy_hooks.ClassyHook):
    on_start = on_phase_start = on_phase_end = on_end = classy_hooks.ClassyHook._noop

    def __init__(self):
        super().__init__()
        self.steps = 0

    def on_step(self, task):
        self.steps += 1


class ImixIterCounter(imix_hooks.HookBase):
    iters = 0

    def after_train_iter(self):
        self.iters += 1


@pytest.mark.parametrize("imix_first", [True, False], ids=["imix-first", "classy-first"])
def test_imix_and_classy_hooks_nest_their_step_wrappers_in_either_order(tmp_path, imix_first):
    classy, imix = ClassyStepCounter(), ImixIterCounter()
    callbacks = adapt([imix, classy] if imix_first else [classy, imix])
    trainer = pl.Trainer(
        max_epochs=1, callbacks=callbacks, default_root_dir=tmp_path, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(TinyModule(), tiny_loader())
    assert (classy.steps, imix.iters) == (4, 4)  # tiny_loader(): 16 samples in batches of 4


def test_two_imix_adapters_in_one_trainer_are_refused(tmp_path):
    callbacks = [IMIXAdapter([imix_hooks.OptimizerHook()]), IMIXAdapter([imix_hooks.IterationTimerHook()])]
    trainer = pl.Trainer(max_epochs=1, callbacks=callbacks, default_root_dir=tmp_path, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(ValueError, match=r"IMIXAdapter \(OptimizerHook\): this Trainer has another IMIXAdapter.*adapt\(\)"):
        trainer.fit(TinyModule(), tiny_loader())


def test_a_hook_class_instead_of_an_instance_says_to_pass_an_instance():
    with pytest.raises(TypeError, match=r"adapt\(\) was given the class EMAHook: pass an instance: EMAHook\(\)"):
        adapt([mm_hooks.EMAHook])
    with pytest.raises(TypeError, match=r"MMEngineAdapter was given the class EMAHook: pass an instance: EMAHook\(\)"):
        MMEngineAdapter([mm_hooks.EMAHook])


def test_the_same_hook_instance_twice_is_refused():
    hook = mm_hooks.EMAHook()
    with pytest.raises(ValueError, match=r"MMEngineAdapter: the same EMAHook instance is listed twice"):
        adapt([hook, mm_hooks.IterTimerHook(), hook])


def test_an_imix_hook_already_driven_by_another_adapter_is_refused():
    hook = ImixIterCounter()
    first = IMIXAdapter([hook])
    with pytest.raises(ValueError, match=r"IMIXAdapter: the ImixIterCounter instance is already driven by another"):
        IMIXAdapter([hook])
    assert hook.trainer.__repr__() == first.engine.__repr__()  # still the first adapter's engine
