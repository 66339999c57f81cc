"""Proof: PreciseBatchNormHook under the adapter gives fvcore's update_bn_stats. The hooks' differential tests
against Classy's real ClassificationTask are in tests/families/classy/test_real_task.py."""

from __future__ import annotations

import copy

import pytest
import torch
from classy_vision.hooks import PreciseBatchNormHook
from classy_testkit import Net, loader, make_trainer
from fvcore.nn.precise_bn import update_bn_stats

from lightning_hooks import ClassyAdapter


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
