"""AnomalyDetector: NaNs injected at a known module/op/step; expectations follow from the injection."""

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks.callbacks import AnomalyDetector

torch.manual_seed(99)
X, Y = torch.randn(32, 4), torch.randn(32, 1)


class InjectNaN(nn.Module):
    """Identity, except that its output gets a NaN while ``active``."""

    active = False

    def forward(self, x):
        if self.active:
            x = x.clone()
            x[0, 0] = float("nan")
        return x


class NaNGrad(torch.autograd.Function):
    """Identity forward; NaN gradient in backward while ``active``."""

    active = False

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan") if NaNGrad.active else grad


class BackwardNaN(nn.Module):
    def forward(self, x):
        return NaNGrad.apply(x)


class Net(pl.LightningModule):
    def __init__(self, nan_step=-1, where="forward", input_nan=False):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), InjectNaN(), nn.Tanh(), BackwardNaN(), nn.Linear(8, 1))
        self.nan_step, self.where, self.input_nan = nan_step, where, input_nan

    def training_step(self, batch, batch_idx):
        x, y = batch
        hit = self.global_step == self.nan_step
        self.net[1].active = hit and self.where == "forward"
        NaNGrad.active = hit and self.where == "backward"
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        x = X.clone()
        if self.input_nan:
            x[5, 2] = float("nan")  # batch 1
        return DataLoader(TensorDataset(x, Y), batch_size=4)


class Recorder(Callback):
    def __init__(self):
        self.after_step = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.after_step[trainer.global_step] = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}


def nonfinite_grad_params(model, batch):
    """Independent reference: plain forward/backward of the injected step."""
    model.zero_grad()
    model.training_step(batch, 0).backward()
    return sorted(n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all())


def test_forward_nan_reports_module_params_and_op(make_trainer):
    model = Net(nan_step=2, where="forward")
    with pytest.raises(FloatingPointError) as exc:
        make_trainer(max_steps=5, limit_val_batches=0, callbacks=[AnomalyDetector()]).fit(model)
    report = str(exc.value)
    assert "global step 2" in report
    assert "first module with non-finite output (replay): net.1 (InjectNaN)" in report
    assert "backward op that returned NaN (anomaly mode): MseLossBackward0" in report
    assert "loss finite: False" in report and "input batch finite: True" in report
    [line] = [ln for ln in report.splitlines() if "parameters with non-finite gradients" in ln]
    reported = sorted(line.split(": ", 1)[1].split(", "))
    assert reported == nonfinite_grad_params(model, (X[8:12], Y[8:12]))


def test_backward_only_nan_points_at_backward_op(make_trainer):
    model = Net(nan_step=1, where="backward")
    with pytest.raises(FloatingPointError) as exc:
        make_trainer(max_steps=5, limit_val_batches=0, callbacks=[AnomalyDetector()]).fit(model)
    report = str(exc.value)
    assert "loss finite: True" in report
    assert "first module with non-finite output (replay): none" in report
    assert "backward op that returned NaN (anomaly mode): NaNGradBackward" in report
    # only the parameters upstream of the NaN-gradient op are hit
    assert "parameters with non-finite gradients (2): net.0.weight, net.0.bias" in report
    assert "forward call of that op:" in report and "return NaNGrad.apply(x)" in report


def test_input_nan_reported(make_trainer):
    model = Net(input_nan=True)
    with pytest.raises(FloatingPointError, match=r"(?s)global step 1 .*input batch finite: False.*first module with non-finite output \(replay\): net.0 \(Linear\)"):
        make_trainer(max_steps=3, limit_val_batches=0, callbacks=[AnomalyDetector()]).fit(model)


def test_skip_policy_leaves_weights_and_continues(make_trainer):
    model, rec, det = Net(nan_step=2, where="forward"), Recorder(), AnomalyDetector(policy="skip")
    with pytest.warns(UserWarning, match="this optimizer step is skipped"):
        make_trainer(max_steps=5, limit_val_batches=0, callbacks=[det, rec]).fit(model)
    assert det.skipped_steps == 1
    for k, v in rec.after_step[2].items():  # the step taken at global_step 2 changed nothing
        assert torch.equal(rec.after_step[3][k], v), k
        assert torch.isfinite(rec.after_step[5][k]).all()
    assert not torch.equal(rec.after_step[5]["net.0.weight"], rec.after_step[3]["net.0.weight"])  # training went on
    # a clean reference run (no injection) agrees exactly up to the skipped step
    ref, ref_rec = Net(), Recorder()
    make_trainer(max_steps=2, limit_val_batches=0, callbacks=[ref_rec]).fit(ref)
    for k, v in ref_rec.after_step[2].items():
        assert torch.equal(rec.after_step[2][k], v)
    assert det.state_dict() == {"skipped_steps": 1}


def test_save_policy_writes_batch_checkpoint_report(make_trainer, tmp_path):
    model = Net(nan_step=3, where="forward")
    with pytest.raises(FloatingPointError, match="saved batch.pt, checkpoint.ckpt and report.txt"):
        make_trainer(max_steps=6, limit_val_batches=0, callbacks=[AnomalyDetector(policy="save", dirpath=str(tmp_path / "dbg"))]).fit(model)
    out = tmp_path / "dbg" / "step=3"
    [(batch, batch_idx)] = torch.load(out / "batch.pt", weights_only=True)
    assert batch_idx == 3
    assert torch.equal(batch[0], X[12:16]) and torch.equal(batch[1], Y[12:16])
    ckpt = torch.load(out / "checkpoint.ckpt", weights_only=True)
    assert ckpt["global_step"] == 3
    assert "net.1 (InjectNaN)" in (out / "report.txt").read_text()


def test_clean_run_and_accumulation_do_not_trigger(make_trainer):
    det = AnomalyDetector()
    make_trainer(max_steps=4, limit_val_batches=0, accumulate_grad_batches=2, callbacks=[det]).fit(Net())
    assert det.skipped_steps == 0 and det.report is None


def test_nan_in_first_micro_batch_found_by_replaying_the_window(make_trainer):
    class FirstMicroBatch(Net):
        def training_step(self, batch, batch_idx):
            self.net[1].active = batch_idx == 2  # micro-batch 2 of the window (2, 3)
            return nn.functional.mse_loss(self.net(batch[0]), batch[1])

    with pytest.raises(FloatingPointError, match=r"(?s)batch_idx \[2, 3\].*net.1 \(InjectNaN\)"):
        make_trainer(max_steps=4, limit_val_batches=0, accumulate_grad_batches=2, callbacks=[AnomalyDetector()]).fit(FirstMicroBatch())


def test_gradscaler_overflow_is_left_to_the_scaler(make_trainer):
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**60)  # forces fp16 gradient overflow
    det = AnomalyDetector()
    trainer = make_trainer(max_steps=3, limit_val_batches=0, callbacks=[det], plugins=[MixedPrecision("16-mixed", "cpu", scaler)])
    trainer.fit(Net())
    assert scaler.get_scale() < 2.0**60  # the scaler did skip steps
    assert det.report is None


class BNNet(pl.LightningModule):
    """Linear -> BatchNorm -> Dropout -> InjectNaN -> Linear; Inf in the input batch at ``inf_step``."""

    def __init__(self, make_optimizer=None, inf_step=-1, nan_step=-1, dropout=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(dropout), InjectNaN(), nn.Linear(8, 1))
        self.make_optimizer, self.inf_step, self.nan_step = make_optimizer, inf_step, nan_step

    def loss(self, batch, step):
        x = batch[0].clone()
        if step == self.inf_step:
            x[0, 0] = float("inf")
        self.net[3].active = step == self.nan_step
        return nn.functional.mse_loss(self.net(x), batch[1])

    def training_step(self, batch, batch_idx):
        return self.loss(batch, self.global_step)

    def configure_optimizers(self):
        return self.make_optimizer(self.parameters()) if self.make_optimizer else torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return DataLoader(TensorDataset(X, Y), batch_size=4)


OPTIMIZERS = {
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
}


@pytest.mark.parametrize(("opt", "accumulate"), [("sgd_momentum", 1), ("adam", 1), ("adam", 2)])
def test_skip_policy_undoes_buffers_and_leaves_optimizer_state(make_trainer, opt, accumulate):
    """Inf input at step 2 poisons BatchNorm's running stats; the run must equal one that never saw that step."""
    make_optimizer, steps = OPTIMIZERS[opt], 4
    model, det = BNNet(make_optimizer, inf_step=2), AnomalyDetector(policy="skip")
    trainer = make_trainer(max_steps=steps, limit_val_batches=0, accumulate_grad_batches=accumulate, callbacks=[det])
    with pytest.warns(UserWarning, match="this optimizer step is skipped"):
        trainer.fit(model)
    assert det.skipped_steps == 1
    # plain-torch reference: the same optimizer steps, without step 2's batches (Lightning divides by `accumulate`)
    ref = BNNet()
    ref_opt = make_optimizer(ref.parameters())
    batches = list(zip(X.split(4), Y.split(4)))
    for step in range(steps):
        if step == 2:
            continue
        ref_opt.zero_grad()
        for batch in batches[step * accumulate : (step + 1) * accumulate]:
            (ref.loss(batch, step) / accumulate).backward()
        ref_opt.step()
    for k, v in ref.state_dict().items():  # parameters and BatchNorm buffers (running stats, num_batches_tracked)
        assert torch.equal(model.state_dict()[k], v), k
    got, want = trainer.optimizers[0].state_dict()["state"], ref_opt.state_dict()["state"]
    assert got.keys() == want.keys()
    for i in want:
        for k, v in want[i].items():  # momentum buffers; Adam's exp_avg, exp_avg_sq and step count
            assert torch.equal(got[i][k], v), (i, k)


def test_save_policy_checkpoint_holds_the_state_before_the_step(make_trainer, tmp_path):
    """Inf input at step 2 poisons BatchNorm's running stats; checkpoint.ckpt must hold the state after steps 0-1."""
    model = BNNet(inf_step=2)
    with pytest.raises(FloatingPointError, match="saved batch.pt, checkpoint.ckpt"):
        make_trainer(max_steps=4, limit_val_batches=0,
                     callbacks=[AnomalyDetector(policy="save", dirpath=str(tmp_path))]).fit(model)
    ref = BNNet()  # plain torch: the two clean steps
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step, batch in zip(range(2), zip(X.split(4), Y.split(4))):
        ref_opt.zero_grad()
        ref.loss(batch, step).backward()
        ref_opt.step()
    saved = torch.load(tmp_path / "step=2" / "checkpoint.ckpt", weights_only=True)["state_dict"]
    assert saved.keys() == ref.state_dict().keys()
    for k, v in ref.state_dict().items():  # parameters and BatchNorm buffers
        assert torch.equal(saved[k], v), k


class BeforeDetector(Callback):
    """Listed before the AnomalyDetector: the buffers and RNG state right before its check (and replay)."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.buffers = {k: v.clone() for k, v in pl_module.named_buffers()}
        self.rng = torch.get_rng_state()


def test_replay_restores_buffers_and_rng(make_trainer):
    """The replay's forward (BatchNorm in train mode, Dropout) must leave no trace in the buffers or the RNG."""
    model, before = BNNet(nan_step=1, dropout=0.5), BeforeDetector()  # NaN after the BatchNorm: its stats stay finite
    with pytest.raises(FloatingPointError, match=r"first module with non-finite output \(replay\): net.3 \(InjectNaN\)"):
        make_trainer(max_steps=3, limit_val_batches=0, callbacks=[before, AnomalyDetector()]).fit(model)
    for k, v in model.named_buffers():
        assert torch.equal(v, before.buffers[k]), k
    assert torch.equal(torch.get_rng_state(), before.rng)


def test_load_state_dict_names_the_expected_keys():
    with pytest.raises(KeyError, match=r"AnomalyDetector: unexpected state keys \[\]; expected \['skipped_steps'\]\. The checkpoint was not written by lightning_hooks.callbacks.AnomalyDetector"):
        AnomalyDetector().load_state_dict({})


def test_bad_arguments():
    with pytest.raises(ValueError, match="AnomalyDetector: `policy` must be one of"):
        AnomalyDetector(policy="ignore")
    with pytest.raises(ValueError, match="AnomalyDetector: `dirpath` is only used with policy='save'"):
        AnomalyDetector(dirpath="x")


def test_manual_optimization_reports_without_replay(make_trainer):
    class Manual(Net):
        def __init__(self):
            super().__init__(nan_step=1, where="forward")
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            loss = super().training_step(batch, batch_idx)
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()

    with pytest.raises(FloatingPointError, match=r"(?s)global step 1 .*loss finite: False.*replay: skipped \(manual optimization\)"):
        make_trainer(max_steps=4, limit_val_batches=0, callbacks=[AnomalyDetector()]).fit(Manual())
