"""``MMEngineData``: the train loader iterates as the Runner's loops do, and keeps that state off the loader object."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from lightning_hooks.families.mmengine.data import MMEngineData


def _data(by_epoch: bool = True) -> MMEngineData:
    config = dict(dataset=TensorDataset(torch.arange(8.0)), sampler=dict(type="DefaultSampler", shuffle=False),
                  batch_size=2)  # fmt: skip
    return MMEngineData(train_dataloader=config, seed=0, by_epoch=by_epoch)


def test_the_first_iter_returns_the_iterator_started_early_and_the_loader_holds_no_state_of_ours():
    data = _data(by_epoch=False)
    data.start_train_iterator()
    loader = data.train_dataloader()
    [started] = data._started
    first = iter(loader)
    assert first is started and _values(next(first)) == [0.0, 1.0]
    assert [_values(b) for b in iter(loader)] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]  # a new pass
    assert iter(loader) is not first
    assert not [name for name in vars(loader) if "lightning_hooks" in name]


def _values(batch: list) -> list[float]:
    """A batch of ``pseudo_collate``: ``[(x0, x1)]``."""
    return [float(x) for x in batch[0]]


class Longer(torch.utils.data.BatchSampler):
    """A batch sampler whose ``len()`` counts one batch fewer than it yields."""

    def __len__(self) -> int:
        return super().__len__() - 1


def test_an_epoch_based_pass_runs_the_loader_to_its_end_and_refuses_batches_beyond_its_len():
    data = _data(by_epoch=True)
    loader = data.train_dataloader()
    assert len(list(loader)) == 4
    loader.batch_sampler.__class__ = Longer
    with pytest.raises(RuntimeError, match="gave 1 batches beyond its len"):
        list(loader)


def test_a_users_own_train_loader_is_iterated_through_a_copy_and_left_as_it_came():
    """``Runner.build_dataloader`` gets a deep copy of the configured loader, so the class change is the copy's."""
    users = torch.utils.data.DataLoader(TensorDataset(torch.arange(4.0)), batch_size=2)
    loader = MMEngineData(train_dataloader=users, seed=0).train_dataloader()
    assert type(users) is torch.utils.data.DataLoader and loader is not users
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0], [2.0, 3.0]]
