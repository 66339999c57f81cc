"""Reliability round 3 (issue #24): ordinary Lightning settings and reuse that legacy hosts never met."""

from __future__ import annotations

import os

import pytest
import torch
from reliability_kit import fit

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter


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


# ------------------------------------------------------------------------------- impossible periods
def _classy_period_hooks() -> list[tuple[object, str]]:
    from classy_vision.hooks import LossLrMeterLoggingHook, TensorboardPlotHook

    class Writer:  # TensorboardPlotHook only stores it until a phase ends
        pass

    return [(LossLrMeterLoggingHook(log_freq=0), "log_freq=0"), (LossLrMeterLoggingHook(log_freq=-3), "log_freq=-3"),
            (TensorboardPlotHook(Writer(), log_period=0), "log_period=0")]  # fmt: skip


def test_reliability_classy_impossible_periods_are_refused_at_adapt_time():
    for hook, option in _classy_period_hooks():
        with pytest.raises(ValueError, match=rf"ClassyAdapter: {type(hook).__name__} was built with {option}, but on_\w+ divides"):
            ClassyAdapter([hook])
    from classy_vision.hooks import LossLrMeterLoggingHook

    ClassyAdapter([LossLrMeterLoggingHook(log_freq=None)])  # None: no per-step logging, as Classy documents
    hook = LossLrMeterLoggingHook(log_freq=2)
    hook.log_freq = "2"
    with pytest.raises(TypeError, match="log_freq='2'.*an int > 0 or None"):
        ClassyAdapter([hook])


def test_reliability_imix_impossible_periods_are_refused_at_adapt_time(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work_dir").mkdir()  # EvaluateHook opens ./work_dir/eval_result.json in its constructor (upstream)
    from imix.engine.hooks import CheckPointHook, EvaluateHook
    from imix.utils.checkpoint import Checkpointer

    def checkpoint(**periods):
        return CheckPointHook(Checkpointer(torch.nn.Linear(1, 1), save_dir=str(tmp_path)), prefix="tiny", **periods)

    for hook, option, mount in [
        (checkpoint(iter_period=0), "iter_period=0", "after_train_iter"),
        (checkpoint(epoch_period=-1), "epoch_period=-1", "after_train_epoch"),
        (EvaluateHook(lambda *a: None, eval_iter_period=0), "eval_iter_period=0", "after_train_iter"),
    ]:
        with pytest.raises(ValueError, match=rf"IMIXAdapter: {type(hook).__name__} was built with {option}, but {mount}"):
            IMIXAdapter([hook], work_dir=tmp_path)
    IMIXAdapter([checkpoint(iter_period=None)], work_dir=tmp_path)  # None: by epoch only, as iMIX documents


# ---------------------------------------------------------------------------------------- fast_dev_run
def test_reliability_fast_dev_run_runs_no_classy_checkpoint_hook(tmp_path):
    from classy_vision.hooks import CheckpointHook, LossLrMeterLoggingHook

    folder = tmp_path / "ckpt"
    folder.mkdir()
    logging_hook = LossLrMeterLoggingHook()
    adapter = ClassyAdapter([CheckpointHook(str(folder), input_args={}), logging_hook])
    with pytest.warns(UserWarning, match=r"ClassyAdapter: Trainer\(fast_dev_run=True\) suppresses checkpointing and "
                      r"logging, so its "
                      r"checkpoint hooks CheckpointHook are skipped \(mount points on_phase_end, on_start are "
                      r"not called\).*Run without fast_dev_run"):  # fmt: skip
        fit(tmp_path, [adapter], fast_dev_run=True)
    assert list(folder.iterdir()) == []
    assert adapter.fired["on_phase_end"] == 2  # the other hooks ran: a train and a validation phase
    fit(tmp_path, [adapter], max_steps=1, limit_val_batches=0)  # a real run after the smoke test saves again
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.torch", "model_phase-0_end.torch"]


def test_reliability_fast_dev_run_runs_no_imix_checkpoint_hook(tmp_path):
    from imix.engine.hooks import CheckPointHook, IterationTimerHook
    from imix.utils.checkpoint import Checkpointer
    from reliability_resume_run import Net

    class WorkDirProbe(IterationTimerHook):
        def before_train(self):
            super().before_train()
            self.work_dir = self.trainer.work_dir
            open(os.path.join(self.work_dir, "probe.log"), "w").close()

    model = Net()
    hook = CheckPointHook(Checkpointer(model, save_dir=str(tmp_path / "ckpt")), prefix="tiny", epoch_period=1)
    probe = WorkDirProbe()
    adapter = IMIXAdapter([probe, hook], work_dir=tmp_path / "work")
    with pytest.warns(UserWarning, match=r"IMIXAdapter: Trainer\(fast_dev_run=True\) suppresses checkpointing and "
                      r"logging, so its "
                      r"checkpoint hooks CheckPointHook are skipped \(mount points after_train_epoch, "
                      r"after_train_iter, before_train are not called\)"):  # fmt: skip
        fit(tmp_path, [adapter], model=model, fast_dev_run=True)
    assert list((tmp_path / "ckpt").glob("*.pth")) == []
    assert adapter.fired["after_train_iter"] == 1  # IterationTimerHook ran
    # the work dir of a fast_dev_run is a temporary folder, removed at its end
    assert probe.work_dir != str(tmp_path / "work") and not os.path.exists(probe.work_dir)
    assert not (tmp_path / "work").exists()


# ------------------------------------------------------------------------------------ default work dir
def test_reliability_imix_default_work_dir_is_under_work_dirs(tmp_path, monkeypatch):
    from imix.engine.hooks import IterationTimerHook

    monkeypatch.chdir(tmp_path)
    adapter = IMIXAdapter([IterationTimerHook()])
    assert adapter.engine.work_dir == str(tmp_path / "work_dirs" / "imix")  # before a Trainer: the current folder
    fit(tmp_path / "root", [adapter], max_steps=1)
    assert adapter.engine.work_dir == str(tmp_path / "root" / "work_dirs" / "imix")
    assert IMIXAdapter([IterationTimerHook()], work_dir=tmp_path / "mine").engine.work_dir == str(tmp_path / "mine")
