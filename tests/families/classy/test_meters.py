"""Classy's own meters under ClassyAdapter, in Classy's list and config forms (values against Classy's real
ClassificationTask: tests/families/classy/test_real_task.py); torchmetrics metrics behind Classy's meter interface."""

from __future__ import annotations

import pytest
from classy_testkit import Net, loader, make_trainer
from classy_vision.hooks import ClassyHook
from classy_vision.meters import AccuracyMeter, PrecisionAtKMeter, RecallAtKMeter, VideoAccuracyMeter
from omegaconf import OmegaConf
from torchmetrics.classification import MulticlassAccuracy

from lightning_hooks import ClassyAdapter, build_callbacks


def _fit(tmp_path, meters, **options):
    adapter = ClassyAdapter([AccuracyMeterProbe()], meters=meters)
    make_trainer(tmp_path, [adapter], max_epochs=1, **options).fit(Net(), loader(), loader(8, seed=1))
    return adapter


class AccuracyMeterProbe(ClassyHook):
    """Records every meter's value at each phase end, and the top-1 accuracy of the phase computed here."""

    on_start = on_phase_start = on_end = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.values, self.expected, self.correct, self.total = [], [], 0, 0

    def on_step(self, task):
        batch = task.last_batch
        self.correct += int((batch.output.argmax(1) == batch.target).sum())
        self.total += len(batch.target)

    def on_phase_end(self, task):
        self.values.append([meter.value for meter in task.meters])
        self.expected.append(self.correct / self.total)
        self.correct = self.total = 0


def test_classy_meters_list_form_config_form_and_torchmetrics_agree(tmp_path):
    forms = {
        "list": [AccuracyMeter(topk=[1]), PrecisionAtKMeter(topk=[1]), RecallAtKMeter(topk=[1])],
        "config": {"accuracy": {"topk": [1]}, "precision_at_k": {"topk": [1]}, "recall_at_k": {"topk": [1]}},
        "yaml": OmegaConf.create({"accuracy": {"topk": [1]}}),
        "mixed": {"acc": AccuracyMeter(topk=[1]), "tm": MulticlassAccuracy(num_classes=3, average="micro")},
    }
    values = {form: _fit(tmp_path / form, meters).hooks[0] for form, meters in forms.items()}
    expected = values["list"].expected
    for form, probe in values.items():
        assert [v[0]["top_1"] for v in probe.values] == pytest.approx(expected), form
    # single-label top-1 precision and recall equal the accuracy
    flat = [v["top_1"] for phase in values["list"].values for v in phase]
    assert flat == pytest.approx([e for e in expected for _ in range(3)])
    assert [v[1]["tm"] for v in values["mixed"].values] == pytest.approx(expected)


def test_classy_video_accuracy_meter_averages_the_clips_of_a_video(tmp_path):
    from classy_testkit import DictData
    from torch.utils.data import DataLoader

    class Clips(AccuracyMeterProbe):  # the video accuracy of the phase: outputs averaged over a video's 2 clips
        def on_step(self, task):
            batch = task.last_batch
            video = batch.output.reshape(-1, 2, 3).mean(1).argmax(1)
            self.correct += int((video == batch.target[::2]).sum())
            self.total += len(video)

    def videos(n, seed):
        data = DictData(n, seed)
        data.y[1::2] = data.y[::2]  # both clips of a video share its label
        return DataLoader(data, batch_size=4)

    adapter = ClassyAdapter([Clips()], meters={"video_accuracy": {
        "topk": [1], "clips_per_video_train": 2, "clips_per_video_test": 2}})
    make_trainer(tmp_path, [adapter], max_epochs=1).fit(Net(), videos(16, 0), videos(8, 1))
    probe = adapter.hooks[0]
    assert isinstance(adapter.task.meters[0], VideoAccuracyMeter)
    assert [v[0]["top_1"] for v in probe.values] == pytest.approx(probe.expected)


@pytest.mark.parametrize(
    ("meters", "error", "message"),
    [
        ({"accuracy": {"top_k": [1]}}, KeyError, r"meters\['accuracy'\]: unknown key 'top_k' .*Did you mean: topk"),
        ({"acuracy": {"topk": [1]}}, KeyError, r"meters\['acuracy'\]: unknown Classy meter name 'acuracy'\. Did you mean: accuracy"),
        ([MulticlassAccuracy(num_classes=3)], TypeError, r"meters\[0\] is a torchmetrics MulticlassAccuracy without a name"),
        ([3], TypeError, r"meters\[0\] is a int; expected a classy_vision ClassyMeter"),
        ("accuracy", TypeError, r"expected a list of Classy meters or a dict, got str"),
    ],
)  # fmt: skip
def test_classy_meters_bad_entries_name_the_entry_and_the_nearest(meters, error, message):
    with pytest.raises(error, match=message):
        ClassyAdapter([AccuracyMeterProbe()], meters=meters)


def test_classy_meters_from_a_config_file_section(tmp_path):
    [adapter] = build_callbacks({"classy": {"hooks": [{"name": "loss_lr_meter_logging"}],
                                            "meters": {"accuracy": {"topk": [1, 2]}}}})
    assert isinstance(adapter.task.meters[0], AccuracyMeter) and adapter.task.meters[0]._topk == [1, 2]
