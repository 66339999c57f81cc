"""EMA callback: checked against a float64 EMA computed by a plain loop over the recorded training weights."""

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks.callbacks import EMA

torch.manual_seed(1234)
X, Y = torch.randn(16, 4), torch.randn(16, 1)


class Net(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 1))
        self.seen = {}  # stage -> list of weights seen in *_step

    def forward(self, x):
        return self.net(x)

    def _record(self, stage):
        self.seen.setdefault(stage, []).append(_snapshot(self))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        self._record("sanity" if self.trainer.sanity_checking else "val")

    def test_step(self, batch, batch_idx):
        self._record("test")

    def predict_step(self, batch, batch_idx):
        self._record("predict")
        return self(batch[0])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(X, Y), batch_size=4)

    def val_dataloader(self):
        return DataLoader(TensorDataset(X, Y), batch_size=8)

    test_dataloader = predict_dataloader = val_dataloader


def _snapshot(module, buffers=False):
    named = list(module.named_parameters())
    if buffers:
        named += [(n, b) for n, b in module.named_buffers() if b.is_floating_point()]
    return {n: t.detach().double().clone() for n, t in named}


class WeightRecorder(Callback):
    """Records the float64 weights after every optimizer step (independently of EMA)."""

    def __init__(self, buffers=False):
        self.buffers = buffers
        self.after_step = {}  # global_step -> weights
        self.epoch_start = []

    def on_train_epoch_start(self, trainer, pl_module):
        self.epoch_start.append(_snapshot(pl_module))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after_step[trainer.global_step] = _snapshot(pl_module, self.buffers)


def reference_ema(after_step, decay, warmup=True, start_step=0, every_n_steps=1):
    ema, n = None, 0
    for step in sorted(after_step):
        if step <= start_step or (step - start_step - 1) % every_n_steps:
            continue
        w = after_step[step]
        if ema is None:
            ema = {k: v.clone() for k, v in w.items()}
        else:
            d = min(decay, (1 + n) / (10 + n)) if warmup else decay
            ema = {k: d * ema[k] + (1 - d) * w[k] for k in ema}
        n += 1
    return ema, n


def assert_weights_close(actual, expected, atol=1e-6):
    assert actual.keys() == expected.keys()
    for k in expected:
        torch.testing.assert_close(actual[k].double(), expected[k], atol=atol, rtol=0, msg=k)


@pytest.mark.parametrize("include_buffers", [False, True])
def test_ema_matches_float64_reference(make_trainer, include_buffers):
    rec, ema = WeightRecorder(buffers=include_buffers), EMA(decay=0.9, start_step=2, every_n_steps=2, include_buffers=include_buffers)
    trainer = make_trainer(max_epochs=3, limit_val_batches=0, callbacks=[rec, ema])
    trainer.fit(Net())
    expected, n = reference_ema(rec.after_step, 0.9, start_step=2, every_n_steps=2)
    assert ema.num_updates == n == 5  # updates after steps 3, 5, 7, 9, 11 of 12
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_ema_without_warmup(make_trainer):
    rec, ema = WeightRecorder(), EMA(decay=0.7, warmup=False)
    make_trainer(max_steps=6, limit_val_batches=0, callbacks=[rec, ema]).fit(Net())
    expected, _ = reference_ema(rec.after_step, 0.7, warmup=False)
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_validation_sees_ema_training_continues_on_raw(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    initial = _snapshot(model)
    trainer = make_trainer(max_epochs=2, limit_val_batches=1, num_sanity_val_steps=1, callbacks=[rec, ema])
    trainer.fit(model)
    # sanity check runs before any update: raw (initial) weights, nothing swapped
    assert_weights_close(model.seen["sanity"][0], initial, atol=0)
    # end-of-epoch validations see the EMA of the weights up to that step
    for epoch, seen in enumerate(model.seen["val"]):
        last_step = 4 * (epoch + 1)
        expected, _ = reference_ema({s: w for s, w in rec.after_step.items() if s <= last_step}, 0.8)
        assert_weights_close(seen, expected)
        assert any((seen[k] - rec.after_step[last_step][k]).abs().max() > 1e-3 for k in seen)
    # training after validation resumed from the raw weights
    assert_weights_close(rec.epoch_start[1], rec.after_step[4], atol=0)
    assert_weights_close(_snapshot(model), rec.after_step[8], atol=0)


def test_mid_epoch_validation_sees_ema_training_continues_on_raw(make_trainer):
    # reference training: a plain SGD loop over the same batches
    plain = Net()
    opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    after_step = {}
    for _ in range(2):
        for x, y in plain.train_dataloader():
            opt.zero_grad()
            nn.functional.mse_loss(plain(x), y).backward()
            opt.step()
            after_step[len(after_step) + 1] = _snapshot(plain)

    model, ema = Net(), EMA(decay=0.8)
    make_trainer(max_epochs=2, limit_val_batches=1, val_check_interval=0.5, callbacks=[ema]).fit(model)
    assert len(model.seen["val"]) == 4  # after steps 2, 4, 6, 8
    for seen, last_step in zip(model.seen["val"], (2, 4, 6, 8)):
        expected, _ = reference_ema({s: w for s, w in after_step.items() if s <= last_step}, 0.8)
        assert_weights_close(seen, expected)
        assert any((seen[k] - after_step[last_step][k]).abs().max() > 1e-3 for k in seen)
    # each optimizer step after a validation started from the raw weights
    assert_weights_close(_snapshot(model), after_step[8])


class FailingValidationNet(Net):
    def validation_step(self, batch, batch_idx):
        super().validation_step(batch, batch_idx)
        raise RuntimeError("validation failed (injected)")


def test_exception_in_validation_swaps_raw_weights_back(make_trainer):
    model, rec, ema = FailingValidationNet(), WeightRecorder(), EMA(decay=0.8)
    trainer = make_trainer(max_epochs=2, limit_val_batches=1, callbacks=[rec, ema])
    with pytest.raises(RuntimeError, match="injected"):
        trainer.fit(model)
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(model.seen["val"][0], expected)  # the failing validation ran on the EMA
    assert_weights_close(_snapshot(model), rec.after_step[4], atol=0)  # raw weights back
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_no_swap_before_first_update(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8, start_step=5)  # epoch 0 has 4 steps
    make_trainer(max_epochs=2, limit_val_batches=1, callbacks=[rec, ema]).fit(model)
    val0, val1 = model.seen["val"]
    assert_weights_close(val0, rec.after_step[4], atol=0)  # raw weights: no EMA yet
    expected, n = reference_ema(rec.after_step, 0.8, start_step=5)
    assert n == 3
    assert_weights_close(val1, expected)


def test_validate_test_predict_after_fit_use_ema(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    trainer = make_trainer(max_steps=4, limit_val_batches=1, check_val_every_n_epoch=5, callbacks=[rec, ema])
    trainer.fit(model)
    assert "val" not in model.seen
    expected, _ = reference_ema(rec.after_step, 0.8)
    trainer.validate(model, verbose=False)
    trainer.test(model, verbose=False)
    trainer.predict(model)
    for stage in ("val", "test", "predict"):
        assert_weights_close(model.seen[stage][0], expected)
    assert_weights_close(_snapshot(model), rec.after_step[4], atol=0)  # raw weights back


def test_resume_gives_same_ema_as_uninterrupted(make_trainer, tmp_path):
    ema_full = EMA(decay=0.8)
    make_trainer(max_epochs=2, limit_val_batches=0, callbacks=[ema_full]).fit(Net())

    ckpt_cb = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[EMA(decay=0.8), ckpt_cb], enable_checkpointing=True).fit(Net())
    ema_resumed = EMA(decay=0.8)
    trainer = make_trainer(max_epochs=2, limit_val_batches=0, callbacks=[ema_resumed])
    trainer.fit(Net(), ckpt_path=ckpt_cb.last_model_path)
    assert ema_resumed.num_updates == ema_full.num_updates == 8
    full, resumed = ema_full.state_dict()["ema"], ema_resumed.state_dict()["ema"]
    for k in full:
        torch.testing.assert_close(resumed[k], full[k], atol=0, rtol=0)


@pytest.mark.parametrize("ckpt_step", [4, 6])  # end of epoch 0, mid-epoch 1
@pytest.mark.filterwarnings("ignore:Be aware that when using `ckpt_path`")  # the ModelCheckpoint is not resumed
@pytest.mark.filterwarnings("ignore:You're resuming from a checkpoint that ended before")  # the reference follows the run
def test_resume_reusing_the_same_instance_continues_from_the_checkpoint(make_trainer, tmp_path, ckpt_step):
    # the instance still holds the first run's tensors (of another module, 8 steps further): the resumed run must
    # average on top of the checkpoint's EMA and into the new module's tensors
    rec1, ema = WeightRecorder(), EMA(decay=0.8)
    ckpt_cb = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=ckpt_step, save_top_k=-1)
    make_trainer(max_steps=8, limit_val_batches=0, callbacks=[rec1, ema, ckpt_cb], enable_checkpointing=True).fit(Net())
    (path,) = (tmp_path / "ckpt").glob(f"*step={ckpt_step}.ckpt")

    rec2 = WeightRecorder()
    make_trainer(max_steps=10, limit_val_batches=0, callbacks=[rec2, ema]).fit(Net(), ckpt_path=path)
    weights = {s: w for s, w in rec1.after_step.items() if s <= ckpt_step} | rec2.after_step
    assert sorted(weights) == list(range(1, 11))
    expected, n = reference_ema(weights, 0.8)
    assert ema.num_updates == n == 10
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_accumulation_updates_once_per_optimizer_step(make_trainer):
    rec, ema = WeightRecorder(), EMA(decay=0.8)
    trainer = make_trainer(max_epochs=2, limit_val_batches=0, accumulate_grad_batches=2, callbacks=[rec, ema])
    trainer.fit(Net())
    assert trainer.global_step == 4
    expected, n = reference_ema(rec.after_step, 0.8)
    assert ema.num_updates == n == 4
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_export_state_dict_loads_into_plain_model(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    with pytest.raises(RuntimeError, match="EMA.export_state_dict: no EMA update"):
        ema.export_state_dict(model)
    make_trainer(max_steps=3, limit_val_batches=0, callbacks=[rec, ema]).fit(model)
    fresh = Net()
    fresh.load_state_dict(ema.export_state_dict(model))
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(_snapshot(fresh), expected)
    torch.testing.assert_close(fresh.net[1].running_mean, model.net[1].running_mean)  # live buffers


def test_checkpoint_state_dict_holds_raw_weights(make_trainer, tmp_path):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    trainer = make_trainer(max_steps=3, limit_val_batches=0, callbacks=[rec, ema])
    trainer.fit(model)
    trainer.save_checkpoint(tmp_path / "x.ckpt")
    ckpt = torch.load(tmp_path / "x.ckpt", weights_only=True)
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(ckpt["callbacks"]["EMA"]["ema"], expected)
    assert_weights_close({k: ckpt["state_dict"][k].double() for k in expected}, rec.after_step[3], atol=0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"decay": 1.0}, "EMA: `decay`"), ({"every_n_steps": 0}, "EMA: `every_n_steps`"), ({"start_step": -1}, "EMA: `start_step`")],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        EMA(**kwargs)


def test_load_mismatched_state_is_a_clear_error(make_trainer):
    ema = EMA()
    ema.load_state_dict({"num_updates": 1, "ema": {"other.weight": torch.zeros(1)}})
    with pytest.raises(RuntimeError, match="EMA: the stored EMA does not match"):
        make_trainer(max_steps=1, limit_val_batches=0, callbacks=[ema]).fit(Net())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_offload_on_cuda(make_trainer):
    rec, ema = WeightRecorder(), EMA(decay=0.8, cpu=True)
    model = Net()
    make_trainer(accelerator="cuda", max_epochs=1, limit_val_batches=1, deterministic=False, callbacks=[rec, ema]).fit(model)
    state = ema.state_dict()["ema"]
    assert all(t.device.type == "cpu" for t in state.values())
    expected, _ = reference_ema(rec.after_step, 0.8)
    expected = {k: v.cpu() for k, v in expected.items()}  # recorded on the GPU; the offloaded EMA is on the CPU
    assert_weights_close(state, expected, atol=1e-5)
    assert_weights_close({k: v.cpu() for k, v in model.seen["val"][0].items()}, expected, atol=1e-5)
    assert_weights_close({k: v.cpu() for k, v in _snapshot(model).items()}, {k: v.cpu() for k, v in rec.after_step[4].items()}, atol=0)


def _storages(module):
    return {p.untyped_storage().data_ptr() for p in module.parameters()}


def test_parameters_become_views_of_one_buffer_keeping_identity(make_trainer):
    model, ema = Net(), EMA(decay=0.8)
    params = list(model.parameters())
    trainer = make_trainer(max_steps=2, limit_val_batches=0, callbacks=[ema])
    trainer.fit(model)
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    assert [id(p) for p in trainer.optimizers[0].param_groups[0]["params"]] == [id(p) for p in params]
    assert len(_storages(model)) == 1  # one flat buffer
    assert sum(p.numel() for p in params) == params[0].untyped_storage().nbytes() // 4


def test_flatten_false_keeps_parameter_storage(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8, flatten=False)
    before = _storages(model)
    make_trainer(max_steps=4, limit_val_batches=0, callbacks=[rec, ema]).fit(model)
    assert _storages(model) == before and len(before) == len(list(model.parameters()))
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(ema.state_dict()["ema"], expected)


class ReplaceData(Callback):
    """Gives one parameter new storage (``p.data = clone``) after the given optimizer steps (mid-epoch)."""

    def __init__(self, steps):
        self.steps = steps

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step in self.steps:
            w = pl_module.net[0].weight
            w.data = w.data.clone()


def test_parameter_data_replaced_mid_epoch_falls_back(make_trainer):
    # ReplaceData runs before EMA in the same on_train_batch_end: the update right after the replacement must
    # already average the new storage (the flat buffer no longer holds the live weight)
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    make_trainer(max_epochs=2, limit_val_batches=1, callbacks=[rec, ReplaceData({2, 6}), ema]).fit(model)
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(ema.state_dict()["ema"], expected)
    expected4, _ = reference_ema({s: w for s, w in rec.after_step.items() if s <= 4}, 0.8)
    assert_weights_close(model.seen["val"][0], expected4)


def test_shared_storage_is_left_alone(make_trainer):
    model, rec, ema = Net(), WeightRecorder(), EMA(decay=0.8)
    model.tied = nn.Parameter(torch.empty(6))
    model.tied.data = model.net[0].bias.data  # tied through .data: flattening would untie them
    make_trainer(max_steps=4, limit_val_batches=0, callbacks=[rec, ema]).fit(model)
    assert model.tied.data_ptr() == model.net[0].bias.data_ptr()
    expected, _ = reference_ema(rec.after_step, 0.8)
    assert_weights_close(ema.state_dict()["ema"], expected)


def test_flat_checkpoint_does_not_grow_and_loads_weights_only(make_trainer, tmp_path):
    sizes = {}
    for flatten in (False, True):
        ckpt = ModelCheckpoint(dirpath=tmp_path / str(flatten), save_last=True)
        model, ema = Net(), EMA(decay=0.8, flatten=flatten)
        make_trainer(max_steps=4, limit_val_batches=0, callbacks=[ema, ckpt], enable_checkpointing=True).fit(model)
        sizes[flatten] = (tmp_path / str(flatten) / "last.ckpt").stat().st_size
        loaded = torch.load(ckpt.last_model_path, weights_only=True)
        fresh = Net()
        fresh.load_state_dict(loaded["state_dict"])
        assert_weights_close(_snapshot(fresh), _snapshot(model), atol=0)
        state = ema.state_dict()["ema"]
        for k, v in loaded["callbacks"]["EMA"]["ema"].items():
            torch.testing.assert_close(v, state[k], atol=0, rtol=0)
    assert sizes[True] <= sizes[False]
