"""PreciseBN: statistics checked against fvcore.nn.precise_bn.update_bn_stats on the same weights and batches."""

import copy
import os
import socket

import lightning.pytorch as pl
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from fvcore.nn.precise_bn import update_bn_stats
from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hooks.callbacks import PreciseBN

torch.manual_seed(4321)
X = torch.randn(27, 3, 8, 8) * 2 + 0.5  # 27 samples, batch 6 -> 5 batches, the last one of size 3
Y = torch.randn(27, 1)


def make_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8, momentum=0.3), nn.ReLU(),
        nn.Flatten(), nn.Linear(8 * 4 * 4, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 1),
    )


class Net(pl.LightningModule):
    def __init__(self, frozen_bn: bool = False, dict_batches: bool = False) -> None:
        super().__init__()
        self.net = make_net()
        self.frozen_bn = frozen_bn
        self.dict_batches = dict_batches
        self.val_stats = []

    def forward(self, x):
        return self.net(x)

    def on_train_epoch_start(self):
        if self.frozen_bn:
            self.net[4].eval()

    def training_step(self, batch, batch_idx):
        x, y = (batch["x"], batch["y"]) if self.dict_batches else batch
        return nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        self.val_stats.append(bn_stats(self))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

    def train_dataloader(self):
        if self.dict_batches:
            return DataLoader([{"x": x, "y": y} for x, y in zip(X, Y)], batch_size=6)
        return DataLoader(TensorDataset(X, Y), batch_size=6)

    def val_dataloader(self):
        return DataLoader(TensorDataset(X[:6], Y[:6]), batch_size=6)


def bn_stats(module):
    return {n: b.detach().clone() for n, b in module.named_buffers() if "running" in n}


class SnapshotBeforePreciseBN(Callback):
    """Placed before PreciseBN: copies the model at the last batch's on_train_batch_end, before PreciseBN runs."""

    def __init__(self):
        self.copies = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.is_last_batch:
            self.copies.append(copy.deepcopy(pl_module.net))


def fvcore_reference(net, num_batches):
    net = copy.deepcopy(net)
    update_bn_stats(net, (x for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)), num_batches)
    return {"net." + k: v for k, v in bn_stats(net).items()}


def assert_stats_close(actual, expected, atol=1e-5):
    assert actual.keys() == expected.keys()
    for k in expected:
        torch.testing.assert_close(actual[k], expected[k], atol=atol, rtol=1e-5, msg=k)


@pytest.mark.parametrize("num_batches", [5, 2])
def test_matches_fvcore_and_validation_sees_it(make_trainer, num_batches):
    model, snap = Net(), SnapshotBeforePreciseBN()
    make_trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=1, callbacks=[snap, PreciseBN(num_batches)]).fit(model)
    expected = fvcore_reference(snap.copies[0], num_batches)
    assert_stats_close(bn_stats(model), expected)
    assert_stats_close(model.val_stats[0], expected, atol=0)  # the epoch's validation already used them
    # and it really changed something
    assert any((expected[k] - bn_stats(snap.copies[0])["" + k[4:]]).abs().max() > 1e-3 for k in expected)


def test_restores_modes_momentum_and_rng_and_skips_frozen_bn(make_trainer):
    model = Net(frozen_bn=True)
    seen = {}

    class After(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.is_last_batch:
                seen["modes"] = [m.training for m in pl_module.modules()]
                seen["momenta"] = [m.momentum for m in pl_module.modules() if isinstance(m, nn.BatchNorm2d)]
                seen["rng"] = torch.get_rng_state()

    class Before(SnapshotBeforePreciseBN):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            if trainer.is_last_batch:
                seen["modes_before"] = [m.training for m in pl_module.modules()]
                seen["rng_before"] = torch.get_rng_state()

    before = Before()
    make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[before, PreciseBN(5), After()]).fit(model)
    assert seen["modes"] == seen["modes_before"] and not model.net[4].training
    assert seen["momenta"] == [0.1, 0.3]
    assert torch.equal(seen["rng"], seen["rng_before"])
    frozen_key = "net.4.running_mean"
    torch.testing.assert_close(model.net[4].running_mean, before.copies[0][4].running_mean, atol=0, rtol=0)
    expected = fvcore_reference(before.copies[0], 5)  # fvcore also skips eval-mode BN layers
    assert_stats_close(bn_stats(model), expected)
    assert frozen_key in expected


def test_every_n_epochs(make_trainer):
    torch.manual_seed(0)
    plain = Net()
    make_trainer(max_epochs=1, limit_val_batches=0).fit(plain)
    torch.manual_seed(0)
    skipped = Net()
    make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[PreciseBN(5, every_n_epochs=2)]).fit(skipped)
    assert_stats_close(bn_stats(skipped), bn_stats(plain), atol=0)

    model, snap = Net(), SnapshotBeforePreciseBN()
    make_trainer(max_epochs=2, limit_val_batches=0, callbacks=[snap, PreciseBN(5, every_n_epochs=2)]).fit(model)
    assert_stats_close(bn_stats(model), fvcore_reference(snap.copies[1], 5))


def test_forward_fn_for_dict_batches(make_trainer):
    model, snap = Net(dict_batches=True), SnapshotBeforePreciseBN()
    cb = PreciseBN(5, forward_fn=lambda m, b: m(b["x"]))
    make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[snap, cb]).fit(model)
    assert_stats_close(bn_stats(model), fvcore_reference(snap.copies[0], 5))


def test_too_few_batches_is_a_clear_error(make_trainer):
    with pytest.raises(ValueError, match=r"PreciseBN: the train dataloader produced only 5 batches but `num_batches=9`"):
        make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[PreciseBN(9)]).fit(Net())


@pytest.mark.parametrize(("kwargs", "match"), [({"num_batches": 0}, "num_batches"), ({"every_n_epochs": 0}, "every_n_epochs"), ({"forward_fn": 3}, "forward_fn")])
def test_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=f"PreciseBN: `{match}`"):
        PreciseBN(**kwargs)


def _ddp_worker(rank, world_size, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.set_num_threads(1)
    module = Net()
    module.train()
    batches = [x for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)]
    PreciseBN(num_batches=2).recompute_from(module, batches[rank * 2 : rank * 2 + 2])  # disjoint batches per rank
    torch.save(bn_stats(module), os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


def test_ddp_all_reduce_pools_all_ranks(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(_ddp_worker, args=(2, port, str(tmp_path)), nprocs=2, start_method="fork")
    expected = fvcore_reference(make_net(), 4)  # single process, all 4 batches of both ranks
    for rank in range(2):
        assert_stats_close(torch.load(tmp_path / f"rank{rank}.pt"), expected)
