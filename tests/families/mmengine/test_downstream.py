"""Engine hooks of mmdet 3.3, mmpretrain 1.2 and mmsegmentation 1.2 under Lightning + MMEngineAdapter, each against
the real MMEngine ``Runner`` with the same model, data, seed and hooks (harness: downstream_kit.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import lightning.pytorch as pl
import torch
import torch.distributed as dist
from downstream_kit import (
    Images,
    LitWrapper,
    TinyArcFace,
    TinySwAV,
    Videos,
    loaders,
    log_of,
    make_model,
    run_both,
)
from mmdet.datasets.samplers import TrackImgSampler
from mmdet.engine.hooks import (
    CheckInvalidLossHook,
    GroundingVisualizationHook,
    MeanTeacherHook,
    MemoryProfilerHook,
    PipelineSwitchHook,
    SetEpochInfoHook,
    SyncNormHook,
    TrackVisualizationHook,
)
from mmengine.dist import get_rank, is_distributed
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmpretrain.engine.hooks import (
    DenseCLHook,
    EMAHook,
    PreciseBNHook,
    SetAdaptiveMarginsHook,
    SwAVHook,
    VisualizationHook,
    WarmupParamHook,
)
from torch.utils.data import DataLoader

from lightning_hooks.families.mmengine import MMEngineAdapter
from lh_testing import DDP_LAUNCH_VARIABLES, HELPERS, subprocess_env

ROOT = Path(__file__).resolve().parents[3]


def test_mmengine_downstream_precise_bn_hook_matches_runner(tmp_path):
    # isinstance(runner.train_loop, EpochBasedTrainLoop) decides whether PreciseBN runs at all
    pair = run_both(tmp_path, custom_hooks=[dict(type="mmpretrain.PreciseBNHook", num_samples=8, interval=1)])
    pair.assert_same(PreciseBNHook, log_lines=("Precise BN", "BN found"))


def test_mmengine_downstream_ema_hook_evaluate_on_origin_matches_runner(tmp_path):
    # after_val_epoch re-runs validation through runner.val_loop.run_iter and evaluates with val_loop.evaluator
    pair = run_both(tmp_path, custom_hooks=[dict(type="mmpretrain.EMAHook", momentum=0.2, evaluate_on_origin=True)])
    pair.assert_same(EMAHook)
    assert "val/tiny/accuracy_origin" in pair.adapter.runner.message_hub.log_scalars


def test_mmengine_downstream_pretrain_visualization_hook_matches_runner(tmp_path):
    # images named by epoch (EpochBasedTrainLoop), drawn by mmpretrain's UniversalVisualizer with the dataset classes
    options = dict(
        default_scope="mmpretrain",
        visualizer=dict(type="UniversalVisualizer", vis_backends=[dict(type="LocalVisBackend")]),
    )
    pair = run_both(tmp_path, custom_hooks=[dict(type="VisualizationHook", enable=True, interval=3)], **options)
    pair.assert_same(VisualizationHook)
    images = sorted(p.name for p in (tmp_path / "lt").rglob("*.png"))
    assert images and all(p.endswith(("_1.png", "_2.png")) for p in images)
    assert all(p.parent.parent.parent.name == pair.adapter.runner.timestamp for p in (tmp_path / "lt").rglob("*.png"))


#: (hook config, Runner/adapter options, log lines to compare): hooks whose effect needs no special data
SIMPLE = {
    "CheckInvalidLossHook": (dict(type="mmdet.CheckInvalidLossHook", interval=1), {}, ()),
    "SetEpochInfoHook": (dict(type="mmdet.SetEpochInfoHook"), {}, ()),
    "SyncNormHook": (dict(type="mmdet.SyncNormHook"), {}, ()),
    "MeanTeacherHook": (dict(type="mmdet.MeanTeacherHook", momentum=0.5), {}, ()),
    "NumClassCheckHook": (dict(type="mmdet.NumClassCheckHook"), {}, ()),
    "YOLOXModeSwitchHook": (dict(type="mmdet.YOLOXModeSwitchHook", num_last_epochs=1), {}, ("mosaic", "L1 loss")),
    "PipelineSwitchHook": (
        dict(type="PipelineSwitchHook", switch_epoch=1, switch_pipeline=[dict(type="HalveInputs")]),
        dict(default_scope="mmdet"),  # HalveInputs is in mmdet's TRANSFORMS only
        ("Switch pipeline",),
    ),
    "DenseCLHook": (dict(type="mmpretrain.DenseCLHook", start_iters=5), {}, ()),
    "WarmupParamHook": (
        dict(type="mmpretrain.WarmupParamHook", param_name="scale", module_name="head", warmup_epochs=1), {}, ()
    ),
    "ClassNumCheckHook": (dict(type="mmpretrain.ClassNumCheckHook"), {}, ()),
    "SimSiamHook": (  # fixes the lr of the param groups marked fix_lr (the classifier layer here)
        dict(type="mmpretrain.SimSiamHook", fix_pred_lr=True, lr=0.02, adjust_by_epoch=False),
        dict(paramwise_cfg=dict(custom_keys={"student.2": dict(fix_lr=True)})),
        (),
    ),
    "SwitchRecipeHook": (
        dict(type="SwitchRecipeHook", schedule=[dict(action_epoch=2, train_pipeline=[dict(type="ShiftInputs")])]),
        dict(default_scope="mmpretrain"),
        ("Switch train pipeline",),
    ),
}


@pytest.mark.parametrize("name", SIMPLE)
def test_mmengine_downstream_hook_matches_runner(tmp_path, name):
    config, options, log_lines = SIMPLE[name]
    pair = run_both(tmp_path, custom_hooks=[config], **options)
    (cls,) = {type(h) for h in pair.adapter.hooks if type(h).__name__ == name}
    pair.assert_same(cls, log_lines=log_lines)


#: IterBasedTrainLoop as mmseg and mmdet configs use it: 4 batches per pass, so the train loader restarts twice
ITER_CFG = dict(type="IterBasedTrainLoop", max_iters=10, val_interval=4)


@pytest.fixture
def no_restart_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts the train loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


@pytest.mark.parametrize("name", SIMPLE)
def test_mmengine_downstream_hook_iter_based_matches_runner(tmp_path, name, no_restart_sleep):
    # the same hooks under IterBasedTrainLoop: runner.epoch stays 0, batch_idx is the global iteration
    config, options, log_lines = SIMPLE[name]
    pair = run_both(tmp_path, custom_hooks=[config], train_cfg=ITER_CFG, **options)
    (cls,) = {type(h) for h in pair.adapter.hooks if type(h).__name__ == name}
    pair.assert_same(cls, log_lines=log_lines)


@pytest.mark.parametrize("hook", [
    dict(type="mmpretrain.PreciseBNHook", num_samples=8, interval=4),
    dict(type="mmpretrain.EMAHook", momentum=0.2, evaluate_on_origin=True),
])  # fmt: skip
def test_mmengine_downstream_pretrain_hooks_iter_based_match_runner(tmp_path, hook, no_restart_sleep):
    # PreciseBNHook takes its IterBasedTrainLoop branch (after_train_iter every `interval` iterations)
    pair = run_both(tmp_path, custom_hooks=[hook], train_cfg=ITER_CFG)
    (cls,) = {type(h) for h in pair.adapter.hooks if type(h).__name__ == hook["type"].split(".")[-1]}
    pair.assert_same(cls, log_lines=("Precise BN", "BN found"))


def test_mmengine_downstream_pretrain_visualization_hook_iter_based_names_images_by_iteration(tmp_path, no_restart_sleep):
    options = dict(
        default_scope="mmpretrain",
        visualizer=dict(type="UniversalVisualizer", vis_backends=[dict(type="LocalVisBackend")]),
    )
    pair = run_both(tmp_path, custom_hooks=[dict(type="VisualizationHook", enable=True, interval=3)],
                    train_cfg=ITER_CFG, **options)  # fmt: skip
    pair.assert_same(VisualizationHook)
    images = sorted(p.name for p in (tmp_path / "lt").rglob("*.png"))
    assert images and all(p.endswith(("_4.png", "_8.png", "_10.png")) for p in images)


#: SwAVHook as mmpretrain's SwAV configs use it, scaled to TinySwAV: 2 crops of 2 features, a queue of 2 batches,
#: the classifier layer frozen for the first 3 iterations
SWAV = dict(type="mmpretrain.SwAVHook", batch_size=4, crops_for_assign=[0, 1], feat_dim=2, queue_length=8,
            frozen_layers_cfg={"student.2": 3})  # fmt: skip


def queue_file(work_dir: Path) -> Path:
    """Where SwAVHook keeps its queue: ``queue{rank}.pth`` in a process group (an in-process DDP fit leaves one),
    else ``queue.pth``."""
    return work_dir / (f"queue{get_rank()}.pth" if is_distributed() else "queue.pth")


@pytest.mark.parametrize("train_cfg", [None, ITER_CFG], ids=["epoch", "iter"])
def test_mmengine_downstream_swav_hook_matches_runner(tmp_path, train_cfg, no_restart_sleep):
    # the queue starts at epoch_queue_starts (iteration-based: epoch 0, the only one), SwAVLoss fills it, the hook
    # hands it to the loss in before_train_epoch and saves it to work_dir in after_train_epoch
    hook = dict(SWAV, epoch_queue_starts=0 if train_cfg else 1)
    pair = run_both(tmp_path, custom_hooks=[hook], train_cfg=train_cfg, model=TinySwAV)
    pair.assert_same(SwAVHook)  # incl. the queue file and the queue the hook holds
    queue = torch.load(queue_file(pair.lt_dir))["queue"]
    assert queue.shape == (2, 8, 2) and bool(queue.norm(dim=-1).gt(0).all())  # every slot filled by the loss
    assert pair.module.model.head.loss_module.queue is pair.hook(SwAVHook)[1].queue


@pytest.mark.parametrize("train_cfg", [None, ITER_CFG], ids=["epoch", "iter"])
def test_mmengine_downstream_swav_hook_loads_the_queue_file_in_work_dir(tmp_path, train_cfg, no_restart_sleep):
    # before_run loads the queue file an earlier run left in work_dir: the loss draws on it from the first iteration
    queue = torch.nn.functional.normalize(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(3)), dim=-1)
    for work_dir in (tmp_path / "mm", tmp_path / "lt"):
        work_dir.mkdir()
        torch.save({"queue": queue}, queue_file(work_dir))
    pair = run_both(tmp_path, custom_hooks=[dict(SWAV, epoch_queue_starts=5)], train_cfg=train_cfg, model=TinySwAV)
    pair.assert_same(SwAVHook)
    for work_dir in (pair.mm_dir, pair.lt_dir):
        assert log_of(work_dir, ("Load queue",)) == [f"INFO - Load queue from file: {queue_file(work_dir)}"]
    assert pair.module.model.head.loss_module.use_queue  # the loaded queue was used


@pytest.mark.parametrize("train_cfg", [None, ITER_CFG], ids=["epoch", "iter"])
def test_mmengine_downstream_set_adaptive_margins_hook_matches_runner(tmp_path, train_cfg, no_restart_sleep):
    # before_train sets the ArcFaceClsHead's margins from the train set's class counts (10 cats, 6 dogs): the rarer
    # class gets margin_max; the margins shape the training logits, so the weights differ if they do
    hook = dict(type="mmpretrain.SetAdaptiveMarginsHook", margin_min=0.05, margin_max=0.4)
    pair = run_both(tmp_path, custom_hooks=[hook], train_cfg=train_cfg, model=TinyArcFace)
    pair.assert_same(SetAdaptiveMarginsHook)  # incl. the head's margins
    assert pair.module.model.head.margins.tolist() == pytest.approx([0.05, 0.4])


def memory_log(work_dir: Path) -> list[str]:
    """The run log's MemoryProfilerHook lines (figures as N) among the LoggerHook lines that name the iteration."""
    lines = log_of(work_dir, ("Memory information", "(train)", "(val)"))
    return [re.sub(r"\d+(\.\d+)?", "N", line) if "Memory" in line else line.split("  ")[0] for line in lines]


@pytest.mark.parametrize("train_cfg", [None, ITER_CFG], ids=["epoch", "iter"])
def test_mmengine_downstream_memory_profiler_hook_logs_at_the_runners_iterations(tmp_path, train_cfg, no_restart_sleep):
    # every 2nd train and val iteration (batch_idx), a line of memory figures: the figures differ run to run, the
    # lines and where they fall among LoggerHook's per-iteration lines do not
    logger = dict(logger=dict(type="LoggerHook", interval=1))
    hook = dict(type="mmdet.MemoryProfilerHook", interval=2)
    pair = run_both(tmp_path, custom_hooks=[hook], default_hooks=logger, train_cfg=train_cfg)
    pair.assert_same(MemoryProfilerHook)
    mm_log, lt_log = memory_log(pair.mm_dir), memory_log(pair.lt_dir)
    assert lt_log == mm_log
    assert sum("Memory information" in line for line in lt_log) == (2 * (2 + 1) if train_cfg is None else 5 + 3)


@HOOKS.register_module(force=True)
class SwapTrainLoaderHook(Hook):
    """Assigns ``runner.train_loop.dataloader`` as mmpose's ``YOLOXPoseModeSwitchHook`` and mmagic's
    ``PGGANFetchDataHook`` do, in ``before_train_epoch`` or ``after_train_epoch`` of ``epoch``; records the size of
    ``runner.train_dataloader``'s dataset at every iteration."""

    def __init__(self, epoch: int, mount: str) -> None:
        self.epoch, self.mount = epoch, mount
        self.seen: list[tuple[int, int]] = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        # torch's generator too: each loader iterator made draws its base seed from it
        self.seen.append((runner.epoch, len(runner.train_dataloader.dataset), hash(torch.get_rng_state().numpy().tobytes())))

    def _swap(self, runner, mount: str) -> None:
        if mount == self.mount and runner.epoch == self.epoch:
            # built like the current one, as YOLOXPoseModeSwitchHook copies the loader's settings
            runner.train_loop.dataloader = DataLoader(Images(24, 3), batch_size=runner.train_loop.dataloader.batch_size)

    def before_train_epoch(self, runner) -> None:
        self._swap(runner, "before_train_epoch")

    def after_train_epoch(self, runner) -> None:
        self._swap(runner, "after_train_epoch")


@pytest.mark.parametrize("epoch, mount", [(0, "before_train_epoch"), (1, "before_train_epoch"), (0, "after_train_epoch")])
def test_mmengine_downstream_train_dataloader_assignment_takes_effect_where_the_runner_applies_it(tmp_path, epoch, mount):
    # before_train_epoch: that epoch trains on the new loader; after_train_epoch: the next epoch does
    pair = run_both(tmp_path, custom_hooks=[dict(type="SwapTrainLoaderHook", epoch=epoch, mount=mount)],
                    train_cfg=dict(by_epoch=True, max_epochs=3, val_interval=1))
    pair.assert_same()
    mm_hook, lt_hook = pair.hook(SwapTrainLoaderHook)
    assert lt_hook.seen == mm_hook.seen  # hooks read the new loader from the iteration the Runner trains on it
    assert (epoch + (mount == "after_train_epoch"), 24) in [seen[:2] for seen in lt_hook.seen]  # 16 images, then 24
    assert pair.adapter.runner.train_dataloader.dataset.images.shape == (24, 3, 4, 4)
    assert pair.trainer.train_dataloader.dataset is pair.adapter.runner.train_loop.dataloader.dataset


@HOOKS.register_module(force=True)
class ValDrawHook(Hook):
    """Draws from torch's generator in ``before_val_epoch`` (as a hook sampling what it will show); records the
    generator's state at each validation mount point up to the first batch. Each loader iterator made draws its base
    seed from that generator: the state at ``before_val_iter`` tells whether the validation's iterator was made after
    ``before_val_epoch``, as ``ValLoop.run`` makes it, or before ``before_val``."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int]] = []

    def _record(self, runner, mount: str) -> None:
        self.seen.append((mount, runner.epoch, hash(torch.get_rng_state().numpy().tobytes())))

    def before_val(self, runner) -> None:
        self._record(runner, "before_val")

    def before_val_epoch(self, runner) -> None:
        self._record(runner, "before_val_epoch")
        torch.rand(1)

    def before_val_iter(self, runner, batch_idx, data_batch=None) -> None:
        if batch_idx == 0:
            self._record(runner, "before_val_iter")


def test_mmengine_each_validations_iterator_is_made_after_before_val_epoch_as_the_val_loop_makes_it(tmp_path):
    pair = run_both(tmp_path, custom_hooks=[dict(type="ValDrawHook")])
    pair.assert_same()
    mm_hook, lt_hook = pair.hook(ValDrawHook)
    assert [seen[:2] for seen in mm_hook.seen] == [(m, e) for e in (1, 2) for m in ("before_val", "before_val_epoch",
                                                                                     "before_val_iter")]  # fmt: skip
    assert lt_hook.seen == mm_hook.seen


@pytest.mark.parametrize(
    "task, hook, scope, visualizer",
    [
        ("det", dict(type="DetVisualizationHook", draw=True, interval=1), "mmdet", "DetLocalVisualizer"),
        ("seg", dict(type="SegVisualizationHook", draw=True, interval=1), "mmseg", "SegLocalVisualizer"),
    ],
)
def test_mmengine_downstream_det_seg_visualization_hooks_draw_the_runners_pixels(tmp_path, task, hook, scope, visualizer):
    # the visualizer gets the val dataset's classes and palette, as MMEngine's loops hand it, and writes under
    # {work_dir}/{timestamp}/vis_data/
    options = dict(default_scope=scope, visualizer=dict(type=visualizer, vis_backends=[dict(type="LocalVisBackend")]))
    pair = run_both(tmp_path, custom_hooks=[hook], task=task, **options)
    pair.assert_same()
    images = list((tmp_path / "lt" / pair.adapter.runner.timestamp / "vis_data" / "vis_image").glob("*.png"))
    assert len(images) == 2 * 2 * (1 if task == "det" else 4)  # 2 epochs x 2 val batches (x 4 samples for seg)
    assert pair.adapter.runner.visualizer.dataset_meta["classes"] == ("cat", "dog")


#: one fresh process for both visualizer tests below: ``build_hooks`` first, which must fail and leave no Visualizer
#: (so the process is still one where none exists), then ``from_config``
_FRESH_VISUALIZER_CODE = """
from openmmlab_stubs import import_openmmlab; import_openmmlab(['mmseg'])
from mmengine.visualization import Visualizer
from lightning_hooks.families.mmengine import MMEngineAdapter, build_hooks
try:
    build_hooks(custom_hooks=[dict(type='SegVisualizationHook', draw=True)], default_scope='mmseg')
except RuntimeError as err:
    print('build_hooks:', err)
assert not Visualizer._instance_dict, Visualizer._instance_dict
adapter = MMEngineAdapter.from_config(custom_hooks=[dict(type='SegVisualizationHook', draw=True)],
    default_scope='mmseg', visualizer=dict(type='SegLocalVisualizer', vis_backends=[dict(type='LocalVisBackend')]),
    work_dir='work')
(hook,) = [h for h in adapter.hooks if type(h).__name__ == 'SegVisualizationHook']
assert hook._visualizer is adapter.runner.visualizer
print(type(hook._visualizer).__name__, hook._visualizer._vis_backends['LocalVisBackend']._save_dir)
"""


@pytest.fixture(scope="module")
def fresh_visualizer_process(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess:
    """:data:`_FRESH_VISUALIZER_CODE` run in a process of its own (no Visualizer exists when it starts)."""
    env = subprocess_env(inherit=False)
    cwd = tmp_path_factory.mktemp("fresh_visualizer")
    return subprocess.run([sys.executable, "-c", _FRESH_VISUALIZER_CODE], env=env, capture_output=True, text=True,
                          cwd=cwd)  # fmt: skip


def test_mmengine_downstream_visualization_hook_builds_from_config_in_a_fresh_process(fresh_visualizer_process):
    # SegVisualizationHook takes Visualizer.get_current_instance() in __init__: from_config builds the adapter's
    # visualizer first, as MMEngine's Runner does
    done = fresh_visualizer_process
    assert done.returncode == 0, done.stderr[-3000:]
    name, save_dir = done.stdout.split()[-2:]
    assert name == "SegLocalVisualizer"
    assert re.fullmatch(r"(.*/)?work/\d{8}_\d{6}/vis_data", save_dir)


def test_mmengine_downstream_visualization_hook_built_before_any_visualizer_says_to_build_it_from_config(
    fresh_visualizer_process,
):
    # build_hooks(...) then MMEngineAdapter(hooks, visualizer=...): the hook asks for the current Visualizer before
    # the adapter built one; MMEngine's own error ("call get_instance(name=xxx) at least once") names neither
    done = fresh_visualizer_process
    assert ("build_hooks: build_hooks: SegVisualizationHook takes the current mmengine Visualizer when it is built, "
            "and none exists yet: MMEngine's Runner builds its visualizer before its hooks. Build the hooks with "
            "MMEngineAdapter.from_config(") in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]


def _prepare_proto_fit(tmp_path, module: pl.LightningModule) -> MMEngineAdapter:
    adapter = MMEngineAdapter.from_config(custom_hooks=[dict(type="mmpretrain.PrepareProtoBeforeValLoopHook")],
                                          work_dir=tmp_path)  # fmt: skip
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=2, logger=False, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(module, *loaders())
    return adapter


def test_mmengine_downstream_prepare_proto_hook_prepares_the_retriever_the_lightning_module_holds(tmp_path):
    # PrepareProtoBeforeValLoopHook checks isinstance(runner.model, BaseRetriever): runner.model is the retriever
    from mmpretrain.models.retrievers import BaseRetriever

    class TinyRetriever(type(make_model()), BaseRetriever):
        prepared = 0

        def prepare_prototype(self) -> None:
            self.prepared += 1

    torch.manual_seed(0)
    module = LitWrapper(TinyRetriever(), dict(optimizer=dict(type="SGD", lr=0.1)))
    _prepare_proto_fit(tmp_path, module)
    assert module.model.prepared == 2  # before each validation, as under the Runner


def test_mmengine_downstream_prepare_proto_hook_is_refused_not_skipped(tmp_path):
    # a LightningModule that holds no MMEngine model is runner.model: the hook would only warn; the adapter refuses
    # it, naming the way out
    class Plain(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(48, 2)

        def training_step(self, batch, batch_idx):
            return self.layer(batch["inputs"].flatten(1)).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    with pytest.raises(TypeError, match=r"PrepareProtoBeforeValLoopHook.*BaseRetriever.*runner.model is the "
                                        r"LightningModule \(Plain\).*prepare_prototype\(\)"):
        _prepare_proto_fit(tmp_path, Plain())


@HOOKS.register_module(force=True)
class ReadLoopHook(Hook):
    """Reads ``runner.<loop>.<attr>`` (calls it when ``call``) in ``before_train``."""

    def __init__(self, loop: str, attr: str, call: bool = False) -> None:
        self.loop, self.attr, self.call = loop, attr, call

    def before_train(self, runner) -> None:
        value = getattr(getattr(runner, self.loop), self.attr)
        if self.call:
            value()


@pytest.mark.parametrize(
    "hook, error, message",
    [
        (dict(loop="val_loop", attr="evaluator"), AttributeError,
         r"runner.val_loop.evaluator: LitWrapper has no mmengine Evaluator\. MMEngine's ValLoop holds the evaluator .*"
         r"self\.val_evaluator or self\.evaluator"),
        (dict(loop="train_loop", attr="run", call=True), RuntimeError,
         r"runner.train_loop.run\(\): Lightning's fit loop runs training .* call trainer\.fit"),
        (dict(loop="val_loop", attr="run", call=True), RuntimeError, r"runner.val_loop.run\(\): .*trainer\.validate"),
    ],
)
def test_mmengine_downstream_loop_facades_refuse_what_lightning_owns_by_name(tmp_path, hook, error, message):
    adapter = MMEngineAdapter.from_config(custom_hooks=[dict(type="ReadLoopHook", **hook)], work_dir=tmp_path)
    module = LitWrapper(make_model(), dict(optimizer=dict(type="SGD", lr=0.1)))
    del module.evaluator  # a LightningModule computing its metrics without an mmengine Evaluator
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0)
    with pytest.raises(error, match=message) as raised:
        trainer.fit(module, *loaders())
    assert "raised by mmengine hook ReadLoopHook in mount point 'before_train'" in str(raised.value.__notes__)


#: mmdet's tracking and grounding visualization hooks with their visualizers. TrackVisualizationHook without
#: test_out_dir (with one, it writes validation frames to that path relative to the working directory too);
#: GroundingVisualizationHook with one (without, its grounding branch calls a method hooks do not have: mmdet's bug)
TRACK = (dict(type="TrackVisualizationHook", draw=True, frame_interval=2), "TrackLocalVisualizer")
GROUNDING = (dict(type="GroundingVisualizationHook", draw=True, interval=2, test_out_dir="grounding"),
             "DetLocalVisualizer")  # fmt: skip


@pytest.mark.parametrize("task", ["track", "track_frames", "grounding"])
@pytest.mark.parametrize("train_cfg", [None, ITER_CFG], ids=["epoch_based", "iter_based"])
def test_mmengine_downstream_track_grounding_visualization_hooks_draw_the_runners_pixels(
    tmp_path, task, train_cfg, no_restart_sleep
):
    # validation images stepped by runner.iter (+ the frames TrackVisualizationHook counted so far), test images
    # by that count or, for grounding, written to {work_dir}/{timestamp}/{test_out_dir}/ with numpy-random colours.
    # track: one video per batch; track_frames: one frame per batch from mmdet's TrackImgSampler, the hook's other
    # branch (isinstance(runner.val_dataloader.sampler, TrackImgSampler))
    hook, visualizer = GROUNDING if task == "grounding" else TRACK
    options = dict(default_scope="mmdet", visualizer=dict(type=visualizer, vis_backends=[dict(type="LocalVisBackend")]))
    train, val = loaders(n_val=4, val_batch_size=1)
    if task == "track_frames":
        videos = Videos(2, 2)
        val = DataLoader(videos, batch_size=1, sampler=TrackImgSampler(videos, seed=0))
    pair = run_both(tmp_path, custom_hooks=[hook], task=task.split("_")[0], train=train, val=val, test=val,
                    train_cfg=train_cfg, **options)  # fmt: skip
    pair.assert_same(GroundingVisualizationHook if task == "grounding" else TrackVisualizationHook)
    run_dir = tmp_path / "lt" / pair.adapter.runner.timestamp
    images = sorted(p.name for p in (run_dir / "vis_data" / "vis_image").glob("*.png"))
    val_iters = [4, 8] if train_cfg is None else [4, 8, 10]  # runner.iter at each validation
    if task == "track_frames":  # 6 frames per validation, every 2nd batch drawn; test steps are batch indices
        assert images == sorted({f"test_img_{s}.png" for s in [it + b for it in val_iters for b in (1, 3, 5)] + [1, 3, 5]})
    elif task == "track":  # 4 videos of 3 frames per validation, frames 0 and 2 drawn; image_idx runs on into test
        seen = [3 * 4 * n for n in range(len(val_iters) + 1)]
        steps = [it + seen[n] + 3 * v + f for n, it in enumerate(val_iters) for v in range(4) for f in (0, 2)]
        steps += [seen[-1] + 3 * v + f for v in range(4) for f in (0, 2)]
        assert images == sorted({f"test_img_{s}.png" for s in steps})
    else:  # validation batches whose runner.iter + batch_idx is even; every test sample, grounding (label 0) or
        # detection (label 1) alike
        assert images == sorted({f"val_img_{it + b}.png" for it in val_iters for b in range(4) if (it + b) % 2 == 0})
        tests = sorted(p.relative_to(run_dir).as_posix() for p in (run_dir / "grounding").rglob("*.png"))
        assert tests == [f"grounding/{i}.png" for i in range(4)]


def test_mmengine_downstream_track_visualization_hook_refuses_a_sampler_lightning_wrapped(tmp_path):
    # under DDP, Trainer(use_distributed_sampler=True) wraps the loader's TrackImgSampler in Lightning's
    # DistributedSamplerWrapper: the hook's isinstance check would fail and it would draw videos instead of frames.
    # One process with the loader Lightning would build shows it.
    from lightning.fabric.utilities.distributed import DistributedSamplerWrapper

    videos = Videos(2, 2)
    wrapped = DistributedSamplerWrapper(TrackImgSampler(videos, seed=0), num_replicas=1, rank=0)
    hook, visualizer = TRACK
    adapter = MMEngineAdapter.from_config(
        custom_hooks=[hook], default_scope="mmdet", work_dir=tmp_path,
        visualizer=dict(type=visualizer, vis_backends=[dict(type="LocalVisBackend")]),
    )  # fmt: skip
    trainer = pl.Trainer(callbacks=[adapter], max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_checkpointing=False, enable_model_summary=False, use_distributed_sampler=False)  # fmt: skip
    module = LitWrapper(make_model(task="track"), dict(optimizer=dict(type="SGD", lr=0.1)))
    with pytest.raises(TypeError, match=r"cannot run TrackVisualizationHook: it checks isinstance\(runner.val_dataloader"
                                        r".sampler, TrackImgSampler\).*use_distributed_sampler=False"):
        trainer.validate(module, DataLoader(videos, batch_size=1, sampler=wrapped))


@pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed with gloo")
def test_mmengine_downstream_sync_norm_hook_under_ddp_matches_runner(tmp_path):
    # SyncNormHook is a no-op at world size 1: here 2 CPU processes (torchrun, gloo) run the Runner with
    # launcher="pytorch", then Lightning's DDP + adapter; each rank trains on its own data, so the BN running stats
    # differ per rank until the hook averages them in before_val_epoch
    env = subprocess_env(inherit=False, drop=DDP_LAUNCH_VARIABLES)
    script = HELPERS / "sync_norm_ddp.py"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
                           str(script), str(tmp_path)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    for r in ranks:  # Lightning + adapter as the Runner on each rank: events, weights, the norm buffers throughout
        assert r["lightning"]["events"] == r["runner"]["events"]
        for name, values in r["runner"]["weights"].items():
            torch.testing.assert_close(torch.tensor(r["lightning"]["weights"][name]), torch.tensor(values))
        assert sorted(r["lightning"]["norms"]) == sorted(r["runner"]["norms"]) == ["after_val", "synced", "unsynced"]
        for tag, epochs in r["runner"]["norms"].items():
            for epoch, buffers in enumerate(epochs):
                for name, values in buffers.items():
                    lt = r["lightning"]["norms"][tag][epoch][name]
                    torch.testing.assert_close(torch.tensor(lt), torch.tensor(values), msg=f"{tag} {epoch} {name}")
    norms = [r["lightning"]["norms"] for r in ranks]
    for epoch in range(2):  # the ranks' own statistics before the hook, their mean on both ranks after it
        for name in ("1.running_mean", "1.running_var"):
            unsynced = [torch.tensor(n["unsynced"][epoch][name]) for n in norms]
            assert not torch.allclose(*unsynced)
            for n in norms:
                torch.testing.assert_close(torch.tensor(n["synced"][epoch][name]), (unsynced[0] + unsynced[1]) / 2)
                assert n["after_val"][epoch][name] == n["synced"][epoch][name]  # validation leaves them alone
