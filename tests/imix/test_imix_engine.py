"""iMIX's own engine is the reference: one config, trained by ``imixEngine`` (imix_reference.train) and by Lightning
with IMIXAdapter driving the hooks iMIX's Organizer built from it (imix_reference.fit). Both must show the same event
stream with the same counters at every mount point, the same log buffer, learning rates, weights, checkpoint files,
JSON status log and log lines (wall-clock times aside)."""

from __future__ import annotations

import json
import logging
import re

import pytest
import torch
from imix.engine.hooks import PriorityStatus
from imix_reference import EVALUATION, TIMINGS, Recorder, config, fit, organize, recorder, train
from lightning.pytorch.callbacks import ModelCheckpoint
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from lightning_hooks import IMIXAdapter
from lightning_hooks.compat import imix as compat

CASES = {
    "by_epoch": dict(),
    "by_epoch-accumulate": dict(gradient_accumulation_steps=2),
    "by_epoch-accumulate-no_lr_accumulation-clip": dict(
        gradient_accumulation_steps=2, is_lr_accumulation=False, optimizer_config=dict(grad_clip=dict(max_norm=0.5))
    ),
    "by_epoch-fp16-accumulate-clip": dict(
        fp16=dict(init_scale=2.0**16), gradient_accumulation_steps=3,
        optimizer_config=dict(grad_clip=dict(max_norm=0.5)),
    ),
    # by iteration: iMIX's train_by_iter makes one pass over the loader (max_iter only tells the hooks); CheckPointHook
    # by iteration crashes on an iteration it does not save (imix 0.1.0), so it saves every iteration here
    "by_iter": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1)),
    "by_iter-accumulate": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1),
                               gradient_accumulation_steps=2),
    "by_iter-fp16-clip": dict(by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1), fp16=dict(),
                              optimizer_config=dict(grad_clip=dict(max_norm=0.5))),
    # iMIX's custom_hooks after the Organizer's: EMAIterHook drives the model's EMA, TextLoggerHook logs
    "by_epoch-custom_hooks": dict(custom_hooks=[dict(type=Recorder, level=PriorityStatus.LOWEST),
                                                dict(type="EMAIterHook"), dict(type="TextLoggerHook", text="hi")]),
    # no hook owns the step: Lightning optimises (imix_reference.LightningStep in the engine)
    "lightning_steps-by_epoch": dict(lightning_steps=True),
    "lightning_steps-by_epoch-accumulate": dict(lightning_steps=True, gradient_accumulation_steps=2),
    "lightning_steps-by_iter-accumulate-no_lr_accumulation": dict(
        lightning_steps=True, by_iter=True, max_iter=6, checkpoint_config=dict(iter_period=1),
        gradient_accumulation_steps=2, is_lr_accumulation=False),
}  # fmt: skip


class LogLines(logging.Handler):
    """The imix loggers' messages, work dirs and wall-clock figures masked; not the Organizer's list of the hooks it
    built (which names LightningStep under iMIX)."""

    def __init__(self, work_dir):
        super().__init__(logging.INFO)
        self.work_dir, self.lines = str(work_dir), []

    def emit(self, record):
        if record.getMessage().startswith("hook name:"):
            return
        message = record.getMessage().replace(self.work_dir, "WORK_DIR")
        self.lines.append((record.name, re.sub(r"\d+\.\d{4,}", "T", message)))


def run(runner, cfg):
    logger = logging.getLogger("imix")
    lines, level = LogLines(cfg.work_dir), logger.level
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    try:
        hooks = runner(cfg)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(level)
    return hooks, lines.lines


def _hooks_and_model(engine_or_organizer):
    return getattr(engine_or_organizer, "_hooks", None) or engine_or_organizer.hooks, engine_or_organizer.model


def checkpoints(work_dir):
    """The checkpoint files in ``work_dir`` (not EvaluateHook's pickled model_best.pth)."""
    files = sorted(p for p in work_dir.glob("*.pth") if p.name != "model_best.pth")
    return {p.name: torch.load(p, weights_only=False) for p in files}


def status_rows(work_dir):
    rows = [json.loads(line) for line in (work_dir / "training_status.json").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMINGS} for row in rows]


def tensorboard(work_dir):
    """TensorboardLoggerHook's scalars (but the timings): tag -> [(step, value)]."""
    events = EventAccumulator(str(work_dir / "runs")).Reload()
    tags = [t for t in events.Tags()["scalars"] if t not in TIMINGS]
    return {t: [(e.step, e.value) for e in events.Scalars(t)] for t in tags}


def assert_same(mine, ref, path="checkpoint"):
    """Nested checkpoint content: equal tensors, equal everything else."""
    if isinstance(ref, torch.Tensor):
        assert torch.equal(mine, ref), path
    elif isinstance(ref, dict):
        assert mine.keys() == ref.keys(), path
        for key in ref:
            assert_same(mine[key], ref[key], f"{path}[{key!r}]")
    elif isinstance(ref, (list, tuple)):
        assert len(mine) == len(ref), path
        for i, (m, r) in enumerate(zip(mine, ref)):
            assert_same(m, r, f"{path}[{i}]")
    else:
        assert mine == ref, path


@pytest.mark.filterwarnings("ignore::UserWarning")  # GradScaler / autocast without CUDA: disabled, as under iMIX
@pytest.mark.parametrize("case", CASES)
def test_lightning_runs_the_config_as_imix_engine(tmp_path, case):
    imix_dir, lightning_dir = tmp_path / "imix", tmp_path / "lightning"
    options = dict(CASES[case])
    steps = dict(lightning_steps=options.pop("lightning_steps", False))
    (engine, imix_model), imix_log = run(lambda cfg: _hooks_and_model(train(cfg, **steps)), config(imix_dir, **options))
    (hooks, model), lightning_log = run(lambda cfg: _hooks_and_model(fit(cfg, **steps)[0]),
                                        config(lightning_dir, **options))
    ref, mine = recorder(engine), recorder(hooks)

    assert [type(h) for h in hooks] == [type(h) for h in engine if type(h).__name__ != "LightningStep"]
    assert mine.events == ref.events  # mount points, iter / inner_iter / epoch, limits, the log buffer's counters
    assert mine.scalars == ref.scalars  # what each iteration put in the log buffer
    assert mine.lrs == ref.lrs
    assert mine.history == ref.history
    assert_same(model.state_dict(), imix_model.state_dict(), "weights")
    imix_files, lightning_files = checkpoints(imix_dir), checkpoints(lightning_dir)
    assert list(lightning_files) == list(imix_files)
    assert_same(lightning_files, imix_files)
    assert status_rows(lightning_dir) == status_rows(imix_dir)
    assert tensorboard(lightning_dir) == tensorboard(imix_dir) and "total_loss" in tensorboard(imix_dir)
    if case == "by_epoch-custom_hooks":
        assert_same(model.ema, imix_model.ema, "ema")
        assert ("imix.engine.hooks.text_logger_hook", "after_train:hi") in imix_log
    assert lightning_log == imix_log


def test_resume_continues_as_imix_resumes_from_its_checkpoint_hook_files(tmp_path):
    """iMIX trains one epoch, then resumes from CheckPointHook's file (Organizer.resume_or_load: model, optimizer,
    scheduler, start_iter / start_epoch) for the second; Lightning trains one epoch, then resumes from its own
    checkpoint. And iMIX resumes from the file CheckPointHook wrote under Lightning just as from its own."""
    first = "TinyNet_TinyData_epoch0(6iters)_model.pth"
    train(config(tmp_path / "imix-1", total_epochs=1))
    engine = train(config(tmp_path / "imix-2", resume_from=str(tmp_path / "imix-1" / first)))
    last = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    fit(config(tmp_path / "lightning-1", total_epochs=1), callbacks=[last], enable_checkpointing=True)
    organizer = fit(config(tmp_path / "lightning-2"), ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))[0]
    crossed = train(config(tmp_path / "imix-from-lightning", resume_from=str(tmp_path / "lightning-1" / first)))

    ref = recorder(engine._hooks)
    assert ref.events[0][:5] == ("before_train", 6, None, None, 6)  # resumed at iteration 6, epoch 1
    for hooks, model, work_dir in [(organizer.hooks, organizer.model, "lightning-2"),
                                   (crossed._hooks, crossed.model, "imix-from-lightning")]:  # fmt: skip
        mine = recorder(hooks)
        assert (mine.events, mine.scalars, mine.lrs, mine.history) == (ref.events, ref.scalars, ref.lrs, ref.history)
        assert_same(model.state_dict(), engine.model.state_dict(), "weights")
        assert_same(checkpoints(tmp_path / work_dir), checkpoints(tmp_path / "imix-2"))


EVALUATION_CASES = {
    "by_epoch": dict(EVALUATION),
    # every iteration: CheckPointHook must save every iteration (see CASES), and the Organizer makes eval_iter_period
    # divide checkpoint_config.iter_period
    "by_iter": dict(EVALUATION, by_iter=True, max_iter=6, eval_iter_period=1, checkpoint_config=dict(iter_period=1)),
}


@pytest.mark.parametrize("case", EVALUATION_CASES)
def test_evaluation_runs_as_under_imix_engine(tmp_path, case):
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


def test_levels_order_hooks_as_imix_add_custom_hooks(tmp_path):
    """The adapter orders the Organizer's hooks plus ``cfg.custom_hooks`` (built by compat.build_custom_hooks) as
    iMIX's add_custom_hooks inserts them (for levels it does not crash on: none below every hook)."""

    def custom():
        return [dict(type="TextLoggerHook", text=text, level=level) for text, level in
                [("low", PriorityStatus.LOW), ("high", 20), ("normal", PriorityStatus.NORMAL), ("lower", 50),
                 ("high2", PriorityStatus.HIGH)]]  # fmt: skip

    organizer = organize(config(tmp_path, custom_hooks=custom()))
    built = organize(config(tmp_path, custom_hooks=[]))
    adapter = IMIXAdapter(built.hooks + compat.build_custom_hooks(custom()))
    names = [[getattr(h, "text", type(h).__name__) for h in hooks] for hooks in (adapter.hooks, organizer.hooks)]
    assert names[0] == names[1]
    assert names[1] == ["OptimizerHook", "LRSchedulerHook", "high", "high2", "IterationTimerHook", "PeriodicLogger",
                        "CheckPointHook", "normal", "low", "lower"]  # fmt: skip
