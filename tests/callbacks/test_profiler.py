"""Profiler: files written for the chosen window only; no profiler active outside it."""

import json

import pytest
import torch
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


@pytest.mark.parametrize(("kwargs", "name"), [({"start_step": -1}, "start_step"), ({"num_steps": 0}, "num_steps"), ({"row_limit": 0}, "row_limit")])
def test_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=f"Profiler: `{name}`"):
        Profiler(**kwargs)
