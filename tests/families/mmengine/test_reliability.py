"""Reliability round 3 (issue #24) for MMEngine hooks: fast_dev_run, current instances, a plain Lightning checkpoint,
the default work dir, a removed EMAHook, impossible intervals."""

from __future__ import annotations

import os
import warnings

import lightning.pytorch as pl
import pytest
import torch
from mmengine.hooks import CheckpointHook, EMAHook, Hook, LoggerHook
from mmengine.logging import MessageHub, MMLogger, print_log
from mmengine.visualization import Visualizer
from mmengine_testkit import LitToy, RecorderHook, hook_of, loaders, make_model, run_lightning, run_mmengine

from lightning_hooks.families.mmengine import MMEngineAdapter


def _trainer(root, adapter, **kwargs) -> pl.Trainer:
    options = dict(max_epochs=1, default_root_dir=root, enable_checkpointing=False, logger=False,
                   enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    return pl.Trainer(callbacks=[adapter], **{**options, **kwargs})


def _fit(root, adapter, **kwargs) -> tuple[pl.Trainer, LitToy]:
    trainer, module = _trainer(root, adapter, **kwargs), LitToy(make_model())
    trainer.fit(module, *loaders())
    return trainer, module


def _tree(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


# ---------------------------------------------------------------------------------------- fast_dev_run
class SavesItself(Hook):
    """A third-party hook that calls ``runner.save_checkpoint`` itself (into ``out``), and logs through the runner's
    logger."""

    def __init__(self, out) -> None:
        self.out = str(out)

    def after_train_epoch(self, runner) -> None:
        self.work_dir = runner.work_dir
        runner.logger.info("custom save")
        runner.save_checkpoint(self.out, "custom.pth")


def test_mmengine_fast_dev_run_writes_no_checkpoint_and_no_log_files(tmp_path):
    saver = SavesItself(tmp_path / "custom")
    adapter = MMEngineAdapter(
        [CheckpointHook(interval=1), LoggerHook(interval=1), saver], work_dir=tmp_path / "work",
        cfg=dict(note="dumped by the Runner"),
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"MMEngineAdapter: Trainer\(fast_dev_run=True\) suppresses checkpointing and "
                      r"logging, so its checkpoint hooks CheckpointHook are skipped .*; and its runner's work_dir is a "
                      r"temporary folder, removed when the run ends.* Run without fast_dev_run"):  # fmt: skip
        _fit(tmp_path, adapter, fast_dev_run=True)
    assert not (tmp_path / "work").exists(), _tree(tmp_path / "work")
    assert not os.path.exists(saver.work_dir)  # the run's temporary work dir is gone
    assert not (tmp_path / "custom").exists()  # runner.save_checkpoint wrote nothing
    assert _tree(tmp_path) == []  # nothing under the root either (no lightning_logs, no {timestamp}/)
    # a later real run with resume finds nothing to resume from, and writes its files
    adapter2 = MMEngineAdapter([CheckpointHook(interval=1)], work_dir=tmp_path / "work")
    _fit(tmp_path, adapter2)
    assert (tmp_path / "work" / "epoch_1.pth").exists() and (tmp_path / "work" / "last_checkpoint").exists()


# ------------------------------------------------------------------------------------- current instances
class CurrentProbe(Hook):
    """Records which MessageHub / Visualizer / MMLogger are current while the run goes, and logs to 'current'."""

    def __init__(self, tag: str) -> None:
        self.tag, self.seen = tag, []

    def before_train(self, runner) -> None:
        self.seen.append((MessageHub.get_current_instance(), Visualizer.get_current_instance(),
                          MMLogger.get_current_instance()))  # fmt: skip
        print_log(f"line of {self.tag}", logger="current")


def _log_text(adapter: MMEngineAdapter) -> str:
    runner = adapter.runner
    with open(os.path.join(runner.log_dir, f"{runner.timestamp}.log")) as f:
        return f.read()


def test_mmengine_each_fit_makes_its_own_instances_current_and_restores_the_previous_ones(tmp_path):
    a, b = CurrentProbe("A"), CurrentProbe("B")
    adapter_a = MMEngineAdapter([a], work_dir=tmp_path / "a", experiment_name="a")
    adapter_b = MMEngineAdapter([b], work_dir=tmp_path / "b", experiment_name="b")  # built last: B's are current
    before = (MessageHub.get_current_instance(), Visualizer.get_current_instance(), MMLogger.get_current_instance())
    for adapter in (adapter_a, adapter_b, adapter_a):
        _fit(tmp_path, adapter, max_steps=1, limit_val_batches=0)
        # after each fit, the instances current before it are current again
        assert MessageHub.get_current_instance() is before[0]
        assert Visualizer.get_current_instance() is before[1]
    for probe, adapter in ((a, adapter_a), (b, adapter_b)):
        runner = adapter.runner
        assert all(seen == (runner.message_hub, runner.visualizer, runner.logger) for seen in probe.seen), probe.tag
    assert _log_text(adapter_a).count("line of A") == 2 and "line of B" not in _log_text(adapter_a)
    assert _log_text(adapter_b).count("line of B") == 1 and "line of A" not in _log_text(adapter_b)


# ------------------------------------------------------------------------ a plain Lightning checkpoint
BY_ITER = dict(
    default_hooks=dict(checkpoint=dict(type="CheckpointHook", by_epoch=False, interval=4)),
    custom_hooks=[dict(type="RecorderHook")],
)


def test_mmengine_resume_from_a_plain_lightning_checkpoint_follows_the_restored_loop(tmp_path):
    runner = run_mmengine(tmp_path / "mm", max_epochs=3, **BY_ITER)
    # one epoch (4 batches) without the adapter, then resumed with MMEngine hooks added
    plain = pl.Trainer(max_epochs=1, default_root_dir=tmp_path / "plain", logger=False, enable_progress_bar=False,
                       enable_model_summary=False)  # fmt: skip
    plain.fit(LitToy(make_model()), *loaders())
    (ckpt,) = (tmp_path / "plain").rglob("*.ckpt")
    with pytest.warns(UserWarning, match=r"MMEngineAdapter \(RuntimeInfoHook, .*CheckpointHook\): the checkpoint .* holds "
                      r"no MMEngineAdapter state .*runner\.iter 4 and runner\.epoch 1 follow Lightning's restored loop"):  # fmt: skip
        _, adapter, _ = run_lightning(tmp_path / "lt", max_epochs=3, resume_from=str(ckpt), **BY_ITER)
    mm_events = [e for e in hook_of(runner.hooks, RecorderHook).events if e[0].endswith("train_iter") and e[2] >= 4]
    lt_events = [e for e in hook_of(adapter.hooks, RecorderHook).events if e[0].endswith("train_iter")]
    assert lt_events == mm_events  # (mount point, runner.epoch, runner.iter, batch_idx) from the restored step on
    pths = {p.name for p in (tmp_path / "lt").glob("*.pth")}
    assert pths == {"iter_8.pth", "iter_12.pth"}  # the Runner's files after step 4 (not iter_4.pth after 8 batches)


# -------------------------------------------------------------------------------------- default work dir
def test_mmengine_default_work_dir_is_work_dirs_under_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    adapter = MMEngineAdapter([LoggerHook(interval=1)])
    _fit(tmp_path / "root", adapter, max_steps=2, limit_val_batches=0)
    work = tmp_path / "root" / "work_dirs" / "mmengine"
    assert adapter.runner.work_dir == str(work)
    assert sorted(os.listdir(tmp_path)) == ["root"]  # nothing straight in the current folder
    assert sorted(os.listdir(tmp_path / "root")) == ["work_dirs"]
    ts = adapter.runner.timestamp
    assert {f"{ts}.py", ts} <= set(os.listdir(work))
    assert (work / ts / f"{ts}.log").exists() and list((work / ts / "vis_data").glob("*.json"))


def test_mmengine_default_work_dir_is_named_after_the_config_file(tmp_path, monkeypatch):
    config = tmp_path / "toy_1e.py"
    config.write_text("custom_hooks = [dict(type='RecorderHook')]\n")
    monkeypatch.chdir(tmp_path)
    adapter = MMEngineAdapter.from_file(str(config))
    _fit(tmp_path / "root", adapter, max_steps=1, limit_val_batches=0)
    assert adapter.runner.work_dir == str(tmp_path / "root" / "work_dirs" / "toy_1e")
    assert (tmp_path / "root" / "work_dirs" / "toy_1e" / "toy_1e.py").exists()


# --------------------------------------------------------------------------------------- removed EMAHook
def test_mmengine_resume_without_ema_hook_says_the_run_continues_from_the_ema_weights(tmp_path):
    hooks = dict(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1)),
                 custom_hooks=[dict(type="EMAHook", momentum=0.2)])  # fmt: skip
    run_lightning(tmp_path / "lt", max_epochs=1, **hooks)
    ckpt = torch.load(tmp_path / "lt" / "epoch_1.pth", weights_only=False)
    with pytest.warns(UserWarning, match=r"removed \(state dropped\): \['EMAHook'\]\. The model continues from the "
                      r"checkpoint's model weights, which are EMAHook's averaged \(EMA\) weights.*ema_state_dict.*"
                      r"keep EMAHook"):  # fmt: skip
        _, _, module = run_lightning(tmp_path / "lt2", max_epochs=1, resume_from=str(tmp_path / "lt" / "epoch_1.pth"),
                                     default_hooks=hooks["default_hooks"])  # fmt: skip
    del module, ckpt


# ----------------------------------------------------------------------------------- impossible intervals
@pytest.mark.parametrize(("hook", "option", "mount"), [
    (lambda: CheckpointHook(interval=-1), "interval=-1", "after_train_epoch"),
    (lambda: CheckpointHook(interval=0, by_epoch=False), "interval=0", "after_train_iter"),
])  # fmt: skip
def test_mmengine_intervals_below_one_warn_at_adapt_time(hook, option, mount):
    built = hook()
    with pytest.warns(UserWarning, match=rf"MMEngineAdapter: {type(built).__name__} was built with {option}: its "
                      rf"periodic work in {mount} never runs"):  # fmt: skip
        MMEngineAdapter([built])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MMEngineAdapter([CheckpointHook(interval=1), LoggerHook(interval=1), EMAHook()])


def test_mmengine_a_failing_fit_restores_the_previous_instances_after_its_hooks_on_exception(tmp_path):
    class Fails(CurrentProbe):
        def before_train(self, runner) -> None:
            raise RuntimeError("boom")

        def on_exception(self, runner, exception) -> None:
            super().before_train(runner)

    probe = Fails("F")
    adapter = MMEngineAdapter([probe], work_dir=tmp_path / "f", experiment_name="f")
    MMEngineAdapter([CurrentProbe("O")], work_dir=tmp_path / "o", experiment_name="o")  # built last: its are current
    before = (MessageHub.get_current_instance(), Visualizer.get_current_instance())
    assert before[0] is not adapter.runner.message_hub
    with pytest.raises(RuntimeError, match="boom"):
        _fit(tmp_path, adapter, max_steps=1, limit_val_batches=0)
    runner = adapter.runner
    assert probe.seen == [(runner.message_hub, runner.visualizer, runner.logger)]  # on_exception still in the run's
    assert (MessageHub.get_current_instance(), Visualizer.get_current_instance()) == before
