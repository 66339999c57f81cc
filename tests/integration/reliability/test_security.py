"""Checkpoints the package writes load with ``torch.load(weights_only=True)``: no pickled objects."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from reliability_kit import fit
from reliability_resume_run import Net

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter


def test_reliability_mmengine_message_hub_is_stored_plain_and_rebuilt(tmp_path):
    from mmengine.hooks import CheckpointHook, EMAHook, RuntimeInfoHook
    from mmengine.logging import HistoryBuffer

    adapter = MMEngineAdapter([RuntimeInfoHook(), EMAHook(), CheckpointHook(interval=1)], work_dir=tmp_path)
    trainer = fit(tmp_path, [adapter])
    trainer.save_checkpoint(tmp_path / "final.ckpt")
    hub = adapter.runner.message_hub
    # MMEngine's own state_dict pickles HistoryBuffer objects (numpy inside): weights_only refuses them
    torch.save({"message_hub": hub.state_dict()}, tmp_path / "raw.pt")
    with pytest.raises(pickle.UnpicklingError, match="HistoryBuffer"):
        torch.load(tmp_path / "raw.pt", weights_only=True)

    ckpt = torch.load(tmp_path / "epoch_1.pth", weights_only=True)  # CheckpointHook's file via runner.save_checkpoint
    assert isinstance(ckpt["message_hub"]["log_scalars"]["train/loss"]["log_history"], torch.Tensor)
    assert "ema_state_dict" in ckpt and ckpt["meta"]["epoch"] == 1
    state = torch.load(tmp_path / "final.ckpt", weights_only=True)["callbacks"][adapter.state_key]
    fresh = MMEngineAdapter([RuntimeInfoHook(), EMAHook(), CheckpointHook(interval=1)])
    fresh.load_state_dict(state)
    rebuilt = fresh.runner.message_hub
    assert rebuilt.log_scalars.keys() == hub.log_scalars.keys()
    for key, buffer in hub.log_scalars.items():
        assert isinstance(rebuilt.get_scalar(key), HistoryBuffer)
        for mine, theirs in zip(rebuilt.get_scalar(key).data, buffer.data):
            np.testing.assert_array_equal(mine, theirs)
            assert mine.dtype == theirs.dtype
    assert rebuilt.runtime_info == hub.runtime_info


def test_reliability_classy_checkpoint_files_load_weights_only(tmp_path):
    from classy_vision.hooks import CheckpointHook, ExponentialMovingAverageModelHook

    adapter = ClassyAdapter([CheckpointHook(str(tmp_path)), ExponentialMovingAverageModelHook(0.9, device="cpu")])
    trainer = fit(tmp_path, [adapter])
    trainer.save_checkpoint(tmp_path / "lightning.ckpt")
    classy = torch.load(tmp_path / "checkpoint.torch", weights_only=True)["classy_state_dict"]
    assert "ema_model_state" in classy["hooks"]["ExponentialMovingAverageModelHook"]
    state = torch.load(tmp_path / "lightning.ckpt", weights_only=True)["callbacks"][adapter.state_key]
    assert state["family"] == "classy" and "ExponentialMovingAverageModelHook" in state["hooks"]


def test_reliability_imix_checkpoint_files_load_weights_only(tmp_path):
    from imix.engine.hooks import CheckPointHook, IterationTimerHook
    from imix.utils.checkpoint import Checkpointer

    net = Net()
    adapter = IMIXAdapter([IterationTimerHook(), CheckPointHook(Checkpointer(net, save_dir=str(tmp_path)), prefix="net")])
    trainer = fit(tmp_path, [adapter], model=net)
    trainer.save_checkpoint(tmp_path / "lightning.ckpt")
    saved = torch.load(tmp_path / "net_epoch0(6iters)_model.pth", weights_only=True)
    assert saved["model"].keys() == net.state_dict().keys()
    assert torch.load(tmp_path / "lightning.ckpt", weights_only=True)["callbacks"][adapter.state_key]["family"] == "imix"


class _RunsCode:
    """Unpickling this object runs ``touch MARKER`` (what a crafted checkpoint does with ``os.system``)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_reliability_mmengine_runner_load_checkpoint_runs_no_code_from_the_file(tmp_path):
    from mmengine.hooks import EMAHook

    marker = tmp_path / "pwned"
    torch.save({"state_dict": {}, "meta": {"x": _RunsCode(str(marker))}}, tmp_path / "crafted.pth")
    adapter = MMEngineAdapter([EMAHook()])
    fit(tmp_path, [adapter])
    with pytest.raises(pickle.UnpicklingError, match=r"runner\.load_checkpoint: '.*crafted\.pth' holds pickled objects "
                                                     r"that weights_only=True refuses .*posix\.system.*If you trust "
                                                     r"the file, call runner\.load_checkpoint\(\.\.\., "
                                                     r"weights_only=False\)"):  # fmt: skip
        adapter.runner.load_checkpoint(str(tmp_path / "crafted.pth"))
    assert not marker.exists()
    # opting out by name loads it (and runs the code: the user said they trust it)
    adapter.runner.load_checkpoint(str(tmp_path / "crafted.pth"), weights_only=False)
    assert marker.exists()
