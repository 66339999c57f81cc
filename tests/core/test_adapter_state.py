"""Hook and facade state travel through real Lightning checkpoints, one state entry per adapter instance."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from lh_testing import TinyModule, tiny_loader
from lightning.pytorch.callbacks import ModelCheckpoint

from lightning_hooks import ClassyAdapter
from lightning_hooks.compat import classy as compat_classy
from lightning_hooks.core.adapter_state import STATE_FORMAT, StateFormatError, base_state_key


class StepCounter(compat_classy.ClassyHook):
    on_phase_start = on_phase_end = on_end = compat_classy.ClassyHook._noop

    def __init__(self):
        super().__init__()
        self.state.steps = 0
        self.steps_at_start = None

    def on_start(self, task):
        self.steps_at_start = self.state.steps

    def on_step(self, task):
        if task.train:
            self.state.steps += 1


class PhaseCounter(StepCounter):
    def on_step(self, task):
        self.state.steps += 10


def _fit(tmp_path, max_epochs, ckpt_path=None):
    hooks = StepCounter(), PhaseCounter()
    adapters = [ClassyAdapter([hooks[0]]), ClassyAdapter([hooks[1]])]  # two adapters of one family
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    trainer = pl.Trainer(
        max_epochs=max_epochs, callbacks=[*adapters, checkpoint], default_root_dir=tmp_path, logger=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(TinyModule(), tiny_loader(), tiny_loader(n=4), ckpt_path=ckpt_path)
    return hooks, adapters, trainer


def test_state_round_trips_through_a_lightning_checkpoint_and_resume(tmp_path):
    (step, phase), adapters, _ = _fit(tmp_path / "a", max_epochs=1)
    assert adapters[0].state_key != adapters[1].state_key
    last = tmp_path / "a" / "ckpt" / "last.ckpt"
    saved = torch.load(last, weights_only=True)["callbacks"]  # plain containers only
    assert saved[adapters[0].state_key]["hooks"] == {"StepCounter": {"steps": 4}}
    assert saved[adapters[1].state_key]["hooks"] == {"PhaseCounter": {"steps": 60}}  # 4 train + 2 val batches

    (step2, phase2), resumed, _ = _fit(tmp_path / "b", max_epochs=2, ckpt_path=last)
    (step3, phase3), _, _ = _fit(tmp_path / "c", max_epochs=2)  # uninterrupted reference
    assert (step2.steps_at_start, phase2.steps_at_start) == (4, 60)
    assert (step2.state.steps, phase2.state.steps) == (step3.state.steps, phase3.state.steps) == (8, 120)
    assert resumed[0].task.train_phase_idx == 1 and resumed[0].task.phase_idx == 3


def test_resume_with_an_added_hook_loads_the_state_of_the_hooks_the_checkpoint_has(tmp_path):
    def fit(root, hooks, max_epochs, ckpt_path=None):
        adapter = ClassyAdapter(hooks)
        trainer = pl.Trainer(
            max_epochs=max_epochs, callbacks=[adapter, ModelCheckpoint(dirpath=root, save_last=True)],
            default_root_dir=root, logger=False, enable_progress_bar=False, enable_model_summary=False,
            num_sanity_val_steps=0,
        )  # fmt: skip
        trainer.fit(TinyModule(), tiny_loader(), tiny_loader(n=4), ckpt_path=ckpt_path)
        return adapter

    fit(tmp_path / "a", [StepCounter()], max_epochs=1)
    step, phase = StepCounter(), PhaseCounter()
    with pytest.warns(UserWarning, match=r"ClassyAdapter \(StepCounter, PhaseCounter\).*\['StepCounter'\].*added.*\['PhaseCounter'\]"):
        resumed = fit(tmp_path / "b", [step, phase], max_epochs=2, ckpt_path=tmp_path / "a" / "last.ckpt")
    reference = StepCounter()
    fit(tmp_path / "c", [reference], max_epochs=2)  # uninterrupted
    assert step.steps_at_start == 4 and step.state.steps == reference.state.steps == 8
    assert phase.steps_at_start == 0  # the added hook starts fresh
    assert resumed.task.train_phase_idx == 1 and resumed.task.phase_idx == 3  # as after an uninterrupted resume


def test_resume_warns_when_several_saved_states_could_be_this_adapters(tmp_path):
    _fit(tmp_path / "a", max_epochs=1)  # two ClassyAdapters: StepCounter, PhaseCounter
    adapter = ClassyAdapter([StepCounter(), PhaseCounter()])
    trainer = pl.Trainer(max_epochs=2, callbacks=[adapter], default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    phase_key = base_state_key("ClassyAdapter", ["PhaseCounter"])
    with pytest.warns(UserWarning, match=rf"several ClassyAdapter states.*'{phase_key}'"):
        trainer.fit(TinyModule(), tiny_loader(), ckpt_path=tmp_path / "a" / "ckpt" / "last.ckpt")
    assert adapter.hooks[0].steps_at_start == 0


#: a checkpoint written before the hook list was saved in the adapter's state: ``ClassyAdapter([StepCounter()])``,
#: one epoch of ``_fit``'s run (its hook list is only in the state key, ``ClassyAdapter{'hooks': ['StepCounter']}``)
OLD_FORMAT = Path(__file__).parent / "fixtures" / "classy_adapter_before_hook_list_state.ckpt"


def test_a_checkpoint_written_before_the_hook_list_was_saved_still_migrates(tmp_path):
    step, phase = StepCounter(), PhaseCounter()
    adapter = ClassyAdapter([step, phase])
    trainer = pl.Trainer(max_epochs=2, callbacks=[adapter], default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    with pytest.warns(UserWarning, match=r"written with hooks \['StepCounter'\].*added.*\['PhaseCounter'\]"):
        trainer.fit(TinyModule(), tiny_loader(), tiny_loader(n=4), ckpt_path=OLD_FORMAT)
    assert step.steps_at_start == 4 and step.state.steps == 8 and phase.steps_at_start == 0


def test_the_saved_hook_list_is_read_from_the_state_not_from_its_key(tmp_path):
    """A checkpoint's state names its hook list itself: migrating reads it there, whatever the key says."""
    _fit(tmp_path / "a", max_epochs=1)
    checkpoint = torch.load(tmp_path / "a" / "ckpt" / "last.ckpt", weights_only=True)
    states = checkpoint["callbacks"]
    states["ClassyAdapter@renamed"] = states.pop(base_state_key("ClassyAdapter", ["StepCounter"]))
    del states[base_state_key("ClassyAdapter", ["PhaseCounter"])]
    assert states["ClassyAdapter@renamed"]["hook_list"] == ["StepCounter"]
    torch.save(checkpoint, tmp_path / "renamed.ckpt")
    step = StepCounter()
    trainer = pl.Trainer(max_epochs=2, callbacks=[ClassyAdapter([step, PhaseCounter()])], default_root_dir=tmp_path,
                         logger=False, enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    with pytest.warns(UserWarning, match=r"written with hooks \['StepCounter'\].*added.*\['PhaseCounter'\]"):
        trainer.fit(TinyModule(), tiny_loader(), ckpt_path=tmp_path / "renamed.ckpt")
    assert step.steps_at_start == 4


#: ``_fit``'s two adapters after one epoch, written while an adapter's key held its hook list
#: (``ClassyAdapter{'hooks': ['StepCounter']}``, ``ClassyAdapter{'hooks': ['PhaseCounter']}``), with ``hook_list``
BEFORE_0_3 = Path(__file__).parent / "fixtures" / "classy_adapters_hook_list_in_state_key.ckpt"


def test_a_checkpoint_keyed_by_the_hook_list_resumes_each_adapter_from_its_own_state(tmp_path):
    """Each adapter finds its state under its key before 0.3 (the same hooks: no migration, no warning), and the
    two do not swap states though both are ClassyAdapters."""
    states = torch.load(BEFORE_0_3, weights_only=True)["callbacks"]
    assert {"ClassyAdapter{'hooks': ['StepCounter']}", "ClassyAdapter{'hooks': ['PhaseCounter']}"} <= states.keys()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*(checkpoint was written with hooks|several ClassyAdapter)")
        (step, phase), resumed, _ = _fit(tmp_path, max_epochs=2, ckpt_path=BEFORE_0_3)
    assert (step.steps_at_start, phase.steps_at_start) == (4, 60)
    assert (step.state.steps, phase.state.steps) == (8, 120)
    assert resumed[1].task.train_phase_idx == 1 and resumed[1].task.phase_idx == 3


def test_state_of_another_family_under_the_adapters_key_is_refused():
    adapter = ClassyAdapter([StepCounter()])
    state = adapter.state_dict()
    adapter.load_state_dict(state)  # its own: loads
    with pytest.raises(ValueError, match=r"ClassyAdapter \(StepCounter\) was given checkpoint state written by a "
                                         r"'imix' adapter\. Resume with the same adapters"):  # fmt: skip
        adapter.load_state_dict({**state, "family": "imix"})


def test_the_state_names_its_format_and_a_newer_format_is_refused_naming_the_way_out(tmp_path):
    """The state carries STATE_FORMAT; one written by a newer lightning-hooks is refused, never loaded as if it meant
    the same (a checkpoint without ``format`` is format 1: OLD_FORMAT and BEFORE_0_3 above load through the family's
    conversion, Classy's counters meaning the same in both)."""
    adapter = ClassyAdapter([StepCounter()])
    state = adapter.state_dict()
    assert state["format"] == STATE_FORMAT == 2
    adapter.load_state_dict({k: v for k, v in state.items() if k != "format"})  # format 1: converted, the same counters
    with pytest.raises(StateFormatError, match=r"ClassyAdapter \(StepCounter\): the state given to load_state_dict holds "
                                               r"classy adapter state of format 3, written by a newer lightning-hooks"):  # fmt: skip
        adapter.load_state_dict({**state, "format": 3})
    _fit(tmp_path / "a", max_epochs=1)
    checkpoint = torch.load(tmp_path / "a" / "ckpt" / "last.ckpt", weights_only=True)
    for value in checkpoint["callbacks"].values():
        value["format"] = 3
    torch.save(checkpoint, tmp_path / "newer.ckpt")
    with pytest.raises(StateFormatError, match=rf"the checkpoint '{re.escape(str(tmp_path / 'newer.ckpt'))}' holds "
                                               r"classy adapter state of format 3"):  # fmt: skip
        _fit(tmp_path / "b", max_epochs=2, ckpt_path=tmp_path / "newer.ckpt")
