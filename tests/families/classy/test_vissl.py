"""VISSL's nine mount points under Lightning, with hooks written against VISSL's contract.

vissl is not installed here (it cannot import without torchvision), so the VISSL-style hooks below follow what
VISSL 0.1.6's GradClipHook, CheckNanLossHook and FreezeParametersHook do, subclassing classy_vision's ClassyHook
as VISSL hooks do, and are checked against a plain-PyTorch loop in VISSL's step order.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from classy_vision.hooks import ClassyHook
from classy_testkit import Net, loader, make_trainer

from lightning_hooks import ClassyAdapter


class Recorder(ClassyHook):
    """Records every mount point with what the task looked like at that moment."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []
        self.checks: list[str] = []

    def _weights(self, task):
        return task.base_model.net[0].weight.detach().clone()

    def on_start(self, task):
        self.calls.append(("on_start",))

    def on_phase_start(self, task):
        self.calls.append(("on_phase_start", task.phase_type))

    def on_forward(self, task):
        out = task.last_batch.model_output
        if task.train and not (out.requires_grad and task.last_batch.loss is None and task.base_model.training):
            self.checks.append("on_forward: not after the forward and before the loss")
        self.before = self._weights(task)
        self.calls.append(("on_forward", task.phase_type, task.iteration))

    def on_loss_and_meter(self, task):
        if task.last_batch.loss is None:
            self.checks.append("on_loss_and_meter: no loss")
        self.calls.append(("on_loss_and_meter", task.phase_type, task.iteration))

    def on_backward(self, task):
        if task.base_model.net[0].weight.grad is None or not torch.equal(self._weights(task), self.before):
            self.checks.append("on_backward: not between backward and step")
        self.calls.append(("on_backward", task.iteration))

    def on_update(self, task):
        if torch.equal(self._weights(task), self.before):
            self.checks.append("on_update: before the optimizer step")
        self.calls.append(("on_update", task.iteration))

    def on_step(self, task):
        self.calls.append(("on_step", task.phase_type, task.iteration, task.local_iteration_num))

    def on_phase_end(self, task):
        self.calls.append(("on_phase_end", task.phase_type, task.base_model.training))

    def on_end(self, task):
        self.calls.append(("on_end",))

    def on_exception(self, task):
        self.calls.append(("on_exception",))


class GradClip(ClassyHook):
    """VISSL's GradClipHook: clip the gradient norm of ``task.model`` between backward and step."""

    on_start = on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

    def __init__(self, max_norm: float) -> None:
        super().__init__()
        self.max_norm = max_norm

    def on_backward(self, task):
        torch.nn.utils.clip_grad_norm_(task.model.parameters(), max_norm=self.max_norm, norm_type=2)


class CheckNanLoss(ClassyHook):
    """VISSL's CheckNanLossHook: raise on a non-finite loss after the loss is computed."""

    on_start = on_phase_start = on_step = on_phase_end = on_end = ClassyHook._noop

    def on_loss_and_meter(self, task):
        if not torch.isfinite(task.last_batch.loss).all():
            raise FloatingPointError(f"Infinite Loss or NaN at iteration={task.iteration}")


class FreezeParameters(ClassyHook):
    """VISSL's FreezeParametersHook: drop the gradients of named parameters until an iteration."""

    on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

    def __init__(self, names: list[str], until: int) -> None:
        super().__init__()
        self.names, self.until, self.seen = names, until, []

    def on_backward(self, task):
        if task.iteration < self.until:
            for name, p in task.model.named_parameters():
                if name in self.names:
                    p.grad = None

    def on_step(self, task):
        if task.train:
            self.seen.append(task.base_model.net[3].bias.detach().clone())


def test_classy_vissl_mount_points_fire_in_vissl_step_order(tmp_path):
    hook = Recorder()
    make_trainer(tmp_path, [ClassyAdapter(hook)], max_epochs=1, limit_train_batches=2, num_sanity_val_steps=2).fit(
        Net(), loader(), loader(8, seed=1)
    )
    assert hook.checks == []
    train_batch = lambda i: [  # noqa: E731
        ("on_forward", "train", i),
        ("on_loss_and_meter", "train", i),
        ("on_backward", i),
        ("on_update", i),
        ("on_step", "train", i + 1, i + 1),
    ]
    # VISSL's local_iteration_num: -1, +1 at each phase start and each batch, never reset (trainer_main.py)
    test_batch = lambda i: [("on_forward", "test", 2), ("on_loss_and_meter", "test", 2), ("on_step", "test", 2, 3 + i)]  # noqa: E731
    assert hook.calls == [
        ("on_start",),
        ("on_phase_start", "train"),
        *train_batch(0),
        *train_batch(1),
        ("on_phase_end", "train", True),  # train phase ends in train mode, before the test phase
        ("on_phase_start", "test"),
        *test_batch(1),
        *test_batch(2),
        ("on_phase_end", "test", False),
        ("on_end",),
    ]


def test_classy_vissl_counters_follow_vissl_trainer_loop(tmp_path):
    class Counters(ClassyHook):
        on_start = on_phase_end = on_end = ClassyHook._noop
        seen = []

        def _record(self, task, mount):
            self.seen.append((mount, task.phase_type, task.local_iteration_num, task.num_updates))

        def on_phase_start(self, task):
            self._record(task, "on_phase_start")

        def on_loss_and_meter(self, task):
            self._record(task, "on_loss_and_meter")

        def on_update(self, task):
            self._record(task, "on_update")

        def on_step(self, task):
            self._record(task, "on_step")

    make_trainer(tmp_path, [ClassyAdapter(Counters())]).fit(Net(), loader(18), loader(8, seed=1))
    # VISSL 0.1.6 trainer_main.py / standard_train_step.py: iteration_num starts at -1, +1 at each phase start and
    # after each batch (task.local_iteration_num = iteration_num); num_updates += the global batch size after on_update
    expected, iteration_num, num_updates = [], -1, 0
    for phase, batches in [("train", 5), ("test", 2)] * 2:  # 18 train samples in batches of 4: the last holds 2
        iteration_num += 1
        expected.append(("on_phase_start", phase, iteration_num, num_updates))
        for _ in range(batches):
            expected.append(("on_loss_and_meter", phase, iteration_num, num_updates))
            if phase == "train":
                expected.append(("on_update", phase, iteration_num, num_updates))
                num_updates += 4
            iteration_num += 1
            expected.append(("on_step", phase, iteration_num, num_updates))
    assert Counters.seen == expected


def test_classy_vissl_on_backward_fires_on_every_micro_batch(tmp_path):
    hook = Recorder()
    make_trainer(tmp_path, [ClassyAdapter(hook)], max_epochs=1, accumulate_grad_batches=2, limit_val_batches=0).fit(
        Net(), loader()
    )
    names = [call[0] for call in hook.calls]
    assert names.count("on_backward") == 4 and names.count("on_update") == 2 and names.count("on_step") == 4


def test_classy_vissl_grad_clip_equals_plain_loop(tmp_path):
    model = Net()
    make_trainer(tmp_path, [ClassyAdapter(GradClip(max_norm=0.05))], max_epochs=1, limit_val_batches=0).fit(
        model, loader()
    )
    reference = Net()
    optimizer = reference.configure_optimizers()
    for batch in loader():  # VISSL's step: forward, loss, zero_grad, backward, on_backward, step
        loss = F.cross_entropy(reference(batch["input"]), batch["target"])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(reference.parameters(), max_norm=0.05)
        optimizer.step()
    for (name, ours), theirs in zip(model.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(ours, theirs, msg=name)
    unclipped = Net()
    make_trainer(tmp_path, [], max_epochs=1, limit_val_batches=0).fit(unclipped, loader())
    assert not torch.allclose(unclipped.net[0].weight, model.net[0].weight)


def test_classy_vissl_freeze_parameters_until_iteration(tmp_path):
    hook = FreezeParameters(["net.3.bias"], until=2)
    model = Net()
    start = model.net[3].bias.detach().clone()
    make_trainer(tmp_path, [ClassyAdapter(hook)], max_epochs=1, limit_val_batches=0).fit(model, loader())
    assert [torch.equal(b, start) for b in hook.seen] == [True, True, False, False]


class NanAt(Net):
    def training_step(self, batch, batch_idx):
        result = super().training_step(batch, batch_idx)
        return {**result, "loss": result["loss"] * (float("nan") if batch_idx == 2 else 1.0)}


def test_classy_vissl_check_nan_loss_raises_and_on_exception_fires(tmp_path):
    recorder = Recorder()
    adapter = ClassyAdapter([CheckNanLoss(), recorder])
    model = NanAt()
    with pytest.raises(FloatingPointError, match="iteration=2") as info:
        make_trainer(tmp_path, [adapter], max_epochs=1, limit_val_batches=0).fit(model, loader())
    assert "CheckNanLoss in mount point 'on_loss_and_meter'" in info.value.__notes__[0]
    names = [call[0] for call in recorder.calls]
    assert names.count("on_backward") == 2 and names[-1] == "on_exception"
    assert "training_step" not in vars(model)  # the step wrapper is removed after the failure
