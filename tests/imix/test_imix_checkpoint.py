"""CheckPointHook (by epoch; by iteration fails upstream), EvaluateHook and EMAIterHook."""

from __future__ import annotations

import json

import pytest
import torch
from imix.engine.hooks import CheckPointHook, EMAIterHook, EvaluateHook, OptimizerHook
from imix.utils.checkpoint import Checkpointer

from lightning_hooks import IMIXAdapter


def test_checkpoint_hook_by_epoch_saves_each_epoch_and_the_final_model(module, loader, make_trainer, tmp_path):
    snapshots = []

    hook = CheckPointHook(Checkpointer(module.net, save_dir=str(tmp_path)), prefix="tiny", epoch_period=1)
    adapter = IMIXAdapter([OptimizerHook(), hook])
    module.on_train_epoch_end = lambda: snapshots.append({k: v.clone() for k, v in module.net.state_dict().items()})
    make_trainer([adapter]).fit(module, loader)

    names = sorted(p.name for p in tmp_path.glob("*.pth"))
    assert names == ["tiny_epoch0(6iters)_model.pth", "tiny_epoch1(12iters)_model.pth", "tiny_model_final.pth"]
    for name, snap in zip(names[:2], snapshots):
        saved = torch.load(tmp_path / name)
        assert saved["epoch"] in (0, 1) and saved["by_epoch"] is True
        assert all(torch.equal(saved["model"][k], snap[k]) for k in snap)
    assert hook.curr_checkpoint_name == "tiny_epoch1(12iters)_model.pth"


def test_checkpoint_hook_by_iter_fails_upstream(module, loader, make_trainer, tmp_path):
    # imix 0.1.0 bug: PeriodicCheckpointer.record_iter_checkpoint returns `None + '.pth'` on every iteration that
    # does not save, so by-iteration training with CheckPointHook cannot get past its first iteration.
    hook = CheckPointHook(Checkpointer(module.net, save_dir=str(tmp_path)), prefix="tiny", iter_period=4)
    adapter = IMIXAdapter([OptimizerHook(), hook], by_epoch=False)
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \+: 'NoneType' and 'str'") as err:
        make_trainer([adapter], max_steps=8, max_epochs=None).fit(module, loader)
    assert any("CheckPointHook in mount point 'after_train_iter'" in note for note in err.value.__notes__)


def test_evaluate_hook_records_results_and_keeps_the_best_checkpoint(module, loader, make_trainer, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work_dir").mkdir()  # EvaluateHook opens ./work_dir/eval_result.json in its constructor (upstream)
    scores = iter([0.5, 0.9])
    evaluate = EvaluateHook(lambda: {"acc": next(scores)})
    ckpt = CheckPointHook(Checkpointer(module.net, save_dir=str(tmp_path)), prefix="tiny")
    adapter = IMIXAdapter([OptimizerHook(), ckpt, evaluate], work_dir=tmp_path)
    make_trainer([adapter]).fit(module, loader)

    rows = [json.loads(line) for line in (tmp_path / "work_dir" / "eval_result.json").read_text().splitlines()]
    assert [(r["epoch"], r["acc"], r["model_name"]) for r in rows] == [
        (0, 0.5, "tiny_epoch0(6iters)_model.pth"),
        (1, 0.9, "tiny_epoch1(12iters)_model.pth"),
    ]
    best = torch.load(tmp_path / "best_result.pth")
    assert all(torch.equal(best["model"][k], v) for k, v in module.net.state_dict().items())
    whole = torch.load(tmp_path / "model_best.pth", weights_only=False)  # EvaluateHook pickles the whole module
    assert type(whole) is type(module) and "training_step" not in vars(whole)


def test_evaluate_hook_without_checkpoint_hook_fails_upstream(module, loader, make_trainer, tmp_path, monkeypatch):
    # imix 0.1.0: EvaluateHook.after_train reads the checkpoint name a CheckPointHook recorded; without one: KeyError.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work_dir").mkdir()
    adapter = IMIXAdapter([OptimizerHook(), EvaluateHook(lambda: {"acc": 1.0})])
    with pytest.raises(KeyError, match="model_name"):
        make_trainer([adapter], max_epochs=1).fit(module, loader)


def test_ema_iter_hook_drives_the_models_own_ema(module, twin, batches, loader, make_trainer):
    decay = 0.5

    def init_ema():
        module.ema = {k: v.detach().clone() for k, v in module.net.state_dict().items()}

    def update_ema():
        for k, v in module.net.state_dict().items():
            module.ema[k].mul_(decay).add_(v.detach(), alpha=1 - decay)

    module.init_ema, module.update_ema = init_ema, update_ema
    make_trainer([IMIXAdapter([OptimizerHook(), EMAIterHook()])]).fit(module, loader)

    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    ema = {k: v.detach().clone() for k, v in twin.state_dict().items()}
    for _ in range(2):
        for x, y in batches:
            opt.zero_grad()
            torch.nn.functional.mse_loss(twin(x), y).backward()
            opt.step()
            for k, v in twin.state_dict().items():  # EMAIterHook (NORMAL) runs after OptimizerHook (HIGH)
                ema[k].mul_(decay).add_(v, alpha=1 - decay)
    assert all(torch.equal(module.ema[k], ema[k]) for k in ema)


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
