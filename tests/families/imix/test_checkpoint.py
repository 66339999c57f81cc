"""CheckPointHook, EvaluateHook and EMAIterHook against iMIX's own engine (imix_reference), where they fail upstream,
and the final checkpoint when max_steps ends the fit."""

from __future__ import annotations

import pytest
import torch
from imix.engine.hooks import CheckPointHook, EvaluateHook, OptimizerHook, PriorityStatus
from imix.utils.checkpoint import Checkpointer
from imix_reference import (
    EVALUATION,
    Recorder,
    assert_runs_as_imix,
    assert_same,
    checkpoints,
    config,
    fit,
    recorder,
    train,
)

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


def test_ema_iter_hook_drives_the_models_own_ema(tmp_path):
    """EMAIterHook from cfg.custom_hooks (after the Organizer's hooks): init_ema / update_ema of trainer.model, which
    under Lightning is the LightningModule (imix_reference.IMIXModule hands them to the iMIX model)."""
    custom_hooks = [dict(type=Recorder, level=PriorityStatus.LOWEST), dict(type="EMAIterHook")]
    imix, lightning = assert_runs_as_imix(tmp_path, custom_hooks=custom_hooks)
    assert_same(lightning.model.ema, imix.model.ema, "ema")


EVALUATION_CASES = {
    "by_epoch": dict(EVALUATION),
    # every iteration: CheckPointHook must save every iteration (see CASES), and the Organizer makes eval_iter_period
    # divide checkpoint_config.iter_period
    "by_iter": dict(EVALUATION, by_iter=True, max_iter=6, eval_iter_period=1, checkpoint_config=dict(iter_period=1)),
}


@pytest.mark.parametrize("case", EVALUATION_CASES)
def test_evaluate_hook_records_results_and_keeps_the_best_checkpoint(tmp_path, case):
    """EvaluateHook as iMIX's Organizer builds it for ``cfg.test_data``: iMIX's inference_on_dataset and Evaluator
    after each epoch (by iteration: every eval_iter_period iterations), its results in work_dir/eval_result.json and
    the log buffer, the best CheckPointHook file copied to best_result.pth and the whole model pickled."""
    engine = train(config(tmp_path / "imix", **EVALUATION_CASES[case]))
    organizer, module, _ = fit(config(tmp_path / "lightning", **EVALUATION_CASES[case]))
    ref, mine = recorder(engine._hooks), recorder(organizer.hooks)

    assert mine.events == ref.events
    assert mine.history == ref.history and "negative_mse" in ref.history
    rows = [(tmp_path / d / "eval_result.json").read_text().splitlines() for d in ("imix", "lightning")]
    assert rows[1] == rows[0] and len(rows[0]) == (2 if case == "by_epoch" else 6)
    assert_same(checkpoints(tmp_path / "lightning"), checkpoints(tmp_path / "imix"))
    # the whole model EvaluateHook pickles is the facade's trainer.model: iMIX's model under iMIX, the LightningModule
    # (here wrapping it) under Lightning
    whole = torch.load(tmp_path / "lightning" / "model_best.pth", weights_only=False)
    assert type(whole) is type(module)
    imix_whole = torch.load(tmp_path / "imix" / "model_best.pth", weights_only=False)
    assert_same(whole.model.state_dict(), imix_whole.state_dict())
