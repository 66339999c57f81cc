"""IMIXAdapter's checkpoint state: the engine loop's counters (``epoch``, ``iter``, ``inner_iter``) travel in it, and
a fit resumed mid-epoch goes on at them, as iMIX's own engine runs those iterations, reading its sampler's order as
iMIX reads every epoch; one resumed from an epoch's last batch goes on as iMIX resumes from its epoch file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
from imix_reference import MODELS, RESUME_OR_LOAD, TinyNet, config, fit, logged, recorder, status_rows, train
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


class Runs(NamedTuple):
    """iMIX's engine and a Lightning fit of :data:`SAMPLED`, uninterrupted, with the targets their models read."""

    root: Path
    engine: Any
    imix: list[torch.Tensor]
    first: list[torch.Tensor]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """:class:`Runs`; the fit keeps the user's ``ModelCheckpoint(every_n_train_steps)`` checkpoints at the epoch's
    last batch but one (after iteration 10, batch 5 of epoch 1's 6: ``step=11``) and at the first epoch's last batch
    (after iteration 5, before ``on_train_epoch_end``: ``step=6``)."""
    root = tmp_path_factory.mktemp("uninterrupted")
    engine, imix = _seen(lambda: train(config(root / "imix", **SAMPLED)))
    every = [ModelCheckpoint(dirpath=root / f"every-{n}", every_n_train_steps=n, save_top_k=-1) for n in (11, 6)]
    _, first = _seen(lambda: fit(config(root / "first", **SAMPLED), callbacks=every, enable_checkpointing=True))
    return Runs(root, engine, imix, first)


def _adapter_state(checkpoint: dict[str, Any]) -> dict[str, Any]:
    [state] = [s for k, s in checkpoint["callbacks"].items() if k.startswith("IMIXAdapter")]
    return state


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's notes on a mid-epoch resume
def test_a_fit_resumed_mid_epoch_goes_on_at_the_counters_of_the_adapters_state(tmp_path, runs):
    """iMIX resumes only at an epoch's start (``resume_or_load``: ``start_epoch = epoch + 1``); its uninterrupted run
    is the reference for the iterations after a mid-epoch Lightning checkpoint (the user's
    ``ModelCheckpoint(every_n_train_steps)``), here at the epoch's last batch but one (one batch later, the epoch is
    done: the next test). The counters come from the adapter's state (an edited state moves them), strictly (a missing
    counter is an error naming it). The resumed epoch reads its sampler at the starting epoch, in the order iMIX's
    engine reads every epoch (it never calls ``set_epoch``), though Lightning 2.6 starts that epoch without
    ``on_train_epoch_start`` (the adapter's epoch start, which hands the sampler its epoch back, runs before the
    epoch's iterator is made) and Lightning set the sampler's epoch to 1; Lightning restarts the loader there, so the
    epoch's last batch is the order's first."""
    reference, imix = recorder(runs.engine._hooks).events, runs.imix  # 2 epochs of 6 iterations
    assert all(torch.equal(a, b) for a, b in zip(imix[:6], imix[6:], strict=True))  # every epoch in one order
    assert all(torch.equal(a, b) for a, b in zip(runs.first, imix, strict=True))
    checkpoint = torch.load(runs.root / "every-11" / "epoch=1-step=11.ckpt", weights_only=True)  # batch 5 of epoch 1
    assert _adapter_state(checkpoint)["host"]["loop"] == {"epoch": 1, "iter": 11, "inner_iter": 4}

    resumed, [last] = _seen(lambda: _resume(tmp_path, "resumed", checkpoint, lambda s: s))
    assert resumed[0][:5] == ("before_train", 11, None, None, 11)  # before the epoch loop sets inner_iter / epoch
    assert _counters(resumed, 11) == _counters(reference, 11)
    assert torch.equal(last, imix[6])  # the order's first batch, not that of Lightning's epoch 1

    moved = _resume(tmp_path, "moved", checkpoint, lambda s: {**s, "host": {"loop": {**s["host"]["loop"], "iter": 20}}})
    assert _counters(moved, 20)[0] == ("before_train_iter", 20, 5, 1)
    with pytest.raises(KeyError, match=r"IMIXLoop.load_state_dict: the state has no counters \['inner_iter'\]"):
        _resume(tmp_path, "strict", checkpoint, lambda s: {**s, "host": {"loop": {"epoch": 1, "iter": 11}}})


@pytest.mark.filterwarnings("ignore::UserWarning")  # Lightning's note on a checkpoint written before an epoch's end
def test_a_fit_resumed_from_an_epochs_last_batch_goes_on_as_imix_resumes_from_its_epoch_file(runs):
    """A Lightning 2.6 checkpoint written at epoch 0's last batch (before ``on_train_epoch_end``; Lightning then starts
    epoch 1 without ``on_train_epoch_start``) resumes as iMIX's engine resumes from the epoch file CheckPointHook
    wrote there (``resume_from``: ``resume_or_load``'s ``epoch + 1`` at ``epoch_iter``): the same events with their
    counters, scalars, learning rates, log buffer history, JSON rows and log lines (but ``resume_or_load``'s own), and
    the train targets the model reads, in the order of the sampler's epoch iMIX reads every epoch at (0), which
    Lightning had set to 1 and which the sampler has again after the fit."""
    root = runs.root
    cfg = config(root / "imix-resumed", resume_from=str(next((root / "imix").glob("*epoch0*_model.pth"))), **SAMPLED)
    (engine, ref_log), seen = _seen(lambda: logged(lambda: train(cfg), cfg.work_dir))
    checkpoint = root / "every-6" / "epoch=0-step=6.ckpt"
    state = _adapter_state(torch.load(checkpoint, weights_only=True))
    assert state["host"]["loop"] == {"epoch": 1, "iter": 6, "inner_iter": 5}  # the epoch file's epoch + 1, epoch_iter
    cfg = config(root / "lightning-resumed", **SAMPLED)
    ((organizer, _, _), log), resumed = _seen(lambda: logged(lambda: fit(cfg, ckpt_path=str(checkpoint)), cfg.work_dir))
    ref, mine = recorder(engine._hooks), recorder(organizer.hooks)
    assert ref.events[0][:5] == ("before_train", 6, None, None, 6)  # resumed at iteration 6, epoch 1
    assert (mine.events, mine.scalars, mine.lrs, mine.history) == (ref.events, ref.scalars, ref.lrs, ref.history)
    rows = status_rows(root / "imix-resumed")
    assert status_rows(root / "lightning-resumed") == rows
    assert [row["inner-iteration"] for row in rows] == list(range(6, 12))  # iMIX's name for the run's iteration
    assert log == [line for line in ref_log if not line[1].startswith(RESUME_OR_LOAD)] and log
    assert all(torch.equal(a, b) for a, b in zip(resumed, seen, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(seen, runs.imix[6:], strict=True))
    assert organizer.train_data_loader.sampler.epoch == engine.data_loader.sampler.epoch == 0
