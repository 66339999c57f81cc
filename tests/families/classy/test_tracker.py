"""``HookScalars`` (families/classy/tracker.py) on its own: a TensorBoard hook's writer sends each scalar to the
Lightning loggers at the hook's step while writing as before, and everything is undone at teardown or after a
failure. The differential against classy_train.py and VISSL's launcher is tests/families/classy/test_loggers.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("classy_vision")


class Recorder:
    """A Lightning logger's ``log_metrics``, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict, int]] = []

    def log_metrics(self, metrics: dict, step: int) -> None:
        self.calls.append((metrics, step))


class Module:
    log_phase_values = True


def _run(tmp_path, loggers):
    from classy_vision.hooks import TensorboardPlotHook
    from torch.utils.tensorboard import SummaryWriter

    from lightning_hooks.families.classy.adapter import ClassyAdapter
    from lightning_hooks.families.classy.tracker import HookScalars

    writer = SummaryWriter(str(tmp_path))
    trainer = SimpleNamespace(loggers=loggers, callbacks=[ClassyAdapter([TensorboardPlotHook(writer, log_period=1)])])
    return writer, trainer, Module(), HookScalars()


@pytest.mark.parametrize("end", ["teardown", "on_exception"])
def test_the_writer_s_scalars_reach_the_loggers_at_its_steps_until_the_end(tmp_path, end):
    recorder = Recorder()
    writer, trainer, module, callback = _run(tmp_path, [recorder])
    callback.setup(trainer, module, "fit")
    writer.add_scalar("Losses/train", torch.tensor(0.5), global_step=3)
    writer.add_scalar(tag="Training/Loss", scalar_value=0.25, global_step=7)
    assert recorder.calls == [({"Losses/train": 0.5}, 3), ({"Training/Loss": 0.25}, 7)]
    assert module.log_phase_values is False
    if end == "teardown":
        callback.teardown(trainer, module, "fit")
    else:
        callback.on_exception(trainer, module, RuntimeError("boom"))
    assert "add_scalar" not in vars(writer) and "log_phase_values" not in vars(module)
    writer.add_scalar("Losses/train", 1.0, global_step=4)
    assert len(recorder.calls) == 2
    writer.close()


def test_without_a_lightning_logger_nothing_changes(tmp_path):
    writer, trainer, module, callback = _run(tmp_path, [])
    callback.setup(trainer, module, "fit")
    assert "add_scalar" not in vars(writer) and module.log_phase_values is True
    writer.close()
