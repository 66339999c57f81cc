"""Every mistake in the issue's bad-input list, tried per family; docs/errors.md lists the messages asserted here."""

from __future__ import annotations

import warnings

import lightning.pytorch as pl
import pytest
import torch
from reliability_kit import fit
from reliability_resume_run import Net

from lightning_hooks import ClassyAdapter, IMIXAdapter, MMEngineAdapter, adapt
from lightning_hooks.core.adapter_state import base_state_key


# ----------------------------------------------------------------------- unknown hook type or registry name
def test_reliability_unknown_hook_type_names_the_closest_registered_one():
    from lightning_hooks.families.mmengine.config import build_hooks

    # closest first; once a downstream library registered its hooks (tests/families/mmengine), 'mmpretrain.EMAHook' follows

    with pytest.raises(KeyError, match=r"build_hooks: hook type 'EMAHok' is not registered in the 'hook' registry "
                                       r"\(scope 'mmengine'\) or its children\. Did you mean 'EMAHook'"):  # fmt: skip
        build_hooks(custom_hooks=[dict(type="EMAHok")])
    with pytest.raises(KeyError, match=r"unknown Classy hook name 'ema_model_weight'\. Did you mean: ema_model_weights\? "
                                       r"Registered: checkpoint, ema_model_weights, "):  # fmt: skip
        ClassyAdapter([{"name": "ema_model_weight", "decay": 0.9}])
    with pytest.raises(KeyError, match=r"unknown iMIX hook type 'IterationTimerHok'\. Did you mean: IterationTimerHook\? "
                                       r"Registered: "):  # fmt: skip
        IMIXAdapter([{"type": "IterationTimerHok"}])


# ------------------------------------------------------------------------------ priority / level that does not exist
def test_reliability_mmengine_priority_that_does_not_exist():
    from mmengine.hooks import EMAHook

    from lightning_hooks.families.mmengine.config import build_hooks

    valid = r"Use an int from 0 \(highest\) to 100 \(lowest\) or one of \['HIGHEST', 'VERY_HIGH', "
    with pytest.raises(ValueError, match=rf"MMEngine hook EMAHook: priority 'VERYHIGH' does not exist\. {valid}"):
        build_hooks(custom_hooks=[dict(type="EMAHook", priority="VERYHIGH")])
    hook = EMAHook()
    hook.priority = 101
    with pytest.raises(ValueError, match=rf"MMEngine hook EMAHook: priority 101 does not exist\. {valid}"):
        MMEngineAdapter([hook])


def test_reliability_imix_level_that_does_not_exist(caplog):
    from imix.engine.hooks import IterationTimerHook, PriorityStatus

    with pytest.raises(ValueError, match=r"unknown iMIX level 'VERY_HIGH': use a PriorityStatus member, one of "
                                         r"\['HIGHEST', 'HIGHER', 'HIGH', 'NORMAL', 'LOW', 'LOWER', 'LOWEST'\]"):  # fmt: skip
        IMIXAdapter([{"type": "IterationTimerHook", "level": "VERY_HIGH"}])
    # Upstream: iMIX's own `level` setter prints and falls back to NORMAL; the adapter then sees a valid level
    hook = IterationTimerHook()
    hook.level = "VERY_HIGH"
    assert "because levelVERY_HIGH is not a PriorityStatus type,it will be set as default type" in caplog.text
    assert hook.level == PriorityStatus.NORMAL
    IMIXAdapter([hook])


# ------------------------------------------------------------------------------- a hook object from no family
def test_reliability_object_from_no_known_family():
    from imix.engine.hooks import IterationTimerHook

    with pytest.raises(TypeError, match=r"is not a hook of a known family\. Accepted base classes: mmengine: "
                                        r"mmengine\.hooks\.Hook; classy: classy_vision\.hooks\.ClassyHook"):  # fmt: skip
        adapt([torch.nn.Linear(1, 1)])
    with pytest.raises(TypeError, match=r"MMEngineAdapter cannot drive .*IterationTimerHook\): it is not a mmengine "
                                        r"hook\. Accepted base classes: mmengine\.hooks\.hook\.Hook\."):  # fmt: skip
        MMEngineAdapter([IterationTimerHook()])


# --------------------------------------------------------------------------- a host option no adapter accepts
def test_reliability_host_option_no_adapter_accepts():
    from classy_vision.hooks import ExponentialMovingAverageModelHook
    from mmengine.hooks import EMAHook

    with pytest.raises(TypeError, match=r"adapt\(\): no adapter accepts the option\(s\) \['wrk_dir'\]; accepted options: "
                                        r"\{'MMEngineAdapter': \['cfg', .*'work_dir'\], 'ClassyAdapter': \["):  # fmt: skip
        adapt([EMAHook(), ExponentialMovingAverageModelHook(0.9)], wrk_dir="work")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'wrk_dir'"):
        MMEngineAdapter([EMAHook()], wrk_dir="work")


# ------------------------------------------------------------------- a hook reading what the facade lacks
def test_reliability_hook_reading_a_missing_facade_attribute(tmp_path):
    from classy_vision.hooks import ClassyHook
    from imix.engine.hooks import HookBase
    from mmengine.hooks import Hook

    class NeedsLauncher(Hook):
        def before_train(self, runner) -> None:
            runner.launcher

    class NeedsEmaModel(ClassyHook):
        on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

        def on_start(self, task) -> None:
            task.ema_model

    class NeedsEvaluator(HookBase):
        def before_train(self) -> None:
            self.trainer.evaluator

    cases = [
        (MMEngineAdapter([NeedsLauncher()]), "runner", "runner", "launcher", "mmengine", NeedsLauncher, "before_train"),
        (ClassyAdapter([NeedsEmaModel()]), "task", "task", "ema_model", "classy", NeedsEmaModel, "on_start"),
        (IMIXAdapter([NeedsEvaluator()]), "trainer", "engine", "evaluator", "imix", NeedsEvaluator, "before_train"),
    ]
    for adapter, host, attribute, name, family, hook, mount in cases:
        with pytest.raises(AttributeError, match=rf"lightning-hooks' {host} facade has no attribute '{name}'\. It "
                                                 rf"provides: .*If your hook needs '{name}', set it on the facade "
                                                 rf"before training \(adapter\.{attribute}\.{name} = \.\.\.\)") as err:  # fmt: skip
            fit(tmp_path, [adapter])
        assert err.value.__notes__ == [
            f"[lightning-hooks] raised by {family} hook {hook.__qualname__} in mount point '{mount}' "
            "(Lightning event 'on_train_start', epoch 0, global step 0)"
        ]


# ------------------------------------------------------------------------------------ a misspelled mount point
def test_reliability_misspelled_mount_points_and_signatures_warn_at_adapt_time():
    from classy_vision.hooks import ClassyHook
    from imix.engine.hooks import HookBase
    from mmengine.hooks import Hook

    class MM(Hook):
        def after_train_iters(self, runner, batch_idx, data_batch=None, outputs=None) -> None: ...

    class Classy(ClassyHook):
        on_start = on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

        def on_phase_ends(self, task) -> None: ...

    class Imix(HookBase):
        def after_train_iteration(self) -> None: ...

        def before_train(self, trainer) -> None: ...

    with pytest.warns(UserWarning) as record:
        adapt([MM(), Classy(), Imix()])
    messages = sorted(str(w.message) for w in record)
    assert messages == [
        "Classy hook test_reliability_misspelled_mount_points_and_signatures_warn_at_adapt_time.<locals>.Classy "
        "defines 'on_phase_ends', which is not one of Classy's mount points and will never be called. Did you mean "
        "'on_phase_end'?",
        "MMEngine hook test_reliability_misspelled_mount_points_and_signatures_warn_at_adapt_time.<locals>.MM defines "
        "'after_train_iters', which is not one of MMEngine's mount points and will never be called. Did you mean "
        "'after_train_iter'?",
        "iMIX hook test_reliability_misspelled_mount_points_and_signatures_warn_at_adapt_time.<locals>.Imix defines "
        "'after_train_iteration', which is not one of iMIX's mount points and will never be called. Did you mean "
        "'after_train_iter'?",
        "iMIX hook test_reliability_misspelled_mount_points_and_signatures_warn_at_adapt_time.<locals>.Imix."
        "before_train cannot be called as the host calls it (before_train()): missing a required argument: "
        "'trainer'. Use iMIX's signature, e.g. def before_train(self).",
    ]
    from classy_vision.hooks import ExponentialMovingAverageModelHook
    from imix.engine.hooks import IterationTimerHook
    from mmengine.hooks import EMAHook

    with warnings.catch_warnings():  # the libraries' own hooks are never flagged
        warnings.simplefilter("error")
        adapt([EMAHook(), ExponentialMovingAverageModelHook(0.9), IterationTimerHook()])


# ------------------------------------------------------------------------ precision and optimiser conflicts
def test_reliability_imix_precision_and_optimizer_conflicts(tmp_path):
    from imix.engine.hooks import Fp16OptimizerHook, IterationTimerHook, OptimizerHook

    conflicts = [
        ([OptimizerHook()], dict(accumulate_grad_batches=2), r"IMIXAdapter: OptimizerHook owns backward and the "
         r"optimizer step, so Lightning must not accumulate \(Trainer\(accumulate_grad_batches=2\)\)\. Use "
         r"IMIXAdapter\(gradient_accumulation_steps=2\) instead\."),
        ([OptimizerHook()], dict(gradient_clip_val=1.0), r"IMIXAdapter: OptimizerHook owns backward and the optimizer "
         r"step, so Lightning's gradient_clip_val=1\.0 would be ignored\. Clip with OptimizerHook\(grad_clip="),
        ([Fp16OptimizerHook()], dict(precision="bf16-mixed"), r"IMIXAdapter: Fp16OptimizerHook owns a GradScaler and "
         r"the fp16 autocast, so Lightning must run at precision='32-true', not 'bf16-mixed'\."),
        ([], dict(accumulate_grad_batches=2), r"IMIXAdapter\(gradient_accumulation_steps=1\) but Lightning accumulates "
         r"2 batches \(no OptimizerHook owns the step\): set both to the same value\."),
    ]  # fmt: skip
    for hooks, trainer_options, message in conflicts:
        with pytest.raises(ValueError, match=message):
            fit(tmp_path, [IMIXAdapter([*hooks, IterationTimerHook()])], **trainer_options)


def test_reliability_mmengine_param_schedulers_conflict_with_lightning_scheduler(tmp_path):
    from mmengine.hooks import ParamSchedulerHook

    class Scheduled(Net):
        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1)]

    adapter = MMEngineAdapter([ParamSchedulerHook()], param_schedulers=[dict(type="MultiStepLR", milestones=[1])])
    with pytest.raises(ValueError, match=r"MMEngineAdapter\(param_schedulers=\.\.\.\) and configure_optimizers\(\) "
                                         r"both schedule the same optimizer"):  # fmt: skip
        fit(tmp_path, [adapter], model=Scheduled())


# ------------------------------------------------------------------------ a checkpoint from another family
def test_reliability_checkpoint_from_another_family_is_refused(tmp_path):
    from classy_vision.hooks import ExponentialMovingAverageModelHook
    from imix.engine.hooks import IterationTimerHook

    classy = ClassyAdapter([ExponentialMovingAverageModelHook(0.9, device="cpu")])
    fit(tmp_path, [classy]).save_checkpoint(tmp_path / "classy.ckpt")
    ckpt = torch.load(tmp_path / "classy.ckpt", weights_only=True)
    imix = IMIXAdapter([IterationTimerHook()])
    ckpt["callbacks"][imix.state_key] = ckpt["callbacks"].pop(classy.state_key)  # e.g. a hand-merged checkpoint
    torch.save(ckpt, tmp_path / "renamed.ckpt")
    with pytest.raises(ValueError, match=r"IMIXAdapter \(IterationTimerHook\) was given "
                                         r"checkpoint state written by a 'classy' adapter\. Resume with the same adapters "
                                         r"and hooks the checkpoint was written with\."):  # fmt: skip
        fit(tmp_path, [imix], max_epochs=2, ckpt_path=tmp_path / "renamed.ckpt")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="Lightning's GradScaler exists only with CUDA fp16")
def test_reliability_imix_optimizer_hook_with_lightning_grad_scaler(tmp_path):
    from imix.engine.hooks import OptimizerHook

    with pytest.raises(ValueError, match=r"IMIXAdapter: OptimizerHook calls backward itself, so it cannot share "
                                         r"Lightning's GradScaler \(precision='16-mixed'\)\. Use precision='32-true', "
                                         r"and Fp16OptimizerHook for fp16\."):  # fmt: skip
        fit(tmp_path, [IMIXAdapter([OptimizerHook()])], precision="16-mixed", accelerator="cuda")


def test_reliability_native_ema_refuses_another_callbacks_state(tmp_path):
    from lightning_hooks.callbacks import EMA, AnomalyDetector

    anomaly = AnomalyDetector(policy="skip")
    fit(tmp_path, [anomaly]).save_checkpoint(tmp_path / "anomaly.ckpt")
    ckpt = torch.load(tmp_path / "anomaly.ckpt", weights_only=True)
    ema = EMA()
    ckpt["callbacks"][ema.state_key] = ckpt["callbacks"].pop(anomaly.state_key)
    torch.save(ckpt, tmp_path / "renamed.ckpt")
    with pytest.raises(KeyError, match=r"EMA: unexpected state keys \['skipped_steps'\]; expected \['ema', "
                                       r"'num_updates'\]\. The checkpoint was not written by "
                                       r"lightning_hooks\.callbacks\.EMA\."):  # fmt: skip
        fit(tmp_path, [ema], max_epochs=2, ckpt_path=tmp_path / "renamed.ckpt")


# ----------------------------------------------------------------------------- two equal stateful callbacks
def test_reliability_equal_callbacks_get_their_own_state_keys_and_each_resumes_its_own_state(tmp_path):
    from mmengine.hooks import RuntimeInfoHook

    from lightning_hooks.callbacks import AnomalyDetector

    def callbacks():
        return [MMEngineAdapter([RuntimeInfoHook()]), MMEngineAdapter([RuntimeInfoHook()]),
                AnomalyDetector(policy="skip"), AnomalyDetector(policy="skip")]  # fmt: skip

    first = callbacks()
    trainer = fit(tmp_path, first)
    assert [c.state_key for c in first] == [
        base_state_key("MMEngineAdapter", ["RuntimeInfoHook"]), base_state_key("MMEngineAdapter", ["RuntimeInfoHook"]) + "#1",
        "AnomalyDetector", "AnomalyDetector#1",
    ]  # fmt: skip
    first[1].runner.message_hub.update_info("marker", 1)
    first[3].skipped_steps = 5
    trainer.save_checkpoint(tmp_path / "two.ckpt")
    del first, trainer
    second = callbacks()  # a new process builds them in the same order
    fit(tmp_path, second, max_epochs=2, ckpt_path=tmp_path / "two.ckpt")
    assert second[0].runner.message_hub.get_info("marker") is None
    assert second[1].runner.message_hub.get_info("marker") == 1
    assert (second[2].skipped_steps, second[3].skipped_steps) == (0, 5)


def test_reliability_two_native_emas_get_distinct_keys_and_are_refused_as_two_weight_swaps(tmp_path):
    from lightning_hooks.callbacks import EMA

    # distinct state keys: Lightning's generic "state_key must be unique" is gone; both swap into one model: refused
    slow, fast = EMA(decay=0.9, warmup=False), EMA(decay=0.5, warmup=False)
    with pytest.raises(ValueError, match=r"lightning_hooks\.callbacks\.EMA and lightning_hooks\.callbacks\.EMA both swap"):
        fit(tmp_path, [slow, fast])


# ------------------------------------------------------------------------- a plugin passed as a callback
def test_reliability_atomic_checkpoint_io_in_callbacks_is_accepted(tmp_path):
    from lightning_hooks.callbacks import AtomicCheckpointIO

    class Probe(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            self.io = trainer.strategy.checkpoint_io

    io, probe = AtomicCheckpointIO(), Probe()
    trainer = fit(tmp_path, [io, probe])
    assert probe.io is io
    trainer.save_checkpoint(tmp_path / "a.ckpt")
    assert torch.load(tmp_path / "a.ckpt", weights_only=True)["global_step"] == 6
    with pytest.raises(ValueError, match=r"AtomicCheckpointIO in callbacks=\[\.\.\.\] would replace the Trainer's "
                                         r"checkpoint IO AsyncCheckpointIO; a Trainer has one"):  # fmt: skip
        from lightning.pytorch.plugins.io import AsyncCheckpointIO

        fit(tmp_path, [AtomicCheckpointIO()], plugins=[AsyncCheckpointIO()])


# ------------------------------------------------------------------------------------- adapt() misuse
def test_reliability_adapt_with_no_hooks_or_a_config_dict_says_what_to_do():
    with pytest.raises(ValueError, match=r"adapt\(\) was given no hooks\. Pass legacy hook objects, e\.g\. "
                                         r"adapt\(\[EMAHook\(\)\]\)"):  # fmt: skip
        adapt([])
    with pytest.raises(TypeError, match=r"adapt\(\) was given the config \{'type': 'EMAHook'\}, which names no family\. "
                                        r"Build hooks from configs with their family's adapter: "
                                        r"MMEngineAdapter\.from_config\(custom_hooks=\[\.\.\.\]\) .*"
                                        r"lightning_hooks\.build_callbacks\(cfg\)"):  # fmt: skip
        adapt([dict(type="EMAHook")])


# ------------------------------------------------------------------------- arguments checked at adapt time
def test_reliability_bad_arguments_fail_at_adapt_time():
    from imix.engine.hooks import OptimizerHook
    from mmengine.hooks import CheckpointHook, EMAHook

    from lightning_hooks.callbacks import EMA

    with pytest.raises(TypeError, match=r"MMEngineAdapter\(work_dir=123\): work_dir must be a path \(str or "
                                        r"os\.PathLike\), not int"):  # fmt: skip
        MMEngineAdapter([EMAHook()], work_dir=123)
    with pytest.raises(TypeError, match=r"IMIXAdapter\(work_dir=123\): work_dir must be a path"):
        IMIXAdapter([OptimizerHook()], work_dir=123)
    with pytest.raises(TypeError, match=r"MMEngineAdapter: CheckpointHook was built with interval='1' \(str\), but it "
                                        r"needs an int, e\.g\. interval=1; the hook would fail only when it first "
                                        r"uses it in training"):  # fmt: skip
        adapt([CheckpointHook(interval="1")])
    with pytest.raises(TypeError, match=r"IMIXAdapter: OptimizerHook was built with grad_clip=1\.0 \(float\), but it "
                                        r"needs None or a dict of clip_grad_norm_ arguments \(.*max_norm.*\), e\.g\. "
                                        r"grad_clip=dict\(max_norm=1\.0\)"):  # fmt: skip
        adapt([OptimizerHook(grad_clip=1.0)])
    IMIXAdapter([OptimizerHook(grad_clip=dict(max_norm=1.0, norm_type=2))])
    with pytest.raises(ValueError, match=r"EMA: `decay` must be a number in \[0, 1\), got '0\.9'"):
        EMA(decay="0.9")


def test_reliability_mmengine_scheduler_config_with_an_unknown_argument_fails_at_adapt_time(tmp_path):
    from mmengine.hooks import ParamSchedulerHook

    with pytest.raises(TypeError, match=r"MMEngineAdapter\(param_schedulers=\.\.\.\): \{'type': 'MultiStepLR', "
                                        r"'milestone': \[1\]\}: unknown MultiStepLR argument 'milestone'\. Did you "
                                        r"mean: milestones\?"):  # fmt: skip
        MMEngineAdapter([ParamSchedulerHook()], param_schedulers=[dict(type="MultiStepLR", milestone=[1])])
    # an error that has nothing to do with the end the facade fills in gets a note without that advice
    adapter = MMEngineAdapter([ParamSchedulerHook()], param_schedulers=[dict(type="MultiStepLR", milestones=1)])
    with pytest.raises(TypeError) as err:
        fit(tmp_path, [adapter])
    assert err.value.__notes__ == [
        "[lightning-hooks] MMEngineAdapter(param_schedulers=...) could not build {'type': 'MultiStepLR', "
        "'milestones': 1}."
    ]
