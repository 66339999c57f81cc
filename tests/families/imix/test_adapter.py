"""IMIXAdapter's checkpoint state: the engine loop's counters (``epoch``, ``iter``, ``inner_iter``) travel in it, and
a fit resumed mid-epoch goes on at them, as iMIX's own engine runs those iterations, reading its sampler's order as
iMIX reads every epoch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from imix_reference import MODELS, TinyNet, config, fit, recorder, train
from lightning.pytorch.callbacks import ModelCheckpoint


class SeenInputs(TinyNet):
    """:class:`TinyNet` that records the targets of each train batch its forward reads (``seen``: the samples in the
    sampler's order; their inputs get random noise)."""

    seen: list[torch.Tensor] = []  # noqa: RUF012  # one record, read and cleared by the test

    def forward(self, batch: Any, *args: Any, **kwargs: Any) -> dict:
        SeenInputs.seen.append(batch[1].clone())
        return super().forward(batch, *args, **kwargs)


MODELS["SeenInputs"] = SeenInputs
#: iMIX's own loader (``build_imix_train_loader``) of 6 batches, with the config's ``DistributedSampler`` (shuffled,
#: of one replica here), whose epoch iMIX's engine never sets
SAMPLED = dict(model=dict(type="SeenInputs"), dataset_type="IMIXLoader",
               train_data=dict(samples_per_gpu=4, workers_per_gpu=0, data=dict(type="RegisteredSamples", samples=24),
                               sampler=dict(type="DistributedSampler", num_replicas=1, rank=0)))  # fmt: skip


def _seen(run: Callable[[], Any]) -> tuple[Any, list[torch.Tensor]]:
    """What ``run()`` returned, and the train targets the model read meanwhile."""
    SeenInputs.seen.clear()
    return run(), list(SeenInputs.seen)


def _counters(events, first_iter):
    """What the hooks see at each mount point (event, iter, inner_iter, epoch) from iteration ``first_iter``'s
    ``before_train_iter`` on."""
    start = next(i for i, e in enumerate(events) if e[0] == "before_train_iter" and e[1] == first_iter)
    return [e[:4] for e in events[start:]]


def _resume(tmp_path, name, checkpoint, edit):
    state = checkpoint["callbacks"]
    [key] = [k for k in state if k.startswith("IMIXAdapter")]
    edited = {**checkpoint, "callbacks": {**state, key: edit(state[key])}}
    torch.save(edited, tmp_path / f"{name}.ckpt")
    return recorder(fit(config(tmp_path / name, **SAMPLED), ckpt_path=str(tmp_path / f"{name}.ckpt"))[0].hooks).events


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's notes on a mid-epoch resume
def test_a_fit_resumed_mid_epoch_goes_on_at_the_counters_of_the_adapters_state(tmp_path):
    """iMIX resumes only at an epoch's start (``resume_or_load``: ``start_epoch = epoch + 1``); its uninterrupted run
    is the reference for the iterations after a mid-epoch Lightning checkpoint (the user's
    ``ModelCheckpoint(every_n_train_steps)``), here at the epoch's last batch but one (one batch later, the epoch is
    done: test_engine's resume from a checkpoint at an epoch's last batch). The counters come from the adapter's state
    (an edited state moves them), strictly (a missing counter is an error naming it). The resumed epoch reads its
    sampler at the starting epoch, in the order iMIX's engine reads every epoch (it never calls ``set_epoch``), though
    Lightning 2.6 starts that epoch without ``on_train_epoch_start`` (the adapter's epoch start, which hands the sampler
    its epoch back, runs before the epoch's iterator is made) and Lightning set the sampler's epoch to 1; Lightning
    restarts the loader there, so the epoch's last batch is the order's first."""
    engine, imix = _seen(lambda: train(config(tmp_path / "imix", **SAMPLED)))
    reference = recorder(engine._hooks).events  # 2 epochs of 6 iterations
    assert all(torch.equal(a, b) for a, b in zip(imix[:6], imix[6:], strict=True))  # every epoch in one order
    every = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=11, save_top_k=-1)
    _, first = _seen(lambda: fit(config(tmp_path / "first", **SAMPLED), callbacks=[every], enable_checkpointing=True))
    assert all(torch.equal(a, b) for a, b in zip(first, imix, strict=True))
    [path] = (tmp_path / "ckpt").glob("*.ckpt")  # after iteration 10 (batch 4 of epoch 1's 6)
    checkpoint = torch.load(path, weights_only=True)
    [state] = [s for k, s in checkpoint["callbacks"].items() if k.startswith("IMIXAdapter")]
    assert state["host"]["loop"] == {"epoch": 1, "iter": 11, "inner_iter": 4}

    resumed, [last] = _seen(lambda: _resume(tmp_path, "resumed", checkpoint, lambda s: s))
    assert resumed[0][:5] == ("before_train", 11, None, None, 11)  # before the epoch loop sets inner_iter / epoch
    assert _counters(resumed, 11) == _counters(reference, 11)
    assert torch.equal(last, imix[6])  # the order's first batch, not that of Lightning's epoch 1

    moved = _resume(tmp_path, "moved", checkpoint, lambda s: {**s, "host": {"loop": {**s["host"]["loop"], "iter": 20}}})
    assert _counters(moved, 20)[0] == ("before_train_iter", 20, 5, 1)
    with pytest.raises(KeyError, match=r"IMIXLoop.load_state_dict: the state has no counters \['inner_iter'\]"):
        _resume(tmp_path, "strict", checkpoint, lambda s: {**s, "host": {"loop": {"epoch": 1, "iter": 11}}})
