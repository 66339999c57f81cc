"""The ``task`` facade: phases, counters, last_batch, optimizer view, classy state, data iterators, errors."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from classy_vision.hooks import ClassyHook, ExponentialMovingAverageModelHook, build_hooks, register_hook
from classy_testkit import DictData, Net, loader, make_trainer
from torchmetrics.classification import MulticlassAccuracy
from torch.utils.data import DataLoader
from lightning.pytorch.plugins.io import TorchCheckpointIO

from lightning_hooks import ClassyAdapter, adapt


class Probe(ClassyHook):
    """Calls ``probe(task, mount)`` at every Classy mount point."""

    def __init__(self, probe) -> None:
        super().__init__()
        self.probe = probe

    def on_start(self, task):
        self.probe(task, "on_start")

    def on_phase_start(self, task):
        self.probe(task, "on_phase_start")

    def on_step(self, task):
        self.probe(task, "on_step")

    def on_phase_end(self, task):
        self.probe(task, "on_phase_end")

    def on_end(self, task):
        self.probe(task, "on_end")


def test_classy_task_phases_and_counters_follow_classy(tmp_path):
    seen = []

    def probe(task, mount):
        if mount in ("on_phase_start", "on_phase_end"):
            seen.append((mount, task.phase_type, task.phase_idx, task.train_phase_idx, task.eval_phase_idx,
                         task.num_batches_per_phase, task.test_only))

    trainer = make_trainer(tmp_path, [ClassyAdapter(Probe(probe))], num_sanity_val_steps=2)
    trainer.fit(Net(), loader(), loader(8, seed=1))
    trainer.test(trainer.lightning_module, dataloaders=loader(12, seed=2))
    starts = [s for s in seen if s[0] == "on_phase_start"]
    assert starts == [
        ("on_phase_start", "train", 0, 0, -1, 4, False),
        ("on_phase_start", "test", 1, 0, 0, 2, False),
        ("on_phase_start", "train", 2, 1, 0, 4, False),
        ("on_phase_start", "test", 3, 1, 1, 2, False),
        ("on_phase_start", "test", 4, 1, 2, 3, True),  # trainer.test continues Classy's phase count
    ]
    assert [s[1:] for s in seen if s[0] == "on_phase_end"] == [s[1:] for s in starts]


def test_classy_task_last_batch_on_train_and_eval_batches(tmp_path):
    seen = []

    def probe(task, mount):
        if mount == "on_step":
            lb = task.last_batch
            expected = F.cross_entropy(lb.output, lb.sample["target"])
            seen.append((task.train, lb.sample["id"].tolist(), torch.allclose(lb.loss, expected),
                         lb.target is lb.sample["target"], tuple(lb.output.shape), "sample_fetch_time" in lb.step_data))

    make_trainer(tmp_path, [ClassyAdapter(Probe(probe))], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    assert [s[:2] for s in seen] == [(True, [100, 101, 102, 103]), (True, [104, 105, 106, 107]),
                                     (True, [108, 109, 110, 111]), (True, [112, 113, 114, 115]),
                                     (False, [100, 101, 102, 103]), (False, [104, 105, 106, 107])]
    assert all(s[2:] == (True, True, (4, 3), True) for s in seen)


def test_classy_task_last_batch_is_none_outside_steps(tmp_path):
    seen = []
    probe = Probe(lambda t, m: m != "on_step" and seen.append((m, t.last_batch)))
    make_trainer(tmp_path, [ClassyAdapter(probe)], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    # ClassificationTask's train_step/eval_step start with last_batch = None and the phase ends on the step that
    # finds no batch: on_phase_start (after a phase), on_phase_end and on_end see None
    assert seen == [("on_start", None), ("on_phase_start", None), ("on_phase_end", None), ("on_phase_start", None),
                    ("on_phase_end", None), ("on_end", None)]


def test_classy_task_loss_tensor_step_and_tuple_batches(tmp_path):
    class TupleNet(Net):
        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)

    seen = []
    data = DictData()
    pairs = DataLoader(list(zip(data.x, data.y)), batch_size=4)
    make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: m == "on_step" and seen.append(t.last_batch)))],
                 max_epochs=1, limit_val_batches=0).fit(TupleNet(), pairs)
    assert len(seen) == 4 and isinstance(seen[0].sample, list) and seen[0].output is not None
    assert seen[0].loss.ndim == 0 and seen[0].target is None


def test_classy_task_optimizer_options_view_lr(tmp_path):
    class Scheduled(Net):
        def configure_optimizers(self):
            opt = torch.optim.SGD([{"params": self.net[0].parameters()}, {"params": self.net[3].parameters(), "lr": 0.5},
                                   {"params": self.net[1].parameters()}], lr=0.1)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)}

    lrs = []
    probe = Probe(lambda t, m: m in ("on_step", "on_phase_end") and t.train and lrs.append(t.optimizer.options_view.lr))
    make_trainer(tmp_path, [ClassyAdapter(probe)]).fit(Scheduled(), loader(), loader(8, seed=1))
    # on_step shows the LR its step used; a per-epoch scheduler has stepped by the train phase end (Classy's
    # optimizer.on_epoch), except after the last train phase, where Classy keeps the LR (where == 1)
    assert lrs == [[0.1, 0.5]] * 4 + [[0.05, 0.25]] + [[0.05, 0.25]] * 4 + [[0.05, 0.25]]


def test_classy_adapter_refuses_a_classy_optimizers_schedule_without_vissl(tmp_path):
    """Classy hooks only: a ClassyOptimizer kept on the module with a non-constant schedule would silently not be
    applied (the adapter applies param schedulers with VISSL only), so fit refuses it; constant options pass."""
    from classy_vision.optim import SGD
    from classy_vision.optim.param_scheduler import CosineParamScheduler

    class Kept(Net):
        def __init__(self, lr):
            super().__init__()
            self.schedule = lr

        def configure_optimizers(self):
            self.classy_optimizer = SGD(momentum=0.9)
            self.classy_optimizer.set_param_groups(self.parameters(), lr=self.schedule)
            return self.classy_optimizer.optimizer

    hook = Probe(lambda task, mount: None)
    with pytest.raises(ValueError, match=r"Kept.classy_optimizer is a ClassyOptimizer with param schedulers for "
                                         r"\['lr'\].*ClassyAdapter\(vissl=...\).*Lightning LR scheduler"):
        make_trainer(tmp_path, [ClassyAdapter(hook)]).fit(Kept(CosineParamScheduler(0.1, 0.0)), loader(), loader(8))
    make_trainer(tmp_path, [ClassyAdapter(hook)], max_epochs=1).fit(Kept(0.1), loader(), loader(8))


def test_classy_task_options_view_at_on_step_is_the_lr_the_step_used(tmp_path):
    class PerStep(Net):
        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / 10)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sch, "interval": "step"}}

    lrs = []
    probe = Probe(lambda t, m: m == "on_step" and t.train and lrs.append(t.optimizer.options_view.lr))
    make_trainer(tmp_path, [ClassyAdapter(probe)], limit_val_batches=0).fit(PerStep(), loader())
    reference = PerStep()
    config = reference.configure_optimizers()
    opt, sch = config["optimizer"], config["lr_scheduler"]["scheduler"]
    used = []
    for _ in range(2):  # Classy sets the LR inside optimizer.step, so on_step shows the LR that step used
        for batch in loader():
            opt.zero_grad()
            F.cross_entropy(reference(batch["input"]), batch["target"]).backward()
            used.append(opt.param_groups[0]["lr"])
            opt.step()
            sch.step()
    assert lrs == pytest.approx(used)


def test_classy_task_classy_state_round_trip(tmp_path):
    saved = {}
    ema = ExponentialMovingAverageModelHook(decay=0.5, device="cpu")
    probe = Probe(lambda t, m: m == "on_end" and saved.update(t.get_classy_state(deep_copy=True)))
    make_trainer(tmp_path, [ClassyAdapter([ema, probe])], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    assert set(saved["hooks"]) == {"ExponentialMovingAverageModelHook", "Probe"}
    assert saved["phase_idx"] == 1 and saved["num_updates"] == 16 and saved["optimizer"]["optim"]["state"]
    assert set(saved["base_model"]) == {"model"} and saved["base_model"]["model"]["heads"] == {}  # Classy's layout

    ema2 = ExponentialMovingAverageModelHook(decay=0.5, device="cpu")
    expected = copy.deepcopy(saved)  # set_classy_state hands the hooks these tensors, which they then update
    restored = {}

    def restore(task, mount):
        if mount == "on_start":
            task.set_classy_state(saved)
            restored.update({k: v.clone() for k, v in task.base_model.state_dict().items()})
            restored.update({f"ema.{k}": v.clone() for k, v in ema2.state.ema_model_state.items()})

    make_trainer(tmp_path, [ClassyAdapter([Probe(restore), ema2])], max_epochs=1, limit_train_batches=1,
                 limit_val_batches=0).fit(Net(), loader())
    for key, value in expected["base_model"]["model"]["trunk"].items():
        torch.testing.assert_close(restored[key], value)
    for key, value in expected["hooks"]["ExponentialMovingAverageModelHook"]["ema_model_state"].items():
        torch.testing.assert_close(restored[f"ema.{key}"], value)


def test_classy_task_mid_phase_resume_keeps_the_phase_losses_and_meters(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    def run(steps, ckpt_path=None, **kwargs):
        meters = {"acc": MulticlassAccuracy(num_classes=3, average="micro")}
        probe = Probe(lambda t, m: t.train and m in ("on_step", "on_phase_end") and steps.append(
            (m, t.last_batch and (t.last_batch.loss.item(), t.last_batch.output, t.last_batch.target),
             list(t.losses), t.meters[0].value)))
        make_trainer(tmp_path, [ClassyAdapter(probe, meters=meters), *kwargs.pop("callbacks", [])], max_epochs=1,
                     limit_val_batches=0, **kwargs).fit(Net(), loader(), ckpt_path=ckpt_path)

    first = []
    run(first, enable_checkpointing=True, callbacks=[ModelCheckpoint(tmp_path / "ck", every_n_train_steps=2,
                                                                     save_top_k=-1)])
    ckpt = next((tmp_path / "ck").glob("*step=2*.ckpt"))
    torch.load(ckpt, weights_only=True)
    resumed = []
    run(resumed, ckpt_path=ckpt)
    # the phase's batches: the two before the checkpoint (first run), then the ones the resumed run stepped
    batches = [s[1] for s in first[:2] if s[0] == "on_step"] + [s[1] for s in resumed if s[0] == "on_step"]
    outputs, targets = torch.cat([b[1] for b in batches]), torch.cat([b[2] for b in batches])
    end = resumed[-1]
    assert end[0] == "on_phase_end" and end[2] == pytest.approx([b[0] for b in batches])
    assert end[3]["acc"] == pytest.approx((outputs.argmax(1) == targets).float().mean().item())


def test_classy_task_resumed_from_a_train_phases_last_batch_runs_its_test_phase_first(tmp_path):
    """A Lightning checkpoint written at train phase 2's last batch (the user's ``ModelCheckpoint(every_n_train_steps)``
    writes after the adapter's ``on_train_batch_end``, which ended the phase: ``on_phase_end`` ran, test phase 3 not
    yet), resumed: as classy_train.py resumes a train phase's end (tests/families/classy/test_train_resume.py: the
    pending test phase first), the fit goes on as the uninterrupted one: test phase 3 with the checkpoint's weights,
    then train phase 4 and test phase 5, with the same counters at every mount point, batches, losses and final
    weights, bitwise. (Lightning 2.6 restored as written goes on with the next epoch: no test phase 3.)
    test_vissl_real.py has the VISSL case."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    def fit(folder, callbacks=(), ckpt_path=None):
        seen, model = [], Net()
        probe = Probe(lambda t, m: m != "on_start" and seen.append(
            (m, t.phase_idx, t.train_phase_idx, t.train, t.num_updates,
             t.last_batch and (t.last_batch.sample["id"].tolist(), t.last_batch.loss.item()))))  # fmt: skip
        make_trainer(folder, [ClassyAdapter(probe), *callbacks], max_epochs=3, limit_val_batches=1,
                     enable_checkpointing=True).fit(model, loader(), loader(8, seed=1), ckpt_path=ckpt_path)  # fmt: skip
        return seen, model.state_dict()

    every = ModelCheckpoint(tmp_path / "ck", every_n_train_steps=8, save_top_k=-1)
    fresh, weights = fit(tmp_path / "fresh", [every])
    resumed, resumed_weights = fit(tmp_path / "resumed", ckpt_path=next((tmp_path / "ck").glob("*step=8.ckpt")))
    ended = fresh.index(("on_phase_end", 2, 1, True, 32, None))  # train phase 2's end: the checkpoint's last step
    assert resumed[0] == ("on_phase_start", 3, 1, False, 32, None)
    assert resumed == fresh[ended + 1 :] and resumed[-1] == ("on_end", 5, 2, False, 48, None)
    assert weights.keys() == resumed_weights.keys()
    assert all(torch.equal(value, resumed_weights[key]) for key, value in weights.items())


def test_classy_task_data_iterator_is_fresh_and_sized(tmp_path):
    seen = []

    def probe(task, mount):
        if mount == "on_phase_end":
            task.build_dataloaders_for_current_phase()
            task.create_data_iterators()
            seen.append((task.phase_type, len(task.data_iterator), next(task.data_iterator)["id"].tolist(),
                         task.get_batchsize_per_replica()))

    make_trainer(tmp_path, [ClassyAdapter(Probe(probe))], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    assert seen == [("train", 4, [100, 101, 102, 103], 4), ("test", 2, [100, 101, 102, 103], 4)]


def test_classy_task_vissl_extras(tmp_path):
    seen = {}

    class Vissl(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def on_step(self, task):
            seen.update(log=task.config["LOG_FREQUENCY"], folder=task.checkpoint_folder, max=task.max_iteration,
                        batches=task.batches, times=len(task.batch_time), device=task.device.type, gpu=task.use_gpu)
            task.run_hooks("custom")

        def custom(self, task):
            seen["custom"] = seen.get("custom", 0) + 1

    adapter = ClassyAdapter([Vissl(), Probe(lambda t, m: None)], config={"LOG_FREQUENCY": 5}, checkpoint_folder="ck")
    make_trainer(tmp_path, [adapter], limit_val_batches=0).fit(Net(), loader())
    # VISSL: batches -1 at on_start, +1 per batch, never reset by the trainer; batch_time kept for the whole run
    assert seen == dict(log=5, folder="ck", max=8, batches=7, times=8, device="cpu", gpu=False, custom=8)
    assert adapter.task.iteration == 8 and adapter.task.amp_args is None and adapter.task.model is adapter.task.base_model
    assert adapter.fired["custom"] == 8  # run_hooks goes through the adapter: counted like its rows


def test_classy_task_run_hooks_error_names_the_hook_it_called(tmp_path):
    class Caller(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def on_step(self, task):
            task.run_hooks("custom")

    class Failing(Caller):
        on_step = ClassyHook._noop

        def custom(self, task):
            raise ValueError("custom failed")

    with pytest.raises(ValueError, match="custom failed") as info:
        make_trainer(tmp_path, [ClassyAdapter([Caller(), Failing()])], limit_val_batches=0).fit(Net(), loader())
    assert "raised by classy hook test_classy_task_run_hooks_error_names_the_hook_it_called.<locals>.Failing in " \
           "mount point 'custom' (called by name, epoch 0, global step 1)" in "\n".join(info.value.__notes__)


def test_classy_task_missing_attribute_names_it_and_the_hook(tmp_path):
    probe = Probe(lambda t, m: m == "on_start" and t.no_such_thing)
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'. It provides: .*base_model") as info:
        make_trainer(tmp_path, [ClassyAdapter(probe)], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    assert "Probe in mount point 'on_start'" in info.value.__notes__[0]
    assert not hasattr(ClassyAdapter(Probe(None)).task, "ema")  # hooks probing optional attributes keep working


def test_classy_adapter_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="share the name"):
        ClassyAdapter([Probe(None), Probe(None)])
    with pytest.raises(TypeError, match="not a classy hook"):
        ClassyAdapter([object()])
    with pytest.raises(ValueError, match="val_check_interval=1.0"):
        make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: None))], max_epochs=1, val_check_interval=2).fit(
            Net(), loader(), loader(8, seed=1))

    class Weird(Net):
        def training_step(self, batch, batch_idx):
            return "loss"

    with pytest.raises(TypeError, match="a loss tensor or a dict with 'loss'"):
        make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: None))], max_epochs=1).fit(Weird(), loader())


def test_classy_registry_builds_hooks_from_config(tmp_path):
    @register_hook("lightning_hooks_test_counter")
    class CounterHook(ClassyHook):
        on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

        def __init__(self, start: int) -> None:
            super().__init__()
            self.state.count = start

        def on_step(self, task):
            self.state.count += 1

    hooks = build_hooks([{"name": "lightning_hooks_test_counter", "start": 10}])
    (adapter,) = adapt(hooks)
    assert isinstance(adapter, ClassyAdapter)
    make_trainer(tmp_path, [adapter], max_epochs=1).fit(Net(), loader(), loader(8, seed=1))
    assert hooks[0].state.count == 16  # 4 train + 2 eval batches: on_step fires on eval batches too
    assert adapter.state_dict()["hooks"] == {"CounterHook": {"count": 16}}


def test_classy_task_standalone_validate_and_early_stop(tmp_path):
    seen = []
    probe = Probe(lambda t, m: m != "on_step" and seen.append((m, t.phase_type, t.phase_idx, t.test_only, t.where)))
    trainer = make_trainer(tmp_path, [ClassyAdapter(probe)], max_epochs=3, max_steps=2)
    trainer.fit(Net(), loader(), loader(8, seed=1))  # stops after 2 of 4 batches: the phase still ends
    trainer.validate(trainer.lightning_module, loader(8, seed=1))
    # a test-only Classy task is in test mode from on_start and its task.where is 0.0 (real ClassificationTask)
    assert seen == [
        ("on_start", "train", -1, False, 0.0),
        ("on_phase_start", "train", 0, False, 0.0),
        ("on_phase_end", "train", 0, False, 1.0),
        ("on_end", "train", 0, False, 1.0),
        ("on_start", "test", 0, True, 0.0),
        ("on_phase_start", "test", 1, True, 0.0),
        ("on_phase_end", "test", 1, True, 0.0),
        ("on_end", "test", 1, True, 0.0),
    ]


def test_classy_task_each_fit_is_a_new_classy_run(tmp_path):
    seen = []
    probe = Probe(lambda t, m: m in ("on_start", "on_phase_end") and seen.append(
        (m, t.phase_idx, t.train_phase_idx, t.num_updates, t.iteration, len(t.losses))))
    adapter, model = ClassyAdapter(probe), Net()
    for _ in range(2):  # Classy builds a new task per run: the second fit starts from the counters the first did
        make_trainer(tmp_path, [adapter], max_epochs=1).fit(model, loader(), loader(8, seed=1))
    first = [("on_start", -1, -1, 0, 0, 0), ("on_phase_end", 0, 0, 16, 4, 4), ("on_phase_end", 1, 0, 16, 4, 2)]
    assert seen == first * 2


def test_classy_task_standalone_test_is_test_only_from_on_start(tmp_path):
    seen = []
    probe = Probe(lambda t, m: m != "on_step" and seen.append((m, t.train, t.where)))
    make_trainer(tmp_path, [ClassyAdapter(probe)]).test(Net(), loader(8, seed=1))
    # real ClassificationTask with set_test_only(True): train=False and where 0.0 at every mount point
    assert seen == [("on_start", False, 0.0), ("on_phase_start", False, 0.0), ("on_phase_end", False, 0.0),
                    ("on_end", False, 0.0)]


def test_classy_adapter_warns_when_lightning_skips_the_final_test_phase(tmp_path):
    seen = []
    probe = Probe(lambda t, m: m == "on_phase_start" and seen.append(t.phase_type))
    with pytest.warns(UserWarning, match=r"max_epochs=3, check_val_every_n_epoch=2\) runs no validation after the last"):
        make_trainer(tmp_path, [ClassyAdapter(probe)], max_epochs=3, check_val_every_n_epoch=2).fit(
            Net(), loader(), loader(8, seed=1))
    assert seen == ["train", "train", "test", "train"]  # Classy would end with a test phase
    with pytest.warns(UserWarning, match=r"max_steps=2\) can stop inside a train epoch"):
        make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: None))], max_steps=2).fit(
            Net(), loader(), loader(8, seed=1))


def test_classy_meter_sync_state_in_a_process_group():
    from lightning_hooks.families.classy.meters import MetricMeter

    torch.distributed.init_process_group("gloo", store=torch.distributed.HashStore(), rank=0, world_size=1)
    try:
        meter = MetricMeter("acc", MulticlassAccuracy(3, average="micro"))
        meter.update(torch.eye(3)[[0, 1, 2, 0]], torch.tensor([0, 1, 2, 1]))
        meter.sync_state()
        assert meter.value == {"acc": 0.75}
        meter.reset()
        meter.update(torch.eye(3)[[0]], torch.tensor([0]))  # updating after a sync needs the reset's unsync
        assert meter.value == {"acc": 1.0}
    finally:
        torch.distributed.destroy_process_group()


class _Unsized(torch.utils.data.IterableDataset):
    """DictData's samples from an iterator: the loader has no length."""

    def __iter__(self):
        data = DictData()
        return (data[i] for i in range(len(data)))


def test_classy_task_unsized_train_loader_counts_the_phase_at_its_end(tmp_path):
    from classy_vision.hooks import LossLrMeterLoggingHook, ProgressBarHook

    seen = []
    probe = Probe(lambda t, m: m == "on_phase_end" and seen.append((t.phase_type, t.num_batches_per_phase)))
    adapter = ClassyAdapter([probe, LossLrMeterLoggingHook()])
    unsized = DataLoader(_Unsized(), batch_size=4)
    make_trainer(tmp_path, [adapter], max_epochs=2).fit(Net(), unsized, loader(8, seed=1))
    assert seen == [("train", 4), ("test", 2)] * 2
    assert adapter.task.perf_log[0]["im_per_sec"] > 0  # Classy's log_phase_end counts the phase's batches
    # a hook that needs the count before the phase ran gets the way out, at the first phase start
    with pytest.raises(TypeError, match=r"no length .*limit_train_batches") as info:
        make_trainer(tmp_path, [ClassyAdapter(ProgressBarHook())], max_epochs=1).fit(Net(), unsized)
    assert "ProgressBarHook in mount point 'on_phase_start'" in info.value.__notes__[0]
    hook = ProgressBarHook()
    make_trainer(tmp_path, [ClassyAdapter(hook)], max_epochs=1, limit_train_batches=3).fit(Net(), unsized)
    assert (hook.bar_size, hook.batches) == (3, 3)


def test_classy_config_unknown_dotted_key_is_named_whole(tmp_path):
    @register_hook("lightning_hooks_test_dotted")
    class DottedHook(ClassyHook):
        on_start = on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

        def __init__(self, start: int) -> None:
            super().__init__()

    with pytest.raises(KeyError, match=r"unknown key 'sta\.rt' for Classy hook 'lightning_hooks_test_dotted' "
                                       r"\(DottedHook\)\. Did you mean: start\? Accepted: start\."):  # fmt: skip
        ClassyAdapter([{"name": "lightning_hooks_test_dotted", "sta.rt": 1}])


class _ClassyLinear(torch.nn.Linear):
    """Has Classy's model-state methods, as a ``ClassyModel``."""

    def get_classy_state(self, deep_copy: bool = False):
        return {"model": {"trunk": self.state_dict(), "heads": {}}}

    def set_classy_state(self, state):
        self.load_state_dict(state["model"]["trunk"])


def test_classy_task_model_lookup_finds_one_classy_model_and_refuses_two(tmp_path):
    class OneModel(Net):
        def __init__(self) -> None:
            super().__init__()
            self.extra = torch.nn.Sequential(_ClassyLinear(2, 2))  # found below the LightningModule's children

    class TwoModels(OneModel):
        def __init__(self) -> None:
            super().__init__()
            self.other = _ClassyLinear(2, 2)

    adapter = ClassyAdapter(Probe(lambda t, m: None))
    make_trainer(tmp_path, [adapter], max_epochs=1).fit(OneModel(), loader())
    assert adapter.task.model_path == "extra.0" and isinstance(adapter.task.base_model, _ClassyLinear)
    with pytest.raises(ValueError, match=r"several ClassyModels \('extra\.0', 'other'\).*ClassyAdapter\(\.\.\., model='extra\.0'\)"):
        make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: None))], max_epochs=1).fit(TwoModels(), loader())


def test_classy_checkpoint_loader_reads_again_only_what_weights_only_refuses(tmp_path):
    class Failing(TorchCheckpointIO):
        def __init__(self, error: Exception) -> None:
            super().__init__()
            self.error, self.calls = error, []

        def load_checkpoint(self, path, map_location=None, weights_only=None):
            self.calls.append(weights_only)
            raise self.error

    (tmp_path / "some.ckpt").write_bytes(b"")
    for error, calls in ((OSError("disk on fire"), [True]), (pickle.UnpicklingError("Weights only load failed"), [True, None])):
        io = Failing(error)
        trainer = make_trainer(tmp_path, [ClassyAdapter(Probe(lambda t, m: None))], max_epochs=1, plugins=[io])
        with pytest.raises(type(error)):
            trainer.fit(Net(), loader(), ckpt_path=tmp_path / "some.ckpt")
        assert io.calls == calls


def test_classy_task_counters_a_hook_writes_are_the_loops():
    """Classy's task counters are plain attributes a hook may write (VISSL's SetDataSamplerEpochHook resets
    ``task.batches``): the write reaches the loop, which counts on from it."""
    adapter = ClassyAdapter(Probe(lambda task, mount: None))
    adapter.task.batches, adapter.task.train = 5, False
    assert (adapter.loop.batches, adapter.loop.train) == (5, False)
    assert (adapter.task.batches, adapter.task.train) == (5, False)
