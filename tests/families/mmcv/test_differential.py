"""mmcv 1.x hooks under MMCVAdapter against mmcv's own EpochBasedRunner / IterBasedRunner: event stream, counters,
mode, loader length, LR and momentum at every mount point, weights, checkpoint files and log files."""

from __future__ import annotations

import json
import os
import types

import pytest
import torch
from mmcv_testkit import (
    TIMESTAMP,
    Recorder,
    ToyModel,
    assert_same_weights,
    loader,
    mmcv_runner,
    quiet_logger,
    run_lightning,
    run_mmcv,
    sgd,
    weights,
)

from lightning_hooks import MMCVAdapter

R = mmcv_runner


def adam(params):
    return torch.optim.Adam(params, lr=0.01, betas=(0.9, 0.999))


def both(make_hooks, tmp_path, *, runner="EpochBasedRunner", limit=2, val=False, optimizer=None, lightning_hooks=None,
         meta=None, **adapter_options):  # fmt: skip
    """Run ``make_hooks()`` through mmcv and ``(lightning_hooks or make_hooks)()`` through Lightning; return both
    recorders' streams, the two runs and their work dirs."""
    extra = {} if optimizer is None else {"optimizer": optimizer}
    ref_hooks, our_hooks = make_hooks(), (lightning_hooks or make_hooks)()
    limits = dict(max_epochs=limit) if runner == "EpochBasedRunner" else dict(max_epochs=None, max_iters=limit)
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", runner=runner, val=val, meta=meta, **limits, **extra)
    key = "max_epochs" if runner == "EpochBasedRunner" else "max_iters"
    adapter = MMCVAdapter(our_hooks, runner={"type": runner, key: limit}, work_dir=tmp_path / "lightning",
                          meta=None if meta is None else dict(meta), **adapter_options)  # fmt: skip
    trainer = run_lightning(adapter, tmp_path / "lightning", val=val, **extra)
    streams = [next(h for h in hooks if isinstance(h, Recorder)).seen for hooks in (ref_hooks, our_hooks)]
    return streams, real, trainer


def test_epoch_based_stream_lr_momentum_and_weights_match_runner(tmp_path):
    def hooks():
        return [R.CosineAnnealingLrUpdaterHook(min_lr=0.001, by_epoch=False, warmup="linear", warmup_iters=3),
                R.CosineAnnealingMomentumUpdaterHook(min_momentum=0.5, by_epoch=False),
                R.OptimizerHook(grad_clip=dict(max_norm=0.5)), Recorder()]  # fmt: skip

    (ref, ours), real, trainer = both(hooks, tmp_path, limit=3, val=True)
    assert ours == ref
    assert len(ref) == 1 + 3 * (2 + 2 * 5 + 2 + 2 * 2) + 1
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))


def test_step_lr_by_epoch_with_adam_betas_as_momentum_matches_runner(tmp_path):
    def hooks():
        return [R.StepLrUpdaterHook(step=[1, 2], gamma=0.5, warmup="exp", warmup_iters=4, warmup_ratio=0.1),
                R.OptimizerHook(), Recorder()]  # fmt: skip

    (ref, ours), real, trainer = both(hooks, tmp_path, limit=3, optimizer=adam)
    assert ours == ref
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))


def test_lightning_owned_step_matches_runner_with_optimizer_hook(tmp_path):
    """Without an OptimizerHook Lightning steps (automatic optimisation); the updaters still set LR and momentum
    before each step, as mmcv's runner with OptimizerHook does."""
    def hooks():
        return [R.CyclicLrUpdaterHook(by_epoch=False, target_ratio=(10, 1e-4), cyclic_times=1),
                R.CyclicMomentumUpdaterHook(by_epoch=False, target_ratio=(0.85 / 0.95, 1), cyclic_times=1),
                R.OptimizerHook(), Recorder()]  # fmt: skip

    def without_optimizer_hook():
        return [h for h in hooks() if not isinstance(h, R.OptimizerHook)]

    (ref, ours), real, trainer = both(hooks, tmp_path, lightning_hooks=without_optimizer_hook)
    assert ours == ref
    assert trainer.lightning_module.automatic_optimization
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))


def test_iter_based_stream_checkpoints_and_weights_match_runner(tmp_path):
    def hooks():
        return [R.PolyLrUpdaterHook(by_epoch=False, power=2.0, warmup="constant", warmup_iters=2),
                R.OptimizerHook(), R.CheckpointHook(interval=3, by_epoch=False, max_keep_ckpts=2), Recorder()]  # fmt: skip

    (ref, ours), real, trainer = both(hooks, tmp_path, runner="IterBasedRunner", limit=12)
    assert ours == ref  # 12 iterations over a 5-batch loader: runner.epoch as IterLoader counts it
    assert [m for m, *_ in ours[:2]] == ["before_run", "before_epoch"] and ours[-2][0] == "after_epoch"
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
    files = sorted(os.listdir(tmp_path / "mmcv"))
    assert files == sorted(os.listdir(tmp_path / "lightning")) == ["iter_12.pth", "iter_9.pth", "latest.pth"]
    assert_same_checkpoints(tmp_path / "mmcv", tmp_path / "lightning", files)


def assert_same_checkpoints(ref_dir, our_dir, files):
    def meta(checkpoint, folder):  # CheckpointHook notes the path it wrote
        text = json.dumps({k: v for k, v in checkpoint["meta"].items() if k != "time"}, sort_keys=True)
        return text.replace(str(folder), "<dir>")

    for name in files:
        ref, ours = (torch.load(d / name, map_location="cpu", weights_only=False) for d in (ref_dir, our_dir))
        assert sorted(ours) == sorted(ref) == ["meta", "optimizer", "state_dict"], name
        assert_same_weights(ref["state_dict"], ours["state_dict"])
        assert meta(ours, our_dir) == meta(ref, ref_dir)
        assert ours["optimizer"]["param_groups"] == ref["optimizer"]["param_groups"]
        for key, state in ref["optimizer"]["state"].items():
            torch.testing.assert_close(ours["optimizer"]["state"][key], state)
    assert os.readlink(our_dir / "latest.pth") == os.readlink(ref_dir / "latest.pth")


def test_checkpoint_hook_files_meta_and_out_dir_match_runner(tmp_path):
    def hooks():
        return [R.OptimizerHook(), R.CheckpointHook(interval=1, max_keep_ckpts=2, out_dir=str(tmp_path / "out")),
                Recorder()]  # fmt: skip

    ref_hooks = hooks()
    run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=3, meta=dict(exp_name="toy"))
    our_hooks = hooks()
    adapter = MMCVAdapter(our_hooks, runner=dict(type="EpochBasedRunner", max_epochs=3), work_dir=tmp_path / "lightning",
                          meta=dict(exp_name="toy"))  # fmt: skip
    run_lightning(adapter, tmp_path / "lightning")
    # CheckpointHook(out_dir=...) writes under out_dir/<basename of work_dir>
    ref_dir, our_dir = tmp_path / "out" / "mmcv", tmp_path / "out" / "lightning"
    files = sorted(os.listdir(ref_dir))
    assert files == sorted(os.listdir(our_dir)) == ["epoch_2.pth", "epoch_3.pth", "latest.pth"]
    assert_same_checkpoints(ref_dir, our_dir, files)
    assert adapter.runner.meta["hook_msgs"]["last_ckpt"] == str(our_dir / "epoch_3.pth")
    # mmcv's own loaders read the files: load_checkpoint into a model, runner.resume into a runner
    model = type(adapter.runner.model)()
    checkpoint = R.load_checkpoint(model, str(our_dir / "latest.pth"))
    assert_same_weights(weights(model), weights(adapter.runner.model))
    assert checkpoint["meta"]["epoch"] == 3 and checkpoint["meta"]["iter"] == 15
    runner = R.EpochBasedRunner(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                work_dir=str(tmp_path / "resumed"), logger=adapter.runner.logger, max_epochs=4)  # fmt: skip
    runner.resume(str(our_dir / "epoch_3.pth"), map_location="cpu")
    assert (runner.epoch, runner.iter) == (3, 15)
    assert runner.meta["exp_name"] == "toy"


class Killed(Exception):
    """Stands for the SIGKILL that ends a run while CheckpointHook writes its file (:func:`_killed_in_write`)."""


def _killed_in_write(monkeypatch, killed_in):
    """mmcv's file writer (``HardDiskBackend.put``, which ``save_checkpoint`` hands the serialised checkpoint) writes
    half of the ``killed_in``-th file it is given, then the run ends (:class:`Killed`). Returns the paths it was given
    (clear it for the next run)."""
    from mmcv.fileio.file_client import HardDiskBackend

    written = []
    put = HardDiskBackend.put

    def put_until_killed(self, obj, filepath):
        written.append(filepath)
        if len(written) < killed_in:
            return put(self, obj, filepath)
        with open(filepath, "wb") as f:
            f.write(obj[: len(obj) // 2])
        raise Killed(filepath)

    monkeypatch.setattr(HardDiskBackend, "put", put_until_killed)
    return written


def _killed_on_both_sides(tmp_path, monkeypatch, killed_in):
    """The same toy run under ``EpochBasedRunner`` (``tmp_path/mmcv``) and under ``MMCVAdapter``
    (``tmp_path/lightning``), each killed in its ``killed_in``-th checkpoint write (:func:`_killed_in_write`),
    ``epoch_{killed_in}.pth`` half written, the same size on both sides."""

    def hooks():
        return [R.OptimizerHook(), R.CheckpointHook(interval=1)]

    written = _killed_in_write(monkeypatch, killed_in)
    for side in ("mmcv", "lightning"):
        written.clear()
        with pytest.raises(Killed):
            if side == "mmcv":
                run_mmcv(hooks(), tmp_path / side, max_epochs=3)
            else:
                adapter = MMCVAdapter(hooks(), runner=dict(type="EpochBasedRunner", max_epochs=3),
                                      work_dir=tmp_path / side)  # fmt: skip
                run_lightning(adapter, tmp_path / side)
        assert written == [str(tmp_path / side / f"epoch_{n}.pth") for n in range(1, killed_in + 1)]
    sizes = [(tmp_path / side / f"epoch_{killed_in}.pth").stat().st_size for side in ("mmcv", "lightning")]
    assert sizes[0] == sizes[1]


def test_a_run_killed_while_writing_a_checkpoint_leaves_what_mmcvs_runner_leaves(tmp_path, monkeypatch):
    """Killed inside CheckpointHook's second write (epoch_2.pth half written): the same files under both runners,
    ``latest.pth`` still the link to epoch_1.pth, which is what ``--auto-resume`` picks (mmdet's / mmseg's
    ``find_latest_checkpoint``; ``tools_train.latest_checkpoint`` for mmcls); mmcv links a checkpoint once it is
    written whole."""
    from lightning_hooks.families.mmcv.tools_train import latest_checkpoint

    _killed_on_both_sides(tmp_path, monkeypatch, killed_in=2)
    files = [sorted(os.listdir(tmp_path / side)) for side in ("mmcv", "lightning")]
    assert files[0] == files[1] == ["epoch_1.pth", "epoch_2.pth", "latest.pth"]
    for side in ("mmcv", "lightning"):
        assert os.readlink(tmp_path / side / "latest.pth") == "epoch_1.pth"
        assert latest_checkpoint(str(tmp_path / side)) == str(tmp_path / side / "latest.pth")
    assert (tmp_path / "mmcv" / "epoch_2.pth").stat().st_size < (tmp_path / "mmcv" / "epoch_1.pth").stat().st_size
    assert_same_checkpoints(tmp_path / "mmcv", tmp_path / "lightning", ["epoch_1.pth"])


def test_a_run_killed_while_writing_its_first_checkpoint_is_not_resumed_from_it(tmp_path, monkeypatch):
    """Killed inside CheckpointHook's first write: epoch_1.pth half written and no ``latest.pth`` under both runners.
    ``--auto-resume`` then picks that file on both sides (mmdet's ``find_latest_checkpoint``, as mmseg's; the
    command's ``tools_train.latest_checkpoint`` for mmcls), which mmcv's ``runner.resume`` fails to load (torch's
    error) and the command's runner (the one the libraries' training APIs get) refuses, naming the file and the way
    out: without the file, neither finds a checkpoint, and the run starts afresh."""
    from mmdet.utils import find_latest_checkpoint

    from lightning_hooks.core.errors import CheckpointFileError
    from lightning_hooks.families.mmcv.lightning_runner import LightningRunner
    from lightning_hooks.families.mmcv.tools_train import latest_checkpoint

    _killed_on_both_sides(tmp_path, monkeypatch, killed_in=1)
    picks = []
    for side in ("mmcv", "lightning"):
        assert os.listdir(tmp_path / side) == ["epoch_1.pth"]
        assert find_latest_checkpoint(str(tmp_path / side)) == latest_checkpoint(str(tmp_path / side))
        picks.append(latest_checkpoint(str(tmp_path / side)))
    assert picks == [str(tmp_path / side / "epoch_1.pth") for side in ("mmcv", "lightning")]
    model = ToyModel()
    host = R.EpochBasedRunner(model, optimizer=sgd(model.parameters()), work_dir=str(tmp_path / "mmcv"),
                              logger=quiet_logger("mmcv-reference"), max_epochs=3)  # fmt: skip
    with pytest.raises(RuntimeError, match="failed finding central directory"):
        host.resume(picks[0])
    ours = LightningRunner(dict(type="EpochBasedRunner", max_epochs=3), model, sgd(model.parameters()),
                           str(tmp_path / "lightning"), quiet_logger("mmcv-reference"))  # fmt: skip
    with pytest.raises(CheckpointFileError, match=r"truncated.*delete it to start afresh") as refused:
        ours.resume(picks[1])
    assert picks[1] in str(refused.value)
    for side, pick in zip(("mmcv", "lightning"), picks, strict=True):
        os.remove(pick)
        assert find_latest_checkpoint(str(tmp_path / side)) is latest_checkpoint(str(tmp_path / side)) is None


def _log_lines(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in line.items() if k not in ("time", "data_time", "eta", "memory")} for line in lines]


def test_text_logger_timer_and_tensorboard_files_match_runner(tmp_path):
    def hooks():
        return [R.StepLrUpdaterHook(step=[1]), R.OptimizerHook(), R.IterTimerHook(),
                R.TextLoggerHook(interval=2), R.TensorboardLoggerHook(interval=2), Recorder()]  # fmt: skip

    ref_hooks, our_hooks = hooks(), hooks()
    for hook, priority in zip(ref_hooks, ("VERY_HIGH", "ABOVE_NORMAL", "LOW", "VERY_LOW", "VERY_LOW", "LOWEST")):
        hook.priority = priority
    run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=2, val=True, meta=dict(exp_name="toy"))
    adapter = MMCVAdapter(our_hooks, runner=dict(type="EpochBasedRunner", max_epochs=2), work_dir=tmp_path / "lightning",
                          meta=dict(exp_name="toy"))  # fmt: skip
    run_lightning(adapter, tmp_path / "lightning", val=True)
    name = f"{TIMESTAMP}.log.json"
    ref, ours = _log_lines(tmp_path / "mmcv" / name), _log_lines(tmp_path / "lightning" / name)
    assert ours == ref
    assert [line.get("mode") for line in ours] == [None, "train", "train", "val", "train", "train", "val"]
    assert sorted(os.listdir(tmp_path / "lightning" / "tf_logs")) and sorted(os.listdir(tmp_path / "mmcv" / "tf_logs"))
    assert _scalars(tmp_path / "lightning" / "tf_logs") == _scalars(tmp_path / "mmcv" / "tf_logs")


def _scalars(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    tags = [t for t in events.Tags()["scalars"] if "time" not in t]
    return {t: [(e.step, round(e.value, 6)) for e in events.Scalars(t)] for t in sorted(tags)}


def test_ema_hook_weights_and_buffers_match_runner(tmp_path):
    def hooks():
        return [R.OptimizerHook(), R.EMAHook(momentum=0.1, interval=2, warm_up=3), Recorder()]

    (ref, ours), real, trainer = both(hooks, tmp_path, limit=2)
    assert ours == ref
    ema = weights(trainer.lightning_module.model)
    assert any(k.startswith("ema_") for k in ema)
    assert_same_weights(weights(real.model), ema)


@pytest.mark.parametrize("hook", ["GradientCumulativeOptimizerHook", "Fp16OptimizerHook",
                                  "GradientCumulativeFp16OptimizerHook"])  # fmt: skip
def test_step_owning_optimizer_hooks_match_runner(hook, tmp_path):
    """Accumulation over 3 iterations of 5-batch epochs (a remainder at the end), and the fp16 hooks' loss scaling as
    far as it goes on a CPU (torch's GradScaler is disabled there: scale 1)."""
    options = {"GradientCumulativeOptimizerHook": dict(cumulative_iters=3, grad_clip=dict(max_norm=0.3)),
               "Fp16OptimizerHook": dict(loss_scale=512.0, grad_clip=dict(max_norm=0.3)),
               "GradientCumulativeFp16OptimizerHook": dict(cumulative_iters=3, loss_scale="dynamic")}[hook]  # fmt: skip

    def hooks():
        with pytest.warns(UserWarning) if "Fp16" in hook else _nothing():
            return [R.StepLrUpdaterHook(step=[1]), getattr(R, hook)(**options), Recorder()]

    (ref, ours), real, trainer = both(hooks, tmp_path, limit=2, meta={})  # the fp16 hooks keep their scaler in meta
    assert ours == ref
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
    if "Fp16" in hook:
        assert trainer.callbacks[0].runner.meta["fp16"]["loss_scaler"] == real.meta["fp16"]["loss_scaler"]
    steps = 2 * 2 if "Cumulative" in hook else 2 * 5  # an update per 3 iterations, and at each epoch's end
    assert trainer.global_step == steps


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_detect_anomalous_params_names_parameters_outside_the_graph(tmp_path, caplog):
    class WithUnused(ToyModel):
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Linear(4, 1)

    adapter = MMCVAdapter([R.OptimizerHook(detect_anomalous_params=True)], runner=dict(type="EpochBasedRunner", max_epochs=1))
    with caplog.at_level("ERROR", logger="mmcv"):
        run_lightning(adapter, tmp_path, model=WithUnused)
    reported = [r.getMessage() for r in caplog.records if "computational graph" in r.getMessage()]
    assert len(reported) == 2 * 5 and all(m.startswith("unused.") for m in reported)


def test_loader_epoch_seed_and_cache_hooks_run(tmp_path):
    calls = []

    def hooks():
        return [R.OptimizerHook(), R.DistSamplerSeedHook(), R.HOOKS.get("EmptyCacheHook")(after_epoch=True),
                R.ClosureHook("after_train_epoch", lambda runner: calls.append(runner.epoch)), Recorder()]  # fmt: skip

    (ref, ours), *_ = both(hooks, tmp_path, limit=2)
    assert ours == ref
    assert calls == [0, 1, 0, 1]  # mmcv's run, then ours


def test_batches_fed_to_the_model_are_the_runners(tmp_path):
    class Batches(R.Hook):
        def __init__(self):
            self.seen = []

        def before_train_iter(self, runner):
            self.seen.append(runner.data_batch[0].sum().item())

    def hooks():
        return [R.OptimizerHook(), Batches(), Recorder()]

    ref_hooks, our_hooks = hooks(), hooks()
    run_mmcv(ref_hooks, tmp_path / "a", max_epochs=1)
    run_lightning(MMCVAdapter(our_hooks, runner=dict(type="EpochBasedRunner", max_epochs=1)), tmp_path / "b")
    assert our_hooks[1].seen == ref_hooks[1].seen == [b[0].sum().item() for b in loader()]


def test_a_runner_attribute_the_facade_lacks_names_the_hook_the_attribute_and_the_way_out(tmp_path):
    class NeedsWorkflow(R.Hook):
        def before_train_epoch(self, runner):
            runner.workflow

    adapter = MMCVAdapter([R.OptimizerHook(), NeedsWorkflow()], runner=dict(type="EpochBasedRunner", max_epochs=1))
    with pytest.raises(AttributeError, match=r"runner facade has no attribute 'workflow'.*adapter\.runner\.workflow = ") as err:
        run_lightning(adapter, tmp_path)
    assert "NeedsWorkflow in mount point 'before_train_epoch'" in "".join(err.value.__notes__)
    assert "It provides: call_hook, current_lr, current_momentum, data_batch, data_loader, epoch" in str(err.value)
    with pytest.raises(AttributeError, match="'resume' is not available: Lightning restores the training state"):
        adapter.runner.resume("latest.pth")


def test_profiler_and_sync_buffers_hooks_match_runner(tmp_path):
    """ProfilerHook profiles the first iterations with torch.profiler and writes its trace (json_trace_path);
    SyncBuffersHook does nothing on one process, as under mmcv."""

    def hooks(folder):
        return [R.OptimizerHook(), R.HOOKS.get("SyncBuffersHook")(), Recorder(),
                R.HOOKS.get("ProfilerHook")(by_epoch=False, profile_iters=2, activities=["cpu"],
                               json_trace_path=str(tmp_path / f"{folder}.json"))]  # fmt: skip

    ref_hooks, our_hooks = hooks("mmcv"), hooks("lightning")
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=1)
    trainer = run_lightning(MMCVAdapter(our_hooks, runner=dict(type="EpochBasedRunner", max_epochs=1)), tmp_path / "b")
    assert our_hooks[2].seen == ref_hooks[2].seen
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
    traces = [json.loads((tmp_path / f"{f}.json").read_text()) for f in ("mmcv", "lightning")]
    losses = [sum(e.get("name") == "aten::mse_loss" for e in t["traceEvents"]) for t in traces]
    assert losses[0] == losses[1] > 0  # the profiled iterations' forward passes


class ShiftedSamples(torch.utils.data.Dataset):
    """Samples ``(x + 10, y)``, or ``(x, y)`` once ``"Shift"`` is among the transforms left out
    (``update_skip_type_keys``, the method of mmdet 2.x's ``MultiImageMixDataset`` that ``YOLOXModeSwitchHook`` calls)."""

    def __init__(self, x, y):
        self.x, self.y, self.skip_type_keys = x, y, ()

    def update_skip_type_keys(self, skip_type_keys):
        self.skip_type_keys = tuple(skip_type_keys)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + (0 if "Shift" in self.skip_type_keys else 10), self.y[i]


def _persistent_workers(n_batches, seed=1, batch_size=4):
    """:func:`mmcv_testkit.loader`'s samples as :class:`ShiftedSamples`, through 2 persistent loader workers."""
    x, y = loader(n_batches, seed, batch_size).dataset.tensors
    return torch.utils.data.DataLoader(ShiftedSamples(x, y), batch_size=batch_size, num_workers=2,
                                       persistent_workers=True)  # fmt: skip  # arguments aligned under the call


class DetectorToy(ToyModel):
    """ToyModel with the ``bbox_head.use_l1`` switch that ``YOLOXModeSwitchHook`` turns on."""

    def __init__(self):
        super().__init__()
        self.bbox_head = types.SimpleNamespace(use_l1=False)


class BatchSums(R.Hook):
    """Notes each train iteration's epoch and the sum of its batch's inputs."""

    def __init__(self):
        self.seen = []

    def after_train_iter(self, runner):
        self.seen.append((runner.epoch, round(float(runner.data_batch[0].sum()), 3)))


def test_yolox_mode_switch_hook_restarts_persistent_loader_workers_as_under_mmcvs_runner(tmp_path, monkeypatch):
    """mmdet 2.x's ``YOLOXModeSwitchHook`` switches the dataset's transforms off for the last epochs and, as the
    loader's workers are persistent, restarts them (``runner.data_loader._iterator = None``): under Lightning the
    write reaches the loader, so the last epoch's batches come from new workers with the switched dataset, as under
    mmcv's ``EpochBasedRunner``."""
    pytest.importorskip("mmdet", reason="mmdet 2.x lives in .venv-mmcv1")
    import mmcv_testkit

    [mmdet_hooks] = mmcv_testkit.import_with_stubbed_ops("mmdet.core.hook")  # mmdet.core imports mmcv's compiled ops

    monkeypatch.setattr(mmcv_testkit, "loader", _persistent_workers)  # run_mmcv's and run_lightning's loaders
    monkeypatch.setattr(mmcv_testkit, "ToyModel", DetectorToy)  # run_mmcv's model

    def hooks():
        return [mmdet_hooks.YOLOXModeSwitchHook(num_last_epochs=1, skip_type_keys=("Shift",)), R.OptimizerHook(),
                BatchSums()]  # fmt: skip

    ref_hooks, our_hooks = hooks(), hooks()
    real = run_mmcv(ref_hooks, tmp_path / "mmcv", max_epochs=3)
    adapter = MMCVAdapter(our_hooks, runner={"type": "EpochBasedRunner", "max_epochs": 3}, work_dir=tmp_path / "ours")
    trainer = run_lightning(adapter, tmp_path / "ours", model=DetectorToy)
    ref, ours = ref_hooks[-1].seen, our_hooks[-1].seen
    assert ours == ref
    assert ref[0][1] != ref[-1][1] and real.model.bbox_head.use_l1  # the last epochs' batches are not shifted
    assert trainer.lightning_module.model.bbox_head.use_l1
    assert_same_weights(weights(real.model), weights(trainer.lightning_module.model))
