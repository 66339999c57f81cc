"""``MMEngineModule``: the device its data preprocessors move batches to, and its evaluation of mmagic's
``MultiValLoop`` / ``MultiTestLoop`` configs: the errors a config the loops refuse gets (the differential runs against
the Runner are in test_resume_corpus.py)."""

from __future__ import annotations

import importlib.util

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
