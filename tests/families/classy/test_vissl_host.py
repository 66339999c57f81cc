"""What ClassyAdapter sets up around VISSL hooks (model lookup, process group, Classy's device), starting from a
Classy or a VISSL checkpoint with trainer.fit(ckpt_path=...), and the errors that name the way out. Runs without
VISSL: a hook counts as VISSL's by its module, as ``vissl.hooks.*`` classes do. tests/families/classy/test_vissl_trainer.py checks
the same against VISSL's real trainer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import classy_vision.generic.distributed_util as classy_dist
import pytest
import torch
from classy_testkit import Net, loader, make_trainer
from classy_vision.hooks import CheckpointHook, ClassyHook

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
    with pytest.raises(ValueError, match=r"several VISSL models .*\('model', 'other'\).*ClassyAdapter\(\.\.\., model='model'\)"):
        fit(tmp_path, ClassyAdapter([Seen()]), VisslNet(models=2))
    with pytest.raises(AttributeError, match=r"ClassyAdapter\(model='backbone'\): VisslNet has no submodule 'backbone'"):
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


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


def test_classy_vissl_host_sets_the_rank_variables_for_the_run_and_restores_them(tmp_path, monkeypatch):
    class Ranks(VisslSeen):
        def on_step(self, task: Any) -> None:  # VISSL's get_machine_local_and_dist_rank() reads them
            self.seen.append(tuple(os.environ.get(name) for name in RANK_VARIABLES))

    class Fails(VisslSeen):
        def on_step(self, task: Any) -> None:
            raise RuntimeError("boom")

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hook = Ranks()
    fit(tmp_path / "ok", ClassyAdapter([hook]))
    assert set(hook.seen[1::2]) == {("0", "0", "1")}
    assert [name for name in RANK_VARIABLES if name in os.environ] == []
    with pytest.raises(RuntimeError, match="boom"):
        fit(tmp_path / "fails", ClassyAdapter([Fails()]))
    assert [name for name in RANK_VARIABLES if name in os.environ] == []


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


class VisslCheckpointWriter(ClassyHook):
    """Writes what VISSL's LogLossMetricsCheckpointHook writes: ``model_phase{N}.torch`` at each train phase end and,
    after train step ``iteration``, ``model_iteration{N}.torch`` with the counters of the phase before."""

    on_start = on_phase_start = on_forward = on_loss_and_meter = on_backward = on_update = on_end = ClassyHook._noop

    def __init__(self, folder: Path, iteration: int) -> None:
        super().__init__()
        self.folder, self.iteration = folder, iteration

    def on_step(self, task: Any) -> None:
        if task.train and task.iteration == self.iteration:
            self._write(task, f"model_iteration{task.iteration}.torch", before=1)

    def on_phase_end(self, task: Any) -> None:
        if task.train:
            self._write(task, f"model_phase{task.train_phase_idx}.torch", before=0)

    def _write(self, task: Any, name: str, before: int) -> None:
        state = task.get_classy_state(deep_copy=True)
        state["phase_idx"] -= before
        state["train_phase_idx"] -= before
        checkpoint = {"phase_idx": state["phase_idx"], "iteration": task.iteration, "loss": task.loss.state_dict(),
                      "iteration_num": task.local_iteration_num, "train_phase_idx": state["train_phase_idx"],
                      "classy_state_dict": state, "type": "consolidated"}  # fmt: skip
        torch.save(checkpoint, self.folder / name)


VisslCheckpointWriter.__module__ = "vissl.hooks.test"


class SeenLoss(torch.nn.Module):
    """A loss with state (as MoCo's queue): how many samples it has trained on. Classy saves a loss's state through
    ``get_classy_state`` (a ``ClassyLoss``'s is its ``state_dict``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))

    def get_classy_state(self) -> dict[str, Any]:
        return self.state_dict()

    def set_classy_state(self, state: dict[str, Any]) -> None:
        self.load_state_dict(state)

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.seen += len(target)
        return torch.nn.functional.cross_entropy(output, target)


class LossNet(VisslNet):
    """VisslNet with its loss module in ``self.criterion`` (``ClassyAdapter(loss="criterion")``)."""

    def __init__(self) -> None:
        super().__init__()
        self.criterion = SeenLoss()

    def _step(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        output = self.model(batch["input"])[0]
        return {"loss": self.criterion(output, batch["target"]), "output": output}


def legacy_run(folder: Path, kind: str, ckpt_path: Any = None, **trainer: Any) -> dict[str, Any]:
    """A 3-epoch fit of 4 batches an epoch (validating after each) whose Classy CheckpointHook or VISSL-style writer
    saves every train phase into ``folder`` (VISSL's also step 6, inside the second); from ``ckpt_path`` when given.
    What it ran and ended with."""
    folder.mkdir()
    classy = kind == "classy"
    writer = CheckpointHook(str(folder), phase_types=["train"]) if classy else VisslCheckpointWriter(folder, 6)
    adapter, model = ClassyAdapter([writer], loss="criterion"), LossNet()
    epochs: list[int] = []
    model.on_train_epoch_start = lambda: epochs.append(model.current_epoch)
    trainer = make_trainer(folder, [adapter], max_epochs=3, **trainer)
    trainer.fit(model, loader(), loader(n=4), ckpt_path=ckpt_path)
    task = adapter.task
    return {
        "epochs": epochs, "global_step": trainer.global_step, "weights": model.state_dict(),
        "counters": (task.phase_idx, task.train_phase_idx, task.num_updates, task.iteration, task.num_train_phases),
        "optimizer": trainer.optimizers[0].state_dict()["state"],
    }  # fmt: skip


@pytest.mark.parametrize(("kind", "file"), [("classy", "model_phase-0_end.torch"), ("vissl", "model_phase0.torch")])
def test_classy_vissl_host_fit_ckpt_path_continues_a_classy_or_a_vissl_run(tmp_path, kind, file):
    """One way for both: trainer.fit(ckpt_path=<the legacy file>), max_epochs counting every train phase (the legacy
    num_epochs), continues the run as if uninterrupted: epochs, global_step, weights, optimizer, the loss module's
    state and the task's counters."""
    full = legacy_run(tmp_path / "full", kind)
    resumed = legacy_run(tmp_path / "resumed", kind, ckpt_path=tmp_path / "full" / file)
    assert (full["epochs"], resumed["epochs"]) == ([0, 1, 2], [1, 2])
    assert resumed["global_step"] == full["global_step"] == 12
    # the file was written at the end of train phase 0: epoch 0's test phase runs first (phase_idx counts it)
    assert resumed["counters"] == full["counters"] == (5, 2, 48, 12, 3)
    assert_same_tensors(resumed["weights"], full["weights"])  # criterion.seen included: 48 samples
    assert_same_tensors(resumed["optimizer"], full["optimizer"])


def test_classy_vissl_host_classy_checkpoint_at_a_train_phase_end_without_validation_warns(tmp_path):
    legacy_run(tmp_path / "full", "classy")
    with pytest.warns(UserWarning, match=r"end of train phase 0, and Classy would run that epoch's test phase first, "
                                         r"but this fit does not validate"):  # fmt: skip
        resumed = legacy_run(tmp_path / "resumed", "classy", ckpt_path=tmp_path / "full" / "model_phase-0_end.torch",
                             limit_val_batches=0)  # fmt: skip
    assert resumed["counters"][:2] == (3, 2)  # epoch 0's test phase counted as done: 2 train phases after it


def test_classy_vissl_host_vissl_checkpoint_inside_a_phase_warns(tmp_path):
    legacy_run(tmp_path / "full", "vissl", limit_val_batches=0)
    with pytest.warns(UserWarning, match=r"model_iteration6.torch was written at iteration 6, inside train phase 1, "
                                         r"and the train loader's sampler .* cannot skip the batches already trained: "
                                         r"Lightning starts that phase from its first batch"):  # fmt: skip
        resumed = legacy_run(tmp_path / "resumed", "vissl", ckpt_path=tmp_path / "full" / "model_iteration6.torch",
                             limit_val_batches=0)  # fmt: skip
    assert resumed["epochs"] == [1, 2] and resumed["counters"][1:4] == (2, 48 + 8, 14)


def test_classy_vissl_host_validate_ckpt_path_loads_only_the_weights(tmp_path):
    legacy_run(tmp_path / "full", "vissl")
    model, adapter = LossNet(), ClassyAdapter([VisslSeen()], loss="criterion")
    make_trainer(tmp_path, [adapter]).validate(model, loader(n=4), ckpt_path=tmp_path / "full" / "model_phase1.torch")
    saved = torch.load(tmp_path / "full" / "model_phase1.torch", weights_only=True)["classy_state_dict"]
    assert_same_tensors(model.model.state_dict(), {f"{part}.{k}": v for part in ("trunk", "heads")
                                                   for k, v in saved["base_model"]["model"][part].items()})  # fmt: skip
    assert int(model.criterion.seen) == 0 and adapter.task.phase_idx == 0  # no loss state, a test-only task


def test_classy_vissl_host_vissl_checkpoint_errors(tmp_path):
    sharded = tmp_path / "model_phase0.torch"
    torch.save({"type": "shard_list", "shards": ["model_phase0_shard0.torch"]}, sharded)
    trainer = make_trainer(tmp_path, [ClassyAdapter([VisslSeen()])], max_epochs=1, limit_val_batches=0)
    with pytest.raises(ValueError, match=r"model_phase0.torch is a sharded VISSL checkpoint .* Resume it with VISSL's"):
        trainer.fit(VisslNet(), loader(), ckpt_path=sharded)
    broken = tmp_path / "vissl_ckpt"  # VISSL's link with a relative CHECKPOINT.DIR: vissl_ckpt/vissl_ckpt/...
    broken.mkdir()
    (broken / "checkpoint.torch").symlink_to("vissl_ckpt/model_phase0.torch")
    with pytest.raises(FileNotFoundError, match=r"checkpoint.torch links to 'vissl_ckpt/model_phase0.torch', which "
                                                r"does not exist.* Pass the checkpoint file itself"):  # fmt: skip
        trainer.fit(VisslNet(), loader(), ckpt_path=broken)
    legacy_run(tmp_path / "full", "vissl")
    with pytest.warns(UserWarning, match=r"holds the loss module's state \(seen\), .* ClassyAdapter\(\.\.\., loss="):
        make_trainer(tmp_path, [ClassyAdapter([VisslSeen()])], max_epochs=3, limit_val_batches=0).fit(
            VisslNet(), loader(), ckpt_path=tmp_path / "full" / "model_phase0.torch")  # fmt: skip


def assert_same_tensors(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for key, value in theirs.items():
        if isinstance(value, dict):
            assert_same_tensors(ours[key], value)
        else:
            torch.testing.assert_close(ours[key], value, rtol=0, atol=0, msg=key)


def test_classy_vissl_host_hooks_see_their_environment_in_on_exception_and_the_process_after_it(tmp_path, monkeypatch):
    """The process group and rank variables are run-scoped patches of the hooks' environment: a failure's
    ``on_exception`` hooks still run in it (as inside VISSL's trainer loop), and the process has its own back after."""

    class Fails(VisslSeen):
        def on_step(self, task: Any) -> None:
            raise RuntimeError("boom")

        def on_exception(self, task: Any) -> None:
            self.seen.append((torch.distributed.is_initialized(), os.environ.get("RANK"), os.environ.get("WORLD_SIZE")))

    Fails.__module__ = VisslSeen.__module__  # a VISSL hook: the adapter sets up VISSL's process group
    monkeypatch.setenv("RANK", "7")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    hook = Fails()
    with pytest.raises(RuntimeError, match="boom"):
        fit(tmp_path, ClassyAdapter([hook]))
    assert hook.seen[-1] == (True, "0", "1")
    assert not torch.distributed.is_initialized() and os.environ["RANK"] == "7" and "WORLD_SIZE" not in os.environ
