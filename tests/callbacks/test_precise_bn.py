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
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, TensorDataset

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


def bn_momenta(module):
    return [m.momentum for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def test_restores_modes_momentum_and_rng_and_skips_frozen_bn(make_trainer):
    model = Net(frozen_bn=True)  # net[4] (momentum 0.3) in eval mode from the epoch start
    model.net[1].momentum, model.net[8].momentum = None, 0.05
    seen = {}

    def forward_without_train_mode_elsewhere(pl_module, batch):
        # switches every module but the BN layers being recomputed to eval, as a user's forward_fn might
        pl_module.eval()
        pl_module.net[1].train(), pl_module.net[8].train()
        return pl_module(batch[0])

    class After(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            if trainer.is_last_batch:
                seen["modes"] = [m.training for m in pl_module.modules()]
                seen["momenta"] = bn_momenta(pl_module)
                seen["rng"] = torch.get_rng_state()

    class Before(SnapshotBeforePreciseBN):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
            if trainer.is_last_batch:
                seen["modes_before"] = [m.training for m in pl_module.modules()]
                seen["rng_before"] = torch.get_rng_state()

    before = Before()
    cb = PreciseBN(5, forward_fn=forward_without_train_mode_elsewhere)
    make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[before, cb, After()]).fit(model)
    assert seen["modes_before"].count(False) == 1 and not model.net[4].training  # only the frozen BN is in eval
    assert seen["modes"] == seen["modes_before"]
    assert seen["momenta"] == [None, 0.3, 0.05]
    assert torch.equal(seen["rng"], seen["rng_before"])
    frozen_key = "net.4.running_mean"
    torch.testing.assert_close(model.net[4].running_mean, before.copies[0][4].running_mean, atol=0, rtol=0)
    expected = fvcore_reference(before.copies[0], 5)  # fvcore also skips eval-mode BN layers
    assert_stats_close(bn_stats(model), expected)
    assert frozen_key in expected


def test_recompute_from_given_batches_matches_fvcore():
    net = make_net()
    net[4].eval()  # a frozen layer: skipped by both
    batches = [x for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)]
    expected = copy.deepcopy(net)
    update_bn_stats(expected, batches, 3)
    PreciseBN(num_batches=3).recompute_from(net, batches)  # uses the first 3 of the 5 batches
    assert_stats_close(bn_stats(net), bn_stats(expected))
    assert bn_momenta(net) == [0.1, 0.3, 0.1] and not net[4].training


def raise_on_second_batch():
    calls = []

    def forward_fn(pl_module, batch):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return pl_module(batch)

    return forward_fn


@pytest.mark.parametrize(
    ("num_batches", "make_forward_fn", "error", "match"),
    [
        (9, lambda: None, ValueError, r"PreciseBN: `batches` produced only 5 batches but `num_batches=9`"),
        (4, raise_on_second_batch, RuntimeError, "boom"),
    ],
)
def test_failed_recompute_leaves_the_statistics_alone(num_batches, make_forward_fn, error, match):
    net = make_net()
    net.train()
    before = {n: b.clone() for n, b in net.named_buffers()}  # running_mean/var and num_batches_tracked
    batches = [x for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)]
    with pytest.raises(error, match=match):
        PreciseBN(num_batches, forward_fn=make_forward_fn()).recompute_from(net, batches)
    after = dict(net.named_buffers())
    for name, value in before.items():
        assert torch.equal(after[name], value), name
    assert bn_momenta(net) == [0.1, 0.3, 0.1]


class ShuffledNet(Net):
    """Shuffles with a seeded torch.Generator (on the loader or on its own sampler) and records epoch 2's batches."""

    def __init__(self, generator_on: str) -> None:
        super().__init__()
        self.generator_on = generator_on
        self.epoch2 = []

    def train_dataloader(self):
        data = TensorDataset(X, Y)
        if self.generator_on == "loader":
            return DataLoader(data, batch_size=6, shuffle=True, generator=torch.Generator().manual_seed(7))
        sampler = RandomSampler(data, generator=torch.Generator().manual_seed(7))
        return DataLoader(data, batch_size=6, sampler=sampler, generator=torch.Generator().manual_seed(8))

    def training_step(self, batch, batch_idx):
        if self.current_epoch == 1:
            self.epoch2.append(batch[1].clone())
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("generator_on", ["loader", "sampler"])
def test_keeps_the_shuffle_order_of_a_seeded_generator(make_trainer, generator_on):
    plain, with_pbn = ShuffledNet(generator_on), ShuffledNet(generator_on)
    make_trainer(max_epochs=2, limit_val_batches=0).fit(plain)
    make_trainer(max_epochs=2, limit_val_batches=0, callbacks=[PreciseBN(5)]).fit(with_pbn)
    assert len(plain.epoch2) == 5
    for a, b in zip(plain.epoch2, with_pbn.epoch2, strict=True):
        assert torch.equal(a, b)


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


def test_dict_batch_with_the_default_forward_asks_for_forward_fn(make_trainer):
    trainer = make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[PreciseBN(5)])
    match = (
        r"PreciseBN: the default forward called pl_module\(batch\) on a dict batch and the model raised TypeError "
        r"\(above\)\. Pass `forward_fn\(pl_module, batch\)`"
    )
    with pytest.raises(TypeError, match=match) as info:
        trainer.fit(Net(dict_batches=True))
    assert isinstance(info.value.__cause__, TypeError)  # the model's own error, chained


def test_default_forward_still_feeds_a_dict_to_a_model_that_takes_one():
    class DictNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def forward(self, batch):
            return self.net(batch["x"])

    model = DictNet().train()
    expected = copy.deepcopy(model.net)
    update_bn_stats(expected, [x for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)], 5)
    PreciseBN(5).recompute_from(model, [{"x": x} for x, _ in DataLoader(TensorDataset(X, Y), batch_size=6)])
    assert_stats_close(bn_stats(model.net), bn_stats(expected))


def test_too_few_batches_fails_before_training(make_trainer):
    trainer = make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[PreciseBN()])  # default num_batches=200
    match = r"PreciseBN: the train dataloader has only 5 batches but `num_batches=200`\. Lower `num_batches` to at most 5"
    with pytest.raises(ValueError, match=match):
        trainer.fit(Net())
    assert trainer.global_step == 0


class Unsized(IterableDataset):
    def __iter__(self):
        return iter(zip(X, Y))


def test_too_few_batches_from_an_unsized_loader_fails_when_recomputing(make_trainer):
    class UnsizedNet(Net):
        def train_dataloader(self):
            return DataLoader(Unsized(), batch_size=6)

    with pytest.raises(ValueError, match=r"PreciseBN: the train dataloader produced only 5 batches but `num_batches=9`"):
        make_trainer(max_epochs=1, limit_val_batches=0, callbacks=[PreciseBN(9)]).fit(UnsizedNet())


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
