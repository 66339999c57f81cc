"""``MMEngineModule``: the device its data preprocessors move batches to, and its evaluation of mmagic's
``MultiValLoop`` / ``MultiTestLoop`` configs: the errors a config the loops refuse gets (the differential runs against
the Runner are in test_resume_corpus.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from lightning_hooks.core.lightning_api import pl
from lightning_hooks.families.mmengine.module import _EvaluationPlan, build_multi_evaluators, loop_type

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mmagic") is None, reason="mmagic is not installed")


@pytest.fixture(scope="module", autouse=True)
def _mmagic() -> None:
    import mmagic_parts

    mmagic_parts.import_sr_parts()


def _evaluators(configs):
    from mmengine.registry import DefaultScope

    with DefaultScope.overwrite_default_scope("mmagic"):
        return build_multi_evaluators(configs)


def test_multi_loop_evaluators_are_built_as_the_loop_builds_them():
    from mmagic.evaluation.evaluator import Evaluator

    one = _evaluators(dict(type="Evaluator", metrics=[dict(type="PSNR")]))
    listed = _evaluators([dict(type="Evaluator", metrics=[dict(type="PSNR", prefix="a")]),
                          dict(type="Evaluator", metrics=[dict(type="MAE", prefix="b")])])  # fmt: skip
    bare = _evaluators([dict(type="PSNR"), dict(type="SSIM")])  # one evaluator's metrics, as the loop reads a list
    assert [type(e) for e in one + listed + bare] == [Evaluator] * 4 and len(bare[0].metrics) == 2
    assert loop_type(dict(type="MultiValLoop")) == "MultiValLoop" and loop_type(None) == ""


def test_an_evaluator_the_multi_loop_cannot_take_is_named():
    with pytest.raises(ValueError, match=r"'PSNR' is no evaluator of mmagic's MultiValLoop / MultiTestLoop: give an "):
        _evaluators("PSNR")


def test_one_evaluator_per_dataloader_and_distinct_metric_names_are_required():
    loader = DataLoader(torch.zeros(2, 1))
    plan = _EvaluationPlan(_evaluators(dict(type="Evaluator", metrics=[dict(type="PSNR")])), multi=True)
    with pytest.raises(ValueError, match=r"2 dataloaders and 1 evaluators; give one evaluator per dataloader"):
        plan.start(torch.nn.Linear(1, 1), [loader, loader])
    twice = _EvaluationPlan(_evaluators([dict(type="Evaluator", metrics=[dict(type="MAE")])] * 2), multi=True)
    for evaluator in twice.evaluators:
        evaluator.evaluate = lambda: {"MAE": 1.0}
    with pytest.raises(ValueError, match=r"the metrics \['MAE'\] come from two evaluators; give each evaluator's "):
        twice.evaluate([loader, loader])


def test_metrics_that_sample_their_own_inputs_are_refused_with_what_to_do():
    from mmagic.registry import MODELS

    model = torch.nn.Module()
    model.data_preprocessor = MODELS.build(dict(type="DataPreprocessor"))  # prepare_metrics reads its channel order
    loader = DataLoader(torch.zeros(2, 1))
    plan = _EvaluationPlan(_evaluators(dict(type="Evaluator", metrics=[dict(type="PSNR")])), multi=True)
    evaluator = plan.evaluators[0]
    evaluator.prepare_samplers = lambda model, dataloader: [[evaluator.metrics, iter([])]]  # a generated sampler
    with pytest.raises(NotImplementedError, match=r"the metrics PSNR draw their inputs from a sampler of their own"):
        plan.start(model, [loader])


@pytest.mark.parametrize("stage", ["fit", "validate", "test"])
def test_the_data_preprocessor_moves_batches_to_the_device_the_strategy_placed_the_model_on(stage, trainer_kwargs):
    """Lightning moves the model's tensors without ``BaseModel.to`` (the Runner's way, which records the device in the
    data preprocessor): the module records it, else batches go where the preprocessor last recorded (on a GPU
    machine, the CPU beside CUDA weights; FSDP and DeepSpeed, seen on an H200). Here a stale record of the meta
    device stands in for that CPU."""
    import mmengine_testkit as kit

    model = kit.make_model()
    model.data_preprocessor._device = torch.device("meta")
    module = kit.LitToy(model)
    train, val = kit.loaders(n_train=4, n_val=4)
    trainer = pl.Trainer(max_epochs=1, num_sanity_val_steps=0, **trainer_kwargs)
    if stage == "fit":
        trainer.fit(module, train, val)
    else:
        getattr(trainer, stage)(module, val)
    assert model.data_preprocessor._device == torch.device("cpu")


@pytest.mark.parametrize("use_syncbn", [None, False])
def test_a_model_that_syncs_its_batch_norms_among_processes_is_converted_at_setup(use_syncbn):
    """mmdet's RTMDet (``use_syncbn``, True by default) converts its batch norms to ``SyncBatchNorm`` when built among
    several processes, as under the Runner, whose processes exist first; the command builds it in one process, so
    the module converts it at a fit's setup in several (each rank's BN statistics would be its own, the Runner's
    synced), and leaves it in one or where the config says ``use_syncbn=False``. On CPU both hosts then stop at
    torch's "SyncBatchNorm layers only work with GPU modules"."""
    from types import SimpleNamespace

    import train_kit  # noqa: F401  mmdet's modules (after the stubs)
    from mmengine.config import Config

    from lightning_hooks.families.mmengine.module import MMEngineModule

    configs = Path(importlib.util.find_spec("mmdet").origin).parent / ".mim" / "configs"
    model = Config.fromfile(configs / "rtmdet" / "rtmdet_tiny_8xb32-300e_coco.py").model
    bn = dict(type="BN")  # the shipped SyncBN in the config: only the constructor's conversion is looked at here
    model.backbone.update(init_cfg=None, widen_factor=0.0625, norm_cfg=bn)
    model.neck.update(in_channels=[16, 32, 64], out_channels=16, norm_cfg=bn)
    model.bbox_head.update(num_classes=2, in_channels=16, feat_channels=16, norm_cfg=bn)
    if use_syncbn is not None:
        model.use_syncbn = use_syncbn
    for world_size, synced in ((1, False), (2, use_syncbn is None)):
        module = MMEngineModule.from_config(Config(dict(model=model, default_scope="mmdet")), seed=False)
        module.trainer = SimpleNamespace(world_size=world_size)
        module.setup("fit")
        layers = {type(m) for m in module.model.modules()}
        assert (torch.nn.SyncBatchNorm in layers) is synced, world_size
        assert (torch.nn.BatchNorm2d in layers) is not synced, world_size
