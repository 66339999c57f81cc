"""What ClassyAdapter sets up around VISSL hooks (model lookup, process group, Classy's device, starting from a VISSL
checkpoint), and the errors that name the way out. Runs without VISSL: a hook counts as VISSL's by its module, as
``vissl.hooks.*`` classes do. test_classy_vissl_trainer.py checks the same against VISSL's real trainer."""

from __future__ import annotations

from typing import Any

import classy_vision.generic.distributed_util as classy_dist
import pytest
import torch
from classy_testkit import Net, loader, make_trainer
from classy_vision.hooks import ClassyHook

from lightning_hooks import ClassyAdapter


class Seen(ClassyHook):
    """Records, at each on_forward / on_step, what a VISSL hook reads from the task and the process."""

    on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop
    on_loss_and_meter = on_backward = on_update = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, ...]] = []

    def on_forward(self, task: Any) -> None:
        self.seen.append(("on_forward", type(task.base_model).__name__, task.model is task.base_model,
                          type(task.last_batch.model_output).__name__))  # fmt: skip

    def on_step(self, task: Any) -> None:
        self.seen.append(("on_step", torch.distributed.is_initialized(), classy_dist.get_cuda_device_index()))


class VisslSeen(Seen):
    """The same hook, as a class of VISSL's (the adapter hosts it as VISSL's trainer does)."""


VisslSeen.__module__ = "vissl.hooks.test"


class TrunkHeads(torch.nn.Module):
    """VISSL's model layout: ``trunk`` and ``heads``; one output in a list, as VISSL's models return."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = torch.nn.Linear(4, 4)
        self.heads = torch.nn.ModuleList([torch.nn.Linear(4, 3)])

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [self.heads[0](self.trunk(x))]


class VisslNet(Net):
    """The natural port: the VISSL model in ``self.model``; the step calls it, not ``self``."""

    def __init__(self, models: int = 1) -> None:
        super().__init__(bn=False)
        self.model = TrunkHeads()
        if models > 1:
            self.other = TrunkHeads()

    def _step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        output = self.model(batch["input"])[0]
        return {"loss": torch.nn.functional.cross_entropy(output, batch["target"]), "output": output}


def fit(tmp_path: Any, adapter: ClassyAdapter, model: Net | None = None, **trainer: Any) -> Net:
    model = model or VisslNet()
    make_trainer(tmp_path, [adapter], max_epochs=1, limit_val_batches=0, **trainer).fit(model, loader())
    return model


def test_classy_vissl_host_finds_the_vissl_model_in_an_attribute(tmp_path):
    hook = VisslSeen()
    fit(tmp_path, ClassyAdapter([hook]))
    # task.model / base_model are self.model (trunk + heads), on_forward fires on its forward, the output unwrapped
    assert hook.seen[0] == ("on_forward", "TrunkHeads", True, "Tensor")


def test_classy_vissl_host_model_option_names_the_attribute(tmp_path):
    hook = Seen()
    fit(tmp_path, ClassyAdapter([hook], model="model.trunk"))
    assert hook.seen[0][:3] == ("on_forward", "Linear", True)
    assert hook.seen[0][3] == "Tensor"  # a Classy host passes the trunk's output as it is


def test_classy_vissl_host_model_errors_name_the_way_out(tmp_path):
    with pytest.raises(ValueError, match=r"several VISSL models .*\['model', 'other'\].*model='model'"):
        fit(tmp_path, ClassyAdapter([Seen()]), VisslNet(models=2))
    with pytest.raises(AttributeError, match=r"model='backbone'.*VisslNet has no attribute 'backbone'"):
        fit(tmp_path, ClassyAdapter([Seen()], model="backbone"))


def test_classy_vissl_host_sets_up_and_undoes_the_process_group_and_device(tmp_path):
    vissl, classy = VisslSeen(), Seen()
    fit(tmp_path / "vissl", ClassyAdapter([vissl]))
    fit(tmp_path / "classy", ClassyAdapter([classy]))
    assert set(vissl.seen[1::2]) == {("on_step", True, -1)}  # VISSL's trainer: gloo group, set_cpu_device()
    assert set(classy.seen[1::2]) == {("on_step", False, 0)}  # Classy hooks alone: nothing set up
    assert not torch.distributed.is_initialized() and classy_dist.get_cuda_device_index() == 0


def test_classy_vissl_host_undoes_its_setup_when_the_fit_fails(tmp_path):
    class Fails(VisslSeen):
        def on_step(self, task: Any) -> None:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fit(tmp_path, ClassyAdapter([Fails()]))
    assert not torch.distributed.is_initialized() and classy_dist.get_cuda_device_index() == 0


def test_classy_vissl_host_loss_built_for_another_device_is_refused(tmp_path):
    class GpuLoss(torch.nn.Module):
        use_gpu = True  # as VISSL's SwAV criterion reads Classy's device index when built

    with pytest.raises(RuntimeError, match=r"GpuLoss .* use_gpu=True .* LightningModule.setup\(\) and pass loss="):
        fit(tmp_path, ClassyAdapter([VisslSeen()], loss=GpuLoss()))
    assert not torch.distributed.is_initialized()


def test_classy_vissl_host_loss_by_attribute_name(tmp_path):
    class Reads(VisslSeen):
        def on_step(self, task: Any) -> None:
            self.seen.append(task.loss)

    hook, model = Reads(), VisslNet()
    model.criterion = torch.nn.CrossEntropyLoss()
    fit(tmp_path, ClassyAdapter([hook], loss="criterion"), model)
    assert hook.seen[1] is model.criterion
    with pytest.raises(RuntimeError, match=r"task.loss: ClassyAdapter\(loss='criterion'\) but VisslNet has no attribute"):
        fit(tmp_path / "missing", ClassyAdapter([Reads()], loss="criterion"))


def _vissl_checkpoint(path: Any) -> str:
    """The keys of a checkpoint VISSL's LogLossMetricsCheckpointHook writes (content irrelevant: it is refused)."""
    state = {"train": True, "base_model": {"model": {"trunk": {}, "heads": {}}}, "phase_idx": 0, "train_phase_idx": 0,
             "num_updates": 16, "losses": [], "hooks": {}, "meters": [], "optimizer": {}}  # fmt: skip
    checkpoint = {"phase_idx": 0, "iteration": 4, "loss": {}, "iteration_num": 4, "train_phase_idx": 0,
                  "classy_state_dict": state, "type": "consolidated"}  # fmt: skip
    torch.save(checkpoint, path)
    return str(path)


def test_classy_vissl_host_vissl_checkpoint_errors(tmp_path):
    lightning = tmp_path / "lightning.ckpt"
    torch.save({"pytorch-lightning_version": "2.6.6", "state_dict": {}}, lightning)
    with pytest.raises(ValueError, match=r"lightning.ckpt'\): not a VISSL checkpoint .* trainer.fit\(ckpt_path=...\)"):
        fit(tmp_path, ClassyAdapter([VisslSeen()], vissl_checkpoint=lightning))
    trainer = make_trainer(tmp_path, [ClassyAdapter([VisslSeen()])], max_epochs=1, limit_val_batches=0)
    trainer.fit(VisslNet(), loader())
    trainer.save_checkpoint(tmp_path / "epoch.ckpt")
    vissl = _vissl_checkpoint(tmp_path / "model_phase0.torch")
    adapter = ClassyAdapter([VisslSeen()], vissl_checkpoint=vissl)
    trainer = make_trainer(tmp_path, [adapter], max_epochs=2, limit_val_batches=0)
    with pytest.raises(ValueError, match=r"vissl_checkpoint=.*model_phase0.torch.* and trainer.fit\(ckpt_path="):
        trainer.fit(VisslNet(), loader(), ckpt_path=tmp_path / "epoch.ckpt")


def test_classy_vissl_host_fit_ckpt_path_refuses_a_vissl_checkpoint(tmp_path):
    vissl = _vissl_checkpoint(tmp_path / "checkpoint.torch")
    trainer = make_trainer(tmp_path, [ClassyAdapter([VisslSeen()])], max_epochs=1, limit_val_batches=0)
    with pytest.raises(ValueError, match=r"is a VISSL checkpoint .* ClassyAdapter\(\.\.\., vissl_checkpoint="):
        trainer.fit(VisslNet(), loader(), ckpt_path=vissl)
