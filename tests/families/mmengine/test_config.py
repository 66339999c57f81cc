"""Config building through MMEngine's HOOKS registry, adapt-time checks of user hooks, and the runner facade."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from mmengine_testkit import LitToy, hook_of, loaders, make_model, run_lightning
from mmengine.hooks import CheckpointHook, EMAHook, Hook
from mmengine.registry import HOOKS, Registry
from mmengine.runner import Runner

import lightning.pytorch as pl
from lightning_hooks import adapt
from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks

CONFIGS = [
    dict(),
    dict(default_hooks=dict(timer=None, logger=dict(type="LoggerHook", interval=5, priority=20))),
    dict(custom_hooks=[dict(type="EMAHook"), dict(type="EmptyCacheHook", priority="VERY_LOW"),
                       dict(type="SyncBuffersHook", priority=50), dict(type="EarlyStoppingHook", monitor="x", rule="less")]),
    dict(default_hooks=dict(checkpoint=None, param_scheduler=None), custom_hooks=[dict(type="EMAHook", priority=0)]),
]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_mmengine_build_hooks_matches_runner_hook_order(tmp_path, cfg):
    runner = Runner(model=make_model(), work_dir=str(tmp_path), experiment_name=f"order-{id(cfg)}", **copy.deepcopy(cfg))
    expected = [(type(h).__name__, h.priority) for h in runner.hooks]
    built = build_hooks(**cfg)
    assert [(type(h).__name__, h.priority) for h in built] == expected
    assert [(type(h).__name__, h.priority) for h in MMEngineAdapter(built).hooks] == expected
    assert [type(h).__name__ for h in MMEngineAdapter.from_config(**cfg).hooks] == [n for n, _ in expected]


def test_mmengine_build_hooks_merges_default_hook_options():
    (ckpt,) = [h for h in build_hooks(default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=7)))
               if isinstance(h, CheckpointHook)]
    assert ckpt.interval == 7


def test_mmengine_unknown_hook_type_names_it_and_the_closest_registered_names():
    with pytest.raises(KeyError, match=r"'EMAHok' is not registered.*Did you mean 'EMAHook'"):
        build_hooks(custom_hooks=[dict(type="EMAHok")])
    with pytest.raises(KeyError, match=r"'ChekpointHook'.*'CheckpointHook'"):
        build_hooks(default_hooks=dict(checkpoint=dict(type="ChekpointHook")))


DOWNSTREAM = Registry("hook", parent=HOOKS, scope="downstream_proj")


@DOWNSTREAM.register_module()
class CountingHook(Hook):
    priority = "LOW"

    def __init__(self, every: int = 1) -> None:
        self.every, self.iters = every, 0

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self.iters += 1


def test_mmengine_user_hooks_from_downstream_registries_build_and_run(tmp_path):
    built = build_hooks(custom_hooks=[dict(type="CountingHook", every=2)], default_scope="downstream_proj")
    scoped = build_hooks(custom_hooks=[dict(type="downstream_proj.CountingHook")])
    assert [type(h).__name__ for h in built] == [type(h).__name__ for h in scoped]
    hook = hook_of(built, CountingHook)
    assert hook.every == 2
    _, adapter, _ = run_lightning(tmp_path, default_hooks=dict(checkpoint=None), custom_hooks=[hook], max_epochs=1)
    assert hook.iters == 4
    with pytest.raises(KeyError, match="downstream_proj.CountingHook"):
        build_hooks(custom_hooks=[dict(type="downstream_proj.CountinHook")])


class Misspelled(Hook):
    def after_train_iters(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        pass


class WrongSignature(Hook):
    def after_train_iter(self, runner, idx, batch) -> None:
        pass

    def after_val_epoch(self, runner) -> None:
        pass


def test_mmengine_misspelled_mount_point_warns_at_adapt_time():
    with pytest.warns(UserWarning, match=r"Misspelled defines 'after_train_iters'.*Did you mean 'after_train_iter'"):
        adapt([Misspelled()])


def test_mmengine_wrong_signature_warns_at_adapt_time():
    with pytest.warns(UserWarning) as record:
        MMEngineAdapter([WrongSignature()])
    messages = [str(w.message) for w in record]
    assert any("WrongSignature.after_train_iter cannot be called" in m and "batch_idx" in m for m in messages)
    assert any("WrongSignature.after_val_epoch cannot be called" in m and "metrics" in m for m in messages)


def test_mmengine_correct_hooks_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MMEngineAdapter(build_hooks(custom_hooks=[dict(type="EMAHook")]) + [CountingHook()])


def test_mmengine_facade_attribute_error_names_attribute_and_what_it_provides():
    adapter = MMEngineAdapter([EMAHook()])
    with pytest.raises(AttributeError, match=r"no attribute 'launcher'.*It provides: .*message_hub.*train_loop"):
        adapter.runner.launcher


def test_mmengine_facade_surface_during_training(tmp_path):
    seen = {}

    class Probe(Hook):
        def before_train(self, runner) -> None:
            ow = runner.optim_wrapper
            seen.update(
                model=runner.model, lr=ow.get_lr(), momentum=ow.get_momentum(), groups=ow.param_groups,
                loop=(len(runner.train_loop.dataloader), runner.train_loop.max_epochs, runner.train_loop.max_iters),
                val=len(runner.val_loop.dataloader), dist=(runner.rank, runner.world_size, runner.distributed),
                dirs=(runner.work_dir, runner.log_dir), hub=runner.message_hub, cfg=runner.cfg.pretty_text,
            )

        def after_train_epoch(self, runner) -> None:
            runner.train_loop.stop_training = True

    trainer, adapter, module = run_lightning(tmp_path, default_hooks=dict(checkpoint=None), custom_hooks=[Probe()])
    assert seen["model"] is module.model  # the MMEngine model the LightningModule holds
    assert seen["lr"] == {"lr": [0.1]} and seen["momentum"] == {"momentum": [0.0]}
    assert seen["groups"] is trainer.optimizers[0].param_groups
    assert seen["loop"] == (4, 3, 12) and seen["val"] == 2 and seen["dist"] == (0, 1, False)
    assert seen["dirs"] == (str(tmp_path), str(tmp_path / adapter.runner.timestamp))
    assert trainer.current_epoch == 1  # stop_training stopped Lightning after the first epoch


def test_mmengine_message_hub_is_one_real_instance_per_adapter():
    a, b = MMEngineAdapter([EMAHook()]), MMEngineAdapter([EMAHook()])
    from mmengine.logging import MessageHub

    assert isinstance(a.runner.message_hub, MessageHub)
    assert a.runner.message_hub is not b.runner.message_hub
    a.runner.message_hub.update_scalar("train/loss", 1.0)
    assert "train/loss" not in b.runner.message_hub.log_scalars


def test_mmengine_message_hub_round_trips_through_lightning_checkpoint(tmp_path):
    trainer, adapter, module = run_lightning(tmp_path, default_hooks=dict(checkpoint=None), max_epochs=1)
    trainer.save_checkpoint(tmp_path / "x.ckpt")
    ckpt = torch.load(tmp_path / "x.ckpt", weights_only=False)
    fresh = MMEngineAdapter(build_hooks(default_hooks=dict(checkpoint=None)))
    fresh.load_state_dict(ckpt["callbacks"][adapter.state_key])
    hub, saved = fresh.runner.message_hub, adapter.runner.message_hub
    assert hub.get_scalar("train/loss").data[0].tolist() == saved.get_scalar("train/loss").data[0].tolist()
    assert hub.get_info("iter") == saved.get_info("iter") == 3  # RuntimeInfoHook's value: the last iter's index
    assert ckpt["message_hub"]["log_scalars"].keys() == saved.state_dict()["log_scalars"].keys()  # MMEngine layout


def test_mmengine_sanity_check_fires_nothing(tmp_path):
    from mmengine_testkit import RecorderHook

    recorder = RecorderHook()
    train, val = loaders()
    trainer = pl.Trainer(callbacks=[MMEngineAdapter([recorder])], max_epochs=1, num_sanity_val_steps=2, default_root_dir=tmp_path, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(LitToy(make_model()), train, val)
    mounts = [e[0] for e in recorder.events]
    assert mounts[:3] == ["before_run", "before_train", "before_train_epoch"]  # no validation before training
    assert mounts.count("before_val_iter") == 2 and mounts.count("before_val") == 1  # only the real validation


def test_mmengine_runner_load_checkpoint_fires_after_load_checkpoint_and_loads_weights(tmp_path):
    _, adapter, module = run_lightning(
        tmp_path, default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1)),
        custom_hooks=[dict(type="EMAHook", momentum=0.2)], max_epochs=2,
    )
    ckpt = torch.load(tmp_path / "epoch_1.pth", weights_only=False)
    ema = hook_of(adapter.hooks, EMAHook)
    adapter.runner.load_checkpoint(str(tmp_path / "epoch_1.pth"))
    # not a resume: EMAHook copies the file's (EMA-swapped) state_dict into its EMA model, as under the Runner
    for key, value in ckpt["state_dict"].items():  # the Runner's keys: those of the Toy the LightningModule holds
        torch.testing.assert_close(module.model.state_dict()[key], value)
        torch.testing.assert_close(ema.ema_model.state_dict()["module." + key], value)


class ModelSeen(Hook):
    def before_run(self, runner) -> None:
        self.model = runner.model


class TwoToys(LitToy):
    """A LightningModule holding two MMEngine models, and a parameter of its own outside both."""

    def __init__(self) -> None:
        super().__init__(make_model())
        self.teacher = make_model(seed=1)
        self.scale = torch.nn.Parameter(torch.tensor(3.0))


def _fit(module: pl.LightningModule, tmp_path, hooks: list, ckpt_path: str | None = None, **options) -> MMEngineAdapter:
    adapter = MMEngineAdapter(hooks, work_dir=tmp_path, **options)
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=2, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module, *loaders(), ckpt_path=ckpt_path)
    return adapter


@pytest.mark.parametrize("option, expected", [("model", "model"), ("teacher", "teacher"), ("", None)])
def test_mmengine_runner_model_is_the_named_module(tmp_path, option, expected):
    seen, module = ModelSeen(), TwoToys()
    _fit(module, tmp_path, [seen], model=option)
    assert seen.model is (getattr(module, expected) if expected else module)


def test_mmengine_runner_model_refuses_ambiguity_and_unknown_names(tmp_path):
    with pytest.raises(ValueError, match=r"holds several MMEngine models \('model', 'teacher'\); name the one .*"
                                         r"MMEngineAdapter\(\.\.\., model='model'\)"):
        _fit(TwoToys(), tmp_path, [ModelSeen()])
    with pytest.raises(AttributeError, match=r"MMEngineAdapter\(model='student'\): TwoToys has no submodule 'student'"):
        _fit(TwoToys(), tmp_path, [ModelSeen()], model="student")


def test_mmengine_checkpoint_keeps_the_lightning_module_state_outside_the_model(tmp_path):
    # the file's state_dict is the model's (the Runner's keys); teacher and scale travel beside it and come back on
    # a Lightning resume, so fit(ckpt_path=...) restores the whole LightningModule strictly
    first = TwoToys()
    _fit(first, tmp_path / "a", [CheckpointHook(interval=1)], model="model")
    ckpt = torch.load(tmp_path / "a" / "epoch_1.pth")
    assert ckpt["state_dict"].keys() == make_model().state_dict().keys()
    assert ckpt["lightning_hooks_outside_model"]["model_prefix"] == "model."
    assert {"scale", "teacher.linear.weight"} <= ckpt["lightning_hooks_outside_model"]["state_dict"].keys()

    resumed = TwoToys()
    with torch.no_grad():
        resumed.scale.fill_(-1.0)
    _fit(resumed, tmp_path / "b", [CheckpointHook(interval=1)], model="model", ckpt_path=str(tmp_path / "a" / "epoch_1.pth"))
    for key, value in first.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, msg=key)


def test_mmengine_lightnings_own_checkpoints_keep_the_lightning_module_keys(tmp_path):
    # only runner.save_checkpoint (CheckpointHook) writes MMEngine's keys; ModelCheckpoint's file stays Lightning's,
    # so LightningModule.load_from_checkpoint reads it without the adapter
    adapter = MMEngineAdapter([CheckpointHook(interval=1)], work_dir=tmp_path)
    saver = pl.callbacks.ModelCheckpoint(tmp_path / "lightning", save_top_k=-1)
    trainer = pl.Trainer(callbacks=[adapter, saver], max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(LitToy(make_model()), *loaders())
    (ckpt,) = (tmp_path / "lightning").glob("*.ckpt")
    assert torch.load(ckpt)["state_dict"].keys() == LitToy(make_model()).state_dict().keys()
    assert torch.load(tmp_path / "epoch_1.pth")["state_dict"].keys() == make_model().state_dict().keys()
