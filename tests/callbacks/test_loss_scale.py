"""LossScaleMonitor: a real GradScaler (CPU fp16 autocast), infs injected at known steps."""

import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.plugins.precision import MixedPrecision

from lightning_hooks.callbacks import LossScaleMonitor


class InfAt(BoringModel):
    def __init__(self, inf_steps=()):
        super().__init__()
        self.inf_steps = set(inf_steps)

    def training_step(self, batch, batch_idx):
        out = super().training_step(batch, batch_idx)
        if self.global_step in self.inf_steps:
            out["loss"] = out["loss"] * float("inf")
        return out


class MetricsRecorder(Callback):
    """Placed after the monitor: what it logged at each step."""

    def __init__(self):
        self.logged = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.logged[trainer.global_step] = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("loss_scale")}


def fp16_cpu(init_scale=1024.0):
    return MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=1000))


def test_counts_and_logged_scale_on_cpu_fp16(make_trainer):
    monitor, rec = LossScaleMonitor(), MetricsRecorder()
    trainer = make_trainer(max_steps=6, limit_val_batches=0, callbacks=[monitor, rec], plugins=[fp16_cpu()])
    trainer.fit(InfAt(inf_steps=(2, 4)))
    # GradScaler halves the scale after each step with non-finite gradients (backoff_factor=0.5)
    assert [rec.logged[s]["loss_scale"] for s in range(1, 7)] == [1024, 1024, 512, 512, 256, 256]
    assert [rec.logged[s]["loss_scale/skipped_steps"] for s in range(1, 7)] == [0, 0, 1, 1, 2, 2]
    assert [rec.logged[s]["loss_scale/nonfinite_steps"] for s in range(1, 7)] == [0, 0, 1, 1, 2, 2]
    assert monitor.state_dict() == {"skipped_steps": 2, "nonfinite_steps": 2}


def test_state_survives_resume(make_trainer, tmp_path):
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    make_trainer(max_epochs=1, limit_train_batches=4, limit_val_batches=0, enable_checkpointing=True,
                 callbacks=[LossScaleMonitor(), ckpt], plugins=[fp16_cpu()]).fit(InfAt(inf_steps=(1,)))
    monitor = LossScaleMonitor()
    trainer = make_trainer(max_epochs=2, limit_train_batches=4, limit_val_batches=0, callbacks=[monitor], plugins=[fp16_cpu()])
    trainer.fit(InfAt(inf_steps=(6,)), ckpt_path=ckpt.last_model_path)
    assert monitor.skipped_steps == monitor.nonfinite_steps == 2
    assert trainer.precision_plugin.scaler.get_scale() == 256


def test_without_scaler_warns_once_and_does_nothing(make_trainer):
    monitor, rec = LossScaleMonitor(), MetricsRecorder()
    trainer = make_trainer(max_steps=2, limit_val_batches=0, callbacks=[monitor, rec])
    with pytest.warns(UserWarning, match="LossScaleMonitor: precision='32-true' has no GradScaler") as record:
        trainer.fit(BoringModel())
        trainer.fit(BoringModel())  # second fit on the same callback: no second warning
    assert sum("LossScaleMonitor" in str(w.message) for w in record) == 1
    assert rec.logged == {1: {}, 2: {}}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fp16(make_trainer):
    monitor, rec = LossScaleMonitor(), MetricsRecorder()
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0, growth_interval=1000)
    trainer = make_trainer(accelerator="cuda", deterministic=False, max_steps=4, limit_val_batches=0,
                           callbacks=[monitor, rec], plugins=[MixedPrecision("16-mixed", "cuda", scaler)])
    trainer.fit(InfAt(inf_steps=(1,)))
    assert monitor.skipped_steps == monitor.nonfinite_steps == 1
    assert [rec.logged[s]["loss_scale"] for s in range(1, 5)] == [1024, 512, 512, 512]


def test_load_state_dict_names_the_expected_keys():
    with pytest.raises(KeyError, match=r"LossScaleMonitor: unexpected state keys \[\]; expected \['nonfinite_steps', 'skipped_steps'\]\. The checkpoint was not written by lightning_hooks.callbacks.LossScaleMonitor"):
        LossScaleMonitor().load_state_dict({})
