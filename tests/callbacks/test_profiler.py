"""Profiler: files written for the chosen window only; no profiler active outside it."""

import json

import warnings

import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel

from lightning_hooks.callbacks import Profiler


class Probe(BoringModel):
    """Records, per global step, whether a torch profiler was active inside training_step."""

    def __init__(self):
        super().__init__()
        self.active = {}

    def training_step(self, batch, batch_idx):
        self.active[self.global_step] = torch.autograd._profiler_enabled()
        return super().training_step(batch, batch_idx)


def test_window_files_and_zero_cost_outside(make_trainer, tmp_path):
    model, prof = Probe(), Profiler(start_step=2, num_steps=3)
    make_trainer(max_steps=8, limit_val_batches=0, callbacks=[prof]).fit(model)
    assert model.active == {s: s in (2, 3, 4) for s in range(8)}
    assert not torch.autograd._profiler_enabled()
    trace, table = tmp_path / "profile_steps=2-4.trace.json", tmp_path / "profile_steps=2-4.txt"
    assert [str(trace), str(table)] == prof.paths
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert "aten::addmm" in names or "aten::linear" in names  # BoringModel's Linear layer ran in the window
    text = table.read_text()
    assert "Self CPU" in text and "aten::" in text


def test_window_with_accumulation_covers_whole_optimizer_steps(make_trainer, tmp_path):
    model, prof = Probe(), Profiler(start_step=1, num_steps=1, dirpath=str(tmp_path / "out"))
    make_trainer(max_steps=3, limit_val_batches=0, accumulate_grad_batches=2, callbacks=[prof]).fit(model)
    assert (tmp_path / "out" / "profile_steps=1-1.txt").exists()
    assert model.active == {0: False, 1: True, 2: False}


def test_training_ends_inside_window(make_trainer, tmp_path):
    prof = Profiler(start_step=1, num_steps=10)
    with pytest.warns(UserWarning, match="inside the profiling window"):
        make_trainer(max_steps=3, limit_val_batches=0, callbacks=[prof]).fit(Probe())
    assert (tmp_path / "profile_steps=1-2.trace.json").exists()
    assert not torch.autograd._profiler_enabled()


def test_window_never_reached_warns(make_trainer, tmp_path):
    with pytest.warns(UserWarning, match="before `start_step=50`; nothing was profiled"):
        make_trainer(max_steps=2, limit_val_batches=0, callbacks=[Profiler(start_step=50)]).fit(Probe())
    assert not list(tmp_path.glob("profile_*"))


def test_exception_inside_window_stops_profiler(make_trainer, tmp_path):
    class Boom(Probe):
        def training_step(self, batch, batch_idx):
            if self.global_step == 2:
                raise ValueError("boom")
            return super().training_step(batch, batch_idx)

    with pytest.raises(ValueError, match="boom"):
        make_trainer(max_steps=5, limit_val_batches=0, callbacks=[Profiler(start_step=1, num_steps=3)]).fit(Boom())
    assert not torch.autograd._profiler_enabled()
    assert (tmp_path / "profile_steps=1-1.txt").exists()


def checkpoint_at(make_trainer, path, step, callbacks=()):
    """Train ``step`` steps and return the checkpoint ModelCheckpoint writes at that step's end."""
    ckpt = ModelCheckpoint(dirpath=path, every_n_train_steps=step)
    make_trainer(max_steps=step, limit_val_batches=0, enable_checkpointing=True, callbacks=[*callbacks, ckpt]).fit(Probe())
    return ckpt.best_model_path


def resume(make_trainer, ckpt_path, max_steps, prof):
    """Resume to ``max_steps``; return the steps profiled (per global step) and the Profiler's warnings."""
    model = Probe()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_trainer(max_steps=max_steps, limit_val_batches=0, callbacks=[prof]).fit(model, ckpt_path=ckpt_path)
    return model.active, [str(w.message) for w in caught if "Profiler" in str(w.message)]


def test_resume_inside_window_profiles_the_rest(make_trainer, tmp_path):
    with pytest.warns(UserWarning, match="inside the profiling window"):  # the first run ends at step 3, in 2-4
        ckpt = checkpoint_at(make_trainer, tmp_path / "ckpt", 3, [Profiler(start_step=2, num_steps=3)])
    assert (tmp_path / "profile_steps=2-2.txt").exists()
    prof = Profiler(start_step=2, num_steps=3, dirpath=str(tmp_path / "resumed"))
    active, warned = resume(make_trainer, ckpt, 6, prof)
    assert active == {3: True, 4: True, 5: False} and warned == []
    assert prof.paths == [str(tmp_path / "resumed" / f"profile_steps=3-4.{ext}") for ext in ("trace.json", "txt")]


def test_resume_after_profiled_window_neither_profiles_nor_warns(make_trainer, tmp_path):
    ckpt = checkpoint_at(make_trainer, tmp_path / "ckpt", 6, [Profiler(start_step=2, num_steps=2)])
    assert (tmp_path / "profile_steps=2-3.txt").exists()
    prof = Profiler(start_step=2, num_steps=2, dirpath=str(tmp_path / "resumed"))
    active, warned = resume(make_trainer, ckpt, 8, prof)
    assert active == {6: False, 7: False} and warned == [] and prof.paths == []
    # the checkpoint records window 2-3 only: a new window is profiled
    active, _ = resume(make_trainer, ckpt, 9, Profiler(start_step=7, num_steps=1, dirpath=str(tmp_path / "new")))
    assert active == {6: False, 7: True, 8: False}


def test_resume_past_a_window_never_profiled_says_so(make_trainer, tmp_path):
    ckpt = checkpoint_at(make_trainer, tmp_path / "ckpt", 6)  # written without a Profiler
    active, warned = resume(make_trainer, ckpt, 8, Profiler(start_step=2, num_steps=2, dirpath=str(tmp_path / "p")))
    assert not any(active.values())
    assert warned == [
        "Profiler: training resumed at global step 6, after the profiling window (steps 2-3), which the checkpoint "
        "does not record as profiled; nothing was profiled. Set `start_step` >= 6 to profile this run."
    ]


def test_load_state_dict_names_the_expected_keys():
    with pytest.raises(KeyError, match=r"Profiler: unexpected state keys \['skipped_steps'\]; expected \['done', 'num_steps', 'start_step'\]\. The checkpoint was not written by lightning_hooks.callbacks.Profiler"):
        Profiler().load_state_dict({"skipped_steps": 1})


@pytest.mark.parametrize(("kwargs", "name"), [({"start_step": -1}, "start_step"), ({"num_steps": 0}, "num_steps"), ({"row_limit": 0}, "row_limit")])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Profiler: `{name}`"):
        Profiler(**kwargs)
