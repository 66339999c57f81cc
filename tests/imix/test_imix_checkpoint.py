"""CheckPointHook and EvaluateHook where they fail upstream, and the final checkpoint when max_steps ends the fit.
Their files, results and EMAIterHook against iMIX's own engine are in test_imix_engine.py."""

from __future__ import annotations

import pytest
from imix.engine.hooks import CheckPointHook, EvaluateHook, OptimizerHook
from imix.utils.checkpoint import Checkpointer
from imix_reference import config, train

from lightning_hooks import IMIXAdapter


def test_checkpoint_hook_by_iter_fails_upstream(module, loader, make_trainer, tmp_path):
    # imix 0.1.0 bug: PeriodicCheckpointer.record_iter_checkpoint returns `None + '.pth'` on every iteration that
    # does not save, so by-iteration training with CheckPointHook cannot get past its first iteration.
    hook = CheckPointHook(Checkpointer(module.net, save_dir=str(tmp_path)), prefix="tiny", iter_period=4)
    adapter = IMIXAdapter([OptimizerHook(), hook], by_epoch=False)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'NoneType' and 'str'") as err:
        make_trainer([adapter], max_steps=8, max_epochs=None).fit(module, loader)
    assert any("CheckPointHook in mount point 'after_train_iter'" in note for note in err.value.__notes__)
    cfg = config(tmp_path / "imix", by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=4))
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'NoneType' and 'str'"):
        train(cfg)  # iMIX's own engine, the same
    assert not list((tmp_path / "imix").glob("*.pth"))  # at its first iteration


def test_evaluate_hook_without_checkpoint_hook_fails_upstream(module, loader, make_trainer, tmp_path, monkeypatch):
    # imix 0.1.0: EvaluateHook.after_train reads the checkpoint name a CheckPointHook recorded; without one: KeyError.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work_dir").mkdir()
    adapter = IMIXAdapter([OptimizerHook(), EvaluateHook(lambda: {"acc": 1.0})])
    with pytest.raises(KeyError, match="model_name"):
        make_trainer([adapter], max_epochs=1).fit(module, loader)


@pytest.mark.parametrize(("max_epochs", "max_steps", "gas"), [(5, 12, 1), (-1, 12, 1), (5, 6, 2)])
def test_checkpoint_hook_writes_the_final_model_once_when_max_steps_ends_the_fit(
    module, loader, make_trainer, tmp_path, max_epochs, max_steps, gas
):
    # 12 iterations of 6 batches: iMIX's Organizer would run total_epochs=2 and CheckPointHook writes
    # *_model_final after the epoch where epoch + 1 >= max_epoch, i.e. once, after epoch 1
    hook = CheckPointHook(Checkpointer(module.net, save_dir=str(tmp_path)), prefix="tiny", epoch_period=1)
    saves = []
    save = hook.save
    hook.save = lambda name, **kwargs: (saves.append(name), save(name, **kwargs))
    adapter = IMIXAdapter([OptimizerHook(), hook], gradient_accumulation_steps=gas)
    make_trainer([adapter], max_epochs=max_epochs, max_steps=max_steps).fit(module, loader)
    assert saves == ["tiny_epoch0(6iters)_model", "tiny_epoch1(12iters)_model", "tiny_model_final"]
    assert hook.max_epoch == 2
