"""Hooks that own the optimisation (OptimizerHook, Fp16OptimizerHook, LRSchedulerHook): against iMIX's own engine
(imix_reference; more cases in tests/families/imix/test_engine.py), and under Lightning: who steps, what Lightning counts, the
Lightning options that would fight them. The CUDA fp16 test keeps a transcribed reference (see its docstring)."""

from __future__ import annotations

import copy

import pytest
import torch
from imix.engine.hooks import (
    Fp16OptimizerHook,
    LRSchedulerHook,
    OptimizerHook,
)
from imix_reference import assert_runs_as_imix, recorder
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.nn.functional import mse_loss

from lightning_hooks import IMIXAdapter

EPOCHS = 2


def count_steps(optimizer):
    calls = []
    optimizer.register_step_post_hook(lambda *a: calls.append(1))
    return calls


def test_optimizer_hook_with_clipping_and_accumulation_matches_reference_loop(tmp_path):
    """OptimizerHook (grad_clip, gradient_accumulation_steps) against iMIX's engine loop, the reference."""
    assert_runs_as_imix(tmp_path, gradient_accumulation_steps=2, optimizer_config=dict(grad_clip=dict(max_norm=0.5)))


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()` before")  # iMIX does so too (gas=2)
@pytest.mark.parametrize("lr_accumulation", [False, True, None])
def test_lr_scheduler_hook_steps_its_scheduler_as_imix(tmp_path, lr_accumulation):
    """LRSchedulerHook with accumulation: once per accumulation cycle with is_lr_accumulation (iMIX's default when the
    config does not say), else every iteration; LR per iteration against iMIX's engine."""
    options = {} if lr_accumulation is None else dict(is_lr_accumulation=lr_accumulation)
    imix, _ = assert_runs_as_imix(tmp_path, gradient_accumulation_steps=2, **options)
    lrs = [lr for row in recorder(imix.hooks).scalars if (lr := row.get("lr")) is not None]
    assert len(lrs) == (12 if lr_accumulation is False else 6)  # the scheduler steps it recorded


def test_optimizer_hook_owns_the_step_and_lightning_counts_it(module, loader, make_trainer):
    steps = count_steps(module.optimizer)
    adapter = IMIXAdapter([OptimizerHook(grad_clip=dict(max_norm=0.5))], gradient_accumulation_steps=2)
    trainer = make_trainer([adapter])
    trainer.fit(module, loader)
    assert trainer.global_step == len(steps) == EPOCHS * 6 // 2
    assert module.automatic_optimization is True  # manual during the fit (one step per hook step), restored after
    assert "training_step" not in vars(module)  # the iteration wrapper is removed after fit


def test_global_step_drives_max_steps_and_step_checkpoints(module, loader, make_trainer, tmp_path):
    steps = count_steps(module.optimizer)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1, save_top_k=-1)
    adapter = IMIXAdapter([OptimizerHook()], gradient_accumulation_steps=2)
    trainer = make_trainer([adapter, ckpt], max_epochs=5, max_steps=3, enable_checkpointing=True)
    trainer.fit(module, loader)
    assert len(steps) == trainer.global_step == 3
    assert adapter.fired["after_train_iter"] == 6  # 3 steps x 2 accumulated iterations
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        f"epoch=0-step={s}.ckpt" for s in (1, 2, 3)
    ]


def test_lr_scheduler_hook_rejects_a_lightning_scheduler_on_the_same_optimizer(module, loader, make_trainer):
    sched = torch.optim.lr_scheduler.StepLR(module.optimizer, step_size=1)
    module.configure_optimizers = lambda: {"optimizer": module.optimizer, "lr_scheduler": sched}
    with pytest.raises(ValueError, match="LRSchedulerHook steps its own scheduler"):
        make_trainer([IMIXAdapter([LRSchedulerHook(module.optimizer, sched), OptimizerHook()])]).fit(module, loader)


def test_lr_scheduler_hook_rejects_an_optimizer_lightning_does_not_train(module, loader, make_trainer):
    other = torch.optim.SGD(module.parameters(), lr=0.1)
    hook = LRSchedulerHook(other, torch.optim.lr_scheduler.StepLR(other, 1))
    with pytest.raises(ValueError, match="optimizer Lightning does not train"):
        make_trainer([IMIXAdapter([hook])]).fit(module, loader)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(accumulate_grad_batches=2), "gradient_accumulation_steps=2"),
        (dict(gradient_clip_val=1.0), "grad_clip=dict"),
    ],
)
def test_lightning_options_that_would_fight_the_optimizer_hook_are_errors(module, loader, make_trainer, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_trainer([IMIXAdapter([OptimizerHook()])], **kwargs).fit(module, loader)


def test_accumulation_must_agree_when_lightning_steps(module, loader, make_trainer):
    with pytest.raises(ValueError, match="set both to the same value"):
        make_trainer([IMIXAdapter([LRSchedulerHook(module.optimizer, torch.optim.lr_scheduler.StepLR(module.optimizer, 1))],
                                  gradient_accumulation_steps=2)]).fit(module, loader)


def test_lightning_accumulation_across_an_epoch_end_is_an_error(module, loader, make_trainer):
    # 6 batches an epoch, 4 accumulated: Lightning steps after batches 4 and 6 and starts over, iMIX's hooks count on
    sched = torch.optim.lr_scheduler.StepLR(module.optimizer, 1)
    adapter = IMIXAdapter([LRSchedulerHook(module.optimizer, sched)], gradient_accumulation_steps=4)
    with pytest.raises(ValueError) as err:
        make_trainer([adapter], accumulate_grad_batches=4).fit(module, loader)
    assert str(err.value) == (
        "IMIXAdapter: Lightning accumulates gradient_accumulation_steps=4 batches per step and starts over each epoch "
        "of 6 batches, while iMIX's hooks (LRSchedulerHook) and max_iter count accumulation across epochs, so they "
        "would drift apart. Add OptimizerHook (it owns the step and accumulates as iMIX does), or make the epoch "
        "length a multiple of 4."
    )


def test_a_later_fit_without_a_step_owning_hook_optimises_again(module, twin, batches, loader, make_trainer):
    """The switch to manual optimisation ends with the fit: the hooks' steps stay counted in ``global_step``, and a
    plain Trainer fitting the module afterwards optimises it as Lightning does."""
    first = make_trainer([IMIXAdapter([OptimizerHook()])], max_epochs=1)
    first.fit(module, loader)
    assert module.automatic_optimization is True and first.global_step == 6
    second = make_trainer([], max_epochs=1)
    second.fit(module, loader)
    assert module.automatic_optimization is True and second.global_step == 6

    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    for _ in range(2):
        for x, y in batches:
            opt.zero_grad()
            mse_loss(twin(x), y).backward()
            opt.step()
    for mine, ref in zip(module.net.parameters(), twin.parameters()):
        assert torch.allclose(mine, ref)


def test_fp16_hook_with_lightning_16_mixed_is_an_error(module, loader, make_trainer):
    with pytest.raises(ValueError, match="Fp16OptimizerHook owns a GradScaler"):
        make_trainer([IMIXAdapter([Fp16OptimizerHook()])], precision="16-mixed").fit(module, loader)


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch warns that GradScaler is disabled without CUDA
def test_fp16_hook_on_cpu_has_a_disabled_scaler_and_equals_fp32(module, loader, make_trainer):
    fp32 = copy.deepcopy(module)
    fp32.optimizer = torch.optim.SGD(fp32.net.parameters(), lr=0.1)
    hook = Fp16OptimizerHook(grad_clip=dict(max_norm=0.5))
    make_trainer([IMIXAdapter([hook], gradient_accumulation_steps=1)]).fit(module, loader)
    make_trainer([IMIXAdapter([OptimizerHook(grad_clip=dict(max_norm=0.5))])]).fit(fp32, loader)
    assert hook._scaler is not None and not hook._scaler.is_enabled()
    for mine, ref in zip(module.net.parameters(), fp32.net.parameters()):
        assert torch.equal(mine, ref)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Fp16OptimizerHook's real fp16 path needs CUDA")
def test_fp16_hook_on_cuda_runs_real_fp16_and_matches_reference_scaler(module, twin, batches, loader, make_trainer):
    """Transcribed reference (the loop below: autocast forward, GradScaler scale/step/update): iMIX's engine runs here
    on CPU only (its stand-in zoo in imix_reference has no device placement), where fp16 is off."""
    losses = []

    hook = Fp16OptimizerHook(grad_scaler_config=dict(init_scale=2.0**16))
    adapter = IMIXAdapter([hook])
    step = type(module).training_step

    def training_step(self, batch, batch_idx):
        loss = step(self, batch, batch_idx)
        assert torch.is_autocast_enabled("cuda")
        losses.append(loss.detach().float().cpu())
        return loss

    module.training_step = training_step.__get__(module)
    make_trainer([adapter], accelerator="cuda", devices=1, precision="32-true").fit(module, loader)

    twin = twin.cuda()
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**16)
    ref_losses = []
    for _ in range(EPOCHS):
        for x, y in batches:
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = mse_loss(twin(x.cuda()), y.cuda())
            ref_losses.append(loss.detach().float().cpu())
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    assert all(torch.isfinite(l) for l in losses)
    assert torch.allclose(torch.stack(losses), torch.stack(ref_losses))
    assert hook._scaler.get_scale() == scaler.get_scale()
    assert hook._scaler.state_dict()["_growth_tracker"] == scaler.state_dict()["_growth_tracker"]
    for mine, ref in zip(module.net.parameters(), twin.parameters()):  # Lightning's teardown moved the module to the CPU
        assert torch.allclose(mine, ref.cpu())
