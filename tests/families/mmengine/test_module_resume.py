"""``MMEngineModule`` loads a checkpoint's model weights as ``Runner.load_checkpoint`` does: MMEngine's
``load_state_dict``, not strict (#33). Found resuming mmdet's shipped ``ddq/ddq-detr-4scale_r50_8xb2-12e_coco.py``
(derived to tiny data): DDQ-DETR's decoder takes its head's auxiliary branches as submodules in its first forward, so
a checkpoint holds them under ``decoder.aux_reg_branches`` where a model just built has none; the Runner resumes with
MMEngine's "unexpected key" message, ``lightning-hooks train --resume`` failed in Lightning's strict load."""

from __future__ import annotations

from typing import Any

import torch
from mmengine_testkit import Toy, run_lightning, run_mmengine, unprefixed

_CHECKPOINT = dict(checkpoint=dict(type="CheckpointHook", interval=1))


class LateAlias(Toy):
    """``Toy`` that, as DDQ-DETR's decoder, holds a module of its own under a second name once it has run."""

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = "tensor") -> Any:
        self.alias = self.linear
        return super().forward(inputs, labels, mode)


def test_a_resume_loads_weights_the_fresh_model_lacks_as_the_runner_does(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the Runner's resume loads the message hub's pickles
    torch.manual_seed(0)
    model = LateAlias()
    one, two = dict(by_epoch=True, max_epochs=1), dict(by_epoch=True, max_epochs=2)  # epoch-based loops: the host loop
    run_mmengine(tmp_path / "runner", default_hooks=_CHECKPOINT, train_cfg=one, model=model, val=False)
    run_lightning(tmp_path / "lightning", default_hooks=_CHECKPOINT, train_cfg=one, model=model, val=False)
    capsys.readouterr()
    runner = run_mmengine(tmp_path / "runner", train_cfg=two, model=model, val=False,
                          resume_from=str(tmp_path / "runner" / "epoch_1.pth"))  # fmt: skip
    theirs = capsys.readouterr().out
    _, _, module = run_lightning(tmp_path / "lightning", train_cfg=two, model=model, val=False,
                                 resume_from=str(tmp_path / "lightning" / "epoch_1.pth"))  # fmt: skip
    ours = capsys.readouterr().out
    expected = "unexpected key in source state_dict: alias.weight, alias.bias"
    assert expected in theirs and expected in ours, (theirs[-2000:], ours[-2000:])
    final = unprefixed(module.state_dict())
    for key, value in runner.model.state_dict().items():
        assert torch.equal(value, final[key]), key
