"""Proof: the adapter under Lightning gives what a plain-PyTorch loop in Classy's phase order gives with the same
real classy_vision hooks (EMA state, weights seen in validation, checkpoint files, CSV rows, precise-BN stats)."""

from __future__ import annotations

import copy

import pytest
import torch
from classy_vision.hooks import (
    CheckpointHook,
    ExponentialMovingAverageModelHook,
    OutputCSVHook,
    PreciseBatchNormHook,
)
from classy_testkit import Net, loader, make_trainer
from fvcore.nn.precise_bn import update_bn_stats

from lightning_hooks import ClassyAdapter


def _hooks(folder, cache_samples):
    folder.mkdir()
    return [
        CheckpointHook(str(folder), phase_types=["train", "test"]),  # listed first: the hosts move it last
        ExponentialMovingAverageModelHook(decay=0.8, device="cpu"),
        PreciseBatchNormHook(num_samples=8, cache_samples=cache_samples),
        OutputCSVHook(str(folder)),
    ]


def _assert_same_tensors(a, b):
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6, msg=key)


@pytest.mark.parametrize("cache_samples", [True, False])
def test_classy_adapter_equals_reference_loop(tmp_path, reference, cache_samples):
    ref = reference(_hooks(tmp_path / "ref", cache_samples))

    model = Net()
    adapter = ClassyAdapter(_hooks(tmp_path / "pl", cache_samples))
    make_trainer(tmp_path, [adapter]).fit(model, loader(), loader(8, seed=1))

    # weights seen by every validation batch (EMA swapped in, precise BN applied at train phase end)
    assert len(model.seen) == len(ref.base_model.seen) == 4
    for ours, theirs in zip(model.seen, ref.base_model.seen):
        _assert_same_tensors(ours, theirs)
    # EMA hook state
    ema, ref_ema = adapter.hooks[0], ref.hooks[0]
    assert isinstance(ema, ExponentialMovingAverageModelHook)
    _assert_same_tensors(ema.state.ema_model_state, ref_ema.state.ema_model_state)
    _assert_same_tensors(ema.state.model_state, ref_ema.state.model_state)
    # checkpoint files, one per phase, named by phase_idx
    names = sorted(p.name for p in (tmp_path / "pl").glob("model_phase-*"))
    assert names == sorted(p.name for p in (tmp_path / "ref").glob("model_phase-*"))
    assert names == [f"model_phase-{i}_end.torch" for i in range(4)]
    for name in names:
        ours = torch.load(tmp_path / "pl" / name, weights_only=False)["classy_state_dict"]
        theirs = torch.load(tmp_path / "ref" / name, weights_only=False)["classy_state_dict"]
        assert (ours["phase_idx"], ours["train_phase_idx"]) == (theirs["phase_idx"], theirs["train_phase_idx"])
        _assert_same_tensors(ours["base_model"], theirs["base_model"])
        assert ours["hooks"].keys() == theirs["hooks"].keys()
        _assert_same_tensors(
            ours["hooks"]["ExponentialMovingAverageModelHook"]["ema_model_state"],
            theirs["hooks"]["ExponentialMovingAverageModelHook"]["ema_model_state"],
        )
    # CSV rows: header, then one row per test sample per test phase
    rows = (tmp_path / "pl" / "predictions.csv").read_text().splitlines()
    assert rows == (tmp_path / "ref" / "predictions.csv").read_text().splitlines()
    assert rows[0] == "sample_id\tprediction\ttarget" and len(rows) == 1 + 2 * 8


@pytest.mark.parametrize("cache_samples", [True, False])
def test_classy_precise_bn_equals_fvcore_update_bn_stats(tmp_path, cache_samples):
    """lr=0 keeps the weights fixed, so fvcore on a copy of the model over the first 8 samples is the reference."""
    model = Net(lr=0.0)
    expected = copy.deepcopy(model)
    update_bn_stats(expected, (b["input"] for b in loader()), 2)

    make_trainer(tmp_path, [ClassyAdapter(PreciseBatchNormHook(8, cache_samples))], max_epochs=1).fit(
        model, loader(), loader(8, seed=1)
    )
    bn, ref = model.seen[0], expected.net.state_dict()
    for key in ("1.running_mean", "1.running_var"):
        torch.testing.assert_close(bn[key], ref[key], rtol=0, atol=1e-6)
    # and differs from the running statistics plain training leaves behind
    plain = Net(lr=0.0)
    make_trainer(tmp_path, [], max_epochs=1).fit(plain, loader(), loader(8, seed=1))
    assert not torch.allclose(plain.seen[0]["1.running_var"], ref["1.running_var"])
