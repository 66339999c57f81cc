"""VISSL 0.1.6's own hook classes, unmodified, inside lightning.Trainer through ClassyAdapter.

VISSL and the real torchvision live in ``.venv/vissl-site`` (real_torchvision.py says why), so one subprocess imports
them and runs every scenario below; neither reaches this process. The scenarios return what the real hooks did
(weights, exceptions, files they wrote) and each test compares it with a plain-PyTorch loop run here.
tests/families/classy/test_vissl_trainer.py compares VISSL's hooks with VISSL's own trainer.
"""

from __future__ import annotations

import inspect
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import real_torchvision
import torch
import torch.nn.functional as F
from classy_testkit import DictData, Net, loader, make_trainer
from classy_vision.hooks import ClassyHook
from torch.utils.data import DataLoader, DistributedSampler

from lightning_hooks import ClassyAdapter

pytestmark = pytest.mark.skipif(
    not real_torchvision.available(), reason=f"{real_torchvision.SITE} missing: run `bash scripts/setup.sh test`"
)



# ------------------------------------------------------------------------------------- run in the subprocess
class Calls(ClassyHook):
    """Records mount points, train batch ids per phase and the last layer's bias after each train step."""

    on_start = on_phase_start = on_phase_end = on_end = ClassyHook._noop

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.ids: dict[int, list[int]] = {}
        self.biases: list[torch.Tensor] = []

    def on_backward(self, task: Any) -> None:
        self.calls.append("on_backward")

    def on_update(self, task: Any) -> None:
        self.calls.append("on_update")

    def on_step(self, task: Any) -> None:
        if task.train:
            self.ids.setdefault(task.phase_idx, []).extend(task.last_batch.sample["id"].tolist())
            self.biases.append(task.base_model.net[3].bias.detach().clone())

    def on_exception(self, task: Any) -> None:
        self.calls.append("on_exception")


class NanAt2(Net):
    def training_step(self, batch: dict[str, Any], batch_idx: int) -> dict[str, torch.Tensor]:
        result = super().training_step(batch, batch_idx)
        return {**result, "loss": result["loss"] * (float("nan") if batch_idx == 2 else 1.0)}


def _origin(hook: Any) -> str:
    return inspect.getfile(type(hook))


def _fit(out: Path, hooks: list[Any], model: Net | None = None, epochs: int = 1, val: bool = False, **adapter: Any):
    model = model or Net()
    trainer = make_trainer(out, [ClassyAdapter(hooks, **adapter)], max_epochs=epochs, limit_val_batches=int(val))
    trainer.fit(model, loader(), loader(8, seed=1) if val else None)
    return model


def grad_clip(out: Path) -> dict[str, Any]:
    from vissl.hooks import GradClipHook

    hook = GradClipHook(norm_type=2, max_norm=0.05)
    return {"origin": _origin(hook), "weights": _fit(out, [hook]).state_dict()}


def check_nan_loss(out: Path) -> dict[str, Any]:
    from vissl.hooks import CheckNanLossHook

    hook, calls, model = CheckNanLossHook(), Calls(), NanAt2()
    try:
        _fit(out, [hook, calls], model)
    except FloatingPointError as error:
        return {
            "origin": _origin(hook),
            "error": f"{type(error).__name__}: {error}",
            "notes": getattr(error, "__notes__", []),
            "calls": calls.calls,
            "weights": model.state_dict(),
        }
    return {"origin": _origin(hook), "error": None}


def freeze_parameters(out: Path) -> dict[str, Any]:
    from vissl.config import AttrDict
    from vissl.hooks import FreezeParametersHook

    # VISSL names parameters as its DDP wrapper does ("module." prefix) when world_size == 1.
    config = AttrDict(
        {
            "MODEL": {"TEMP_FROZEN_PARAMS_ITER_MAP": [["module.net.3.bias", 2]]},
            "DISTRIBUTED": {"NUM_NODES": 1, "NUM_PROC_PER_NODE": 1},
        }
    )
    hook, calls = FreezeParametersHook(), Calls()
    model = _fit(out, [hook, calls], config=config)
    return {"origin": _origin(hook), "weights": model.state_dict(), "biases": calls.biases}


def sampler_epoch(out: Path) -> dict[str, Any]:
    from vissl.hooks import SetDataSamplerEpochHook

    hook, calls = SetDataSamplerEpochHook(), Calls()
    data = DictData()
    train = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, num_replicas=1, rank=0, seed=0))
    trainer = make_trainer(out, [ClassyAdapter([hook, calls])], max_epochs=2, limit_val_batches=1)
    trainer.fit(Net(), train, loader(8, seed=1))
    return {"origin": _origin(hook), "ids": calls.ids}


def loss_lr_eta(out: Path) -> dict[str, Any]:
    from vissl.config import AttrDict
    from vissl.hooks import LogLossLrEtaHook

    folder = out / "checkpoints"
    folder.mkdir(parents=True)
    hook = LogLossLrEtaHook(str(folder))  # writes stdout.json; the file is flushed when this process exits
    _fit(out, [hook], epochs=2, config=AttrDict({"LOG_FREQUENCY": 2}))
    return {"origin": _origin(hook), "folder": str(folder)}


def loss_metrics_checkpoint(out: Path) -> dict[str, Any]:
    from torchmetrics.classification import MulticlassAccuracy
    from vissl.config import AttrDict
    from vissl.hooks import LogLossMetricsCheckpointHook

    folder = out / "checkpoints"
    config = AttrDict(
        {
            "CHECKPOINT": {"CHECKPOINT_FREQUENCY": 1, "CHECKPOINT_ITER_FREQUENCY": 3, "BACKEND": "disk"},
            "METERS": {"enable_training_meter": True},
        }
    )
    hook = LogLossMetricsCheckpointHook(world_size=1)
    _fit(
        out,
        [hook],
        epochs=2,
        val=True,
        config=config,
        checkpoint_folder=str(folder),
        loss=torch.nn.CrossEntropyLoss(),
        meters={"accuracy": MulticlassAccuracy(num_classes=3, average="micro")},
    )
    return {"origin": _origin(hook), "folder": str(folder)}


#: resumed_phase: 16 samples in batches of 4; a test phase after each train phase: train phases are VISSL's phases 0, 2
#: and 4
SAMPLES, BATCH, EPOCHS = 16, 4, 3


def resumed_phase(out: Path) -> dict[str, Any]:
    """Fit 3 epochs with VISSL's ``CheckNanLossHook`` (which makes the adapter host VISSL's trainer and does nothing
    on a finite loss), writing a Lightning checkpoint every 2 steps, then resume from step 6's (train phase 2's second
    batch) and from step 8's (its last batch, before its test phase); for each fit, in order: every train iterator's
    sampler epoch when it was made, the sample ids each train step read, each test step's ids and loss, and each
    phase's end (its index, ``train_phase_idx``, ``iteration``); and its final weights."""
    from lightning.pytorch.callbacks import ModelCheckpoint
    from vissl.hooks import CheckNanLossHook

    seen: list[Any] = []

    class Loader(DataLoader):
        def __iter__(self) -> Any:
            seen.append(("iterator", self.sampler.epoch))
            return super().__iter__()

    class Ids(ClassyHook):
        on_start = on_phase_start = on_end = on_backward = on_update = ClassyHook._noop

        def on_step(self, task: Any) -> None:
            ids = task.last_batch.sample["id"].tolist()
            seen.append((task.phase_idx, ids) if task.train else ("test", task.phase_idx, ids,
                                                                   task.last_batch.loss.item()))  # fmt: skip

        def on_phase_end(self, task: Any) -> None:
            seen.append(("end", task.phase_idx, task.train_phase_idx, task.iteration))

    def fit(folder: Path, callbacks: list[Any], ckpt_path: Any = None) -> dict[str, Any]:
        seen.clear()
        data = DictData(SAMPLES)
        train = Loader(data, batch_size=BATCH, sampler=DistributedSampler(data, num_replicas=1, rank=0, seed=0))
        adapter = ClassyAdapter([CheckNanLossHook(), Ids()])
        trainer = make_trainer(folder, [adapter, *callbacks], max_epochs=EPOCHS, limit_val_batches=1,
                               enable_checkpointing=True, use_distributed_sampler=False)  # fmt: skip
        model = Net()
        trainer.fit(model, train, loader(8, seed=1), ckpt_path=ckpt_path)
        return {"seen": list(seen), "weights": model.state_dict()}

    every = ModelCheckpoint(dirpath=out / "ckpt", every_n_train_steps=2, save_top_k=-1, save_on_train_epoch_end=False)
    fresh = fit(out / "fresh", [every])
    resumed = {step: fit(out / f"resumed{step}", [], ckpt_path=next((out / "ckpt").glob(f"*step={step}.ckpt")))
               for step in (6, 8)}  # fmt: skip
    return {"origin": _origin(CheckNanLossHook()), "fresh": fresh, "resumed": resumed[6], "last_batch": resumed[8]}


SCENARIOS: dict[str, Callable[[Path], dict[str, Any]]] = {
    f.__name__: f
    for f in (grad_clip, check_nan_loss, freeze_parameters, sampler_epoch, loss_lr_eta, loss_metrics_checkpoint,
              resumed_phase)  # fmt: skip
}


def child_main(out: str) -> None:
    """The subprocess: the real torchvision and VISSL, ``import vissl.hooks``, every scenario."""
    torch.set_num_threads(1)
    root = Path(out)
    real_torchvision.activate()
    import classy_vision
    import torchvision
    import vissl.hooks  # noqa: F401  (the whole package, as users import it)

    results: dict[str, Any] = {"classy_vision": classy_vision.__file__, "torchvision": torchvision.__file__}

    for name, scenario in SCENARIOS.items():
        try:
            results[name] = scenario(root / name)
        except Exception:  # noqa: BLE001  (reported by the scenario's test)
            results[name] = {"failed": traceback.format_exc()}
    torch.save(results, root / "results.pt")


# ------------------------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def vissl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return real_torchvision.run_child("test_vissl_real", tmp_path_factory.mktemp("vissl_real"), timeout=300,
                                  folder=Path(__file__).resolve().parent)


def scenario(vissl: dict[str, Any], name: str) -> dict[str, Any]:
    """A scenario's results, after checking it ran VISSL's own hook module."""
    result = real_torchvision.scenario_result(vissl, name)
    assert Path(result["origin"]).is_relative_to(real_torchvision.SITE / "vissl" / "hooks"), result["origin"]
    return result


def plain_loop(epochs: int = 1, steps: int | None = None, on_backward: Callable[[Net, int], None] | None = None):
    """VISSL's train step in plain PyTorch (forward, loss, zero_grad, backward, on_backward, step), with the test
    phase after every train phase. Returns the model and per-step losses/weights and per-phase accuracies; with
    ``steps``, the loop stops after the forward of the batch after ``steps`` optimizer steps."""
    model = Net()
    optimizer = model.configure_optimizers()
    record: dict[str, list[Any]] = {"losses": [], "weights": [], "train_acc": [], "test_acc": []}
    for _ in range(epochs):
        model.train()
        correct = seen = 0
        for batch in loader():
            out = model(batch["input"])
            loss = F.cross_entropy(out, batch["target"])
            if steps is not None and len(record["losses"]) == steps:  # the failing step: forward and loss only
                return model, record
            correct, seen = correct + int((out.argmax(1) == batch["target"]).sum()), seen + len(out)
            optimizer.zero_grad()
            loss.backward()
            if on_backward is not None:
                on_backward(model, len(record["losses"]))
            optimizer.step()
            record["losses"].append(loss.item())
            record["weights"].append({k: v.clone() for k, v in model.state_dict().items()})
        record["train_acc"].append(correct / seen)
        model.eval()
        with torch.no_grad():
            batch = next(iter(loader(8, seed=1)))
            record["test_acc"].append((model(batch["input"]).argmax(1) == batch["target"]).float().mean().item())
    return model, record


def assert_weights(ours: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> None:
    assert ours.keys() == theirs.keys()
    for name, value in ours.items():
        torch.testing.assert_close(value, theirs[name], msg=name)


def test_classy_vissl_real_imports_the_real_torchvision_and_classy(vissl):
    import classy_vision

    assert Path(vissl["torchvision"]).is_relative_to(real_torchvision.SITE)
    assert vissl["classy_vision"] == classy_vision.__file__  # the installed classy-vision 0.7.0, not VISSL's bundled one
    assert "vissl" not in sys.modules and "torchvision" not in sys.modules  # the subprocess kept them out of here


def test_classy_vissl_real_grad_clip_hook_equals_clip_grad_norm(vissl):
    result = scenario(vissl, "grad_clip")

    def clip(model: Net, step: int) -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05, norm_type=2)

    assert_weights(result["weights"], plain_loop(on_backward=clip)[0].state_dict())
    unclipped = plain_loop()[0].state_dict()
    assert not torch.allclose(result["weights"]["net.0.weight"], unclipped["net.0.weight"])


def test_classy_vissl_real_check_nan_loss_hook_raises_and_on_exception_fires(vissl):
    result = scenario(vissl, "check_nan_loss")
    assert result["error"].startswith("FloatingPointError: Infinite Loss or NaN at iteration=2. Loss value: nan")
    assert "CheckNanLossHook in mount point 'on_loss_and_meter'" in result["notes"][0]
    assert result["calls"] == ["on_backward", "on_update"] * 2 + ["on_exception"]
    assert_weights(result["weights"], plain_loop(steps=2)[0].state_dict())  # the NaN step never reached the optimizer


def test_classy_vissl_real_freeze_parameters_hook_until_iteration(vissl):
    result = scenario(vissl, "freeze_parameters")

    def freeze(model: Net, step: int) -> None:
        if step < 2:
            model.net[3].bias.grad = None

    assert_weights(result["weights"], plain_loop(on_backward=freeze)[0].state_dict())
    initial = Net().net[3].bias
    assert [torch.equal(bias, initial) for bias in result["biases"]] == [True, True, False, False]


def test_classy_vissl_real_set_data_sampler_epoch_hook_seeds_by_phase_idx(vissl):
    result = scenario(vissl, "sampler_epoch")

    def order(epoch: int) -> list[int]:
        sampler = DistributedSampler(DictData(), num_replicas=1, rank=0, seed=0)
        sampler.set_epoch(epoch)
        return [100 + i for i in sampler]

    # train phases are phase_idx 0 and 2 (a test phase in between); Lightning alone would use epoch 1
    assert result["ids"] == {0: order(0), 2: order(2)}
    assert order(2) != order(1)


def test_classy_vissl_real_log_loss_lr_eta_hook_writes_stdout_json(vissl):
    result = scenario(vissl, "loss_lr_eta")
    rows = [json.loads(line) for line in (Path(result["folder"]) / "stdout.json").read_text().splitlines()]
    losses = plain_loop(epochs=2)[1]["losses"]
    # on_update runs before iteration += 1; VISSL logs iteration 1, multiples of LOG_FREQUENCY and of 5
    assert [row["iter"] for row in rows] == [0, 1, 2, 4, 5, 6]
    for row in rows:
        assert row["ep"] == row["iter"] // 4 and row["lr"] == 0.1 and row["Rank"] == 0
        assert row["loss"] == pytest.approx(losses[row["iter"]], abs=1e-5)
    assert rows[1]["max_iterations"] == 8


def test_classy_vissl_real_log_loss_metrics_checkpoint_hook_writes_vissl_checkpoints(vissl):
    result = scenario(vissl, "loss_metrics_checkpoint")
    folder = Path(result["folder"])
    _, record = plain_loop(epochs=2)
    # iteration_num is VISSL's local_iteration_num: -1, +1 at each phase start and batch, never reset (trainer_main.py);
    # phases: train 0 (4 batches) -> 0..4, test (1 batch) -> 5..6, train 2 -> 7..11
    names = {
        "model_iteration3.torch": (3, -1, -1, 3),  # steps, phase_idx, train_phase_idx, iteration_num
        "model_phase0.torch": (4, 0, 0, 4),
        "model_iteration6.torch": (6, 1, 0, 9),
        "model_final_checkpoint_phase1.torch": (8, 2, 1, 11),
    }
    assert sorted(p.name for p in folder.glob("*.torch")) == sorted([*names, "checkpoint.torch"])
    assert (folder / "checkpoint.torch").resolve().name == "model_final_checkpoint_phase1.torch"
    for name, (steps, phase_idx, train_phase_idx, iteration_num) in names.items():
        ckpt = torch.load(folder / name, weights_only=False)
        assert (ckpt["iteration"], ckpt["phase_idx"], ckpt["train_phase_idx"]) == (steps, phase_idx, train_phase_idx)
        assert ckpt["iteration_num"] == iteration_num and ckpt["loss"] == {} and ckpt["type"] == "consolidated"
        state = ckpt["classy_state_dict"]
        assert (state["phase_idx"], state["train_phase_idx"]) == (phase_idx, train_phase_idx)
        # VISSL's layout: a model without trunk/heads is saved whole as the trunk
        assert state["base_model"]["model"]["heads"] == {} and "meta" in state["base_model"]
        assert_weights(state["base_model"]["model"]["trunk"], record["weights"][steps - 1])
    rows = [json.loads(line) for line in (folder / "metrics.json").read_text().splitlines()]
    assert [(r["iteration"], r["phase_idx"], r["train_phase_idx"]) for r in rows] == [
        (4, 0, 0), (4, 1, 0), (8, 2, 1), (8, 3, 1)
    ]
    expected = [("train", record["train_acc"][0]), ("test", record["test_acc"][0])]
    expected += [("train", record["train_acc"][1]), ("test", record["test_acc"][1])]
    for row, (phase, accuracy) in zip(rows, expected):
        assert row[f"{phase}_accuracy"] == {"accuracy": pytest.approx(accuracy)}


def test_a_phase_resumed_inside_it_from_a_lightning_checkpoint_reads_vissls_order_for_that_phase(vissl):
    """The epoch a fit resumes into from a Lightning checkpoint written inside it (the user's
    ``ModelCheckpoint(every_n_train_steps)``), with VISSL's ``CheckNanLossHook``: Lightning 2.6 starts it without
    ``on_train_epoch_start``, and the core's deferred train iterator (``LegacyHookAdapter.start_skipped_train_epoch``)
    reopens the phase and makes its iterator where VISSL's trainer makes one (``recreate_data_iterator``: the sampler's
    epoch set to the phase's index first), before the first batch is drawn. The uninterrupted fit reads phases 0, 2
    and 4 in VISSL's orders; resumed after train phase 2's second batch, that phase's iterator is made with the
    sampler at the phase's index (not Lightning's epoch 1, nor the next phase's 3), before its first batch (Lightning
    restarts the loader: its last 2 batches are the order's first 2), then phase 4's at 4."""
    result = scenario(vissl, "resumed_phase")

    def batches(phase_idx: int, count: int = SAMPLES // BATCH) -> list[Any]:
        sampler = DistributedSampler(DictData(SAMPLES), num_replicas=1, rank=0, seed=0)
        sampler.set_epoch(phase_idx)
        order = [100 + i for i in sampler]  # the sample ids VISSL's trainer reads in that phase
        return [(phase_idx, order[i : i + BATCH]) for i in range(0, count * BATCH, BATCH)]

    assert train_reads(result["fresh"]["seen"]) == [("iterator", 0), *batches(0), ("iterator", 2), *batches(2),
                                                    ("iterator", 4), *batches(4)]  # fmt: skip
    assert train_reads(result["resumed"]["seen"]) == [("iterator", 2), *batches(2, count=2), ("iterator", 4), *batches(4)]


def train_reads(seen: list[Any]) -> list[Any]:
    """``resumed_phase``'s record of a fit without its test steps and phase ends: the train iterators and batches."""
    return [entry for entry in seen if entry[0] not in ("test", "end")]


def test_a_fit_resumed_from_a_train_phases_last_batch_runs_its_test_phase_first_as_vissl(vissl):
    """A Lightning checkpoint written at train phase 2's last batch (the user's ``ModelCheckpoint(every_n_train_steps)``
    writes after the adapter's ``on_train_batch_end``, which ended the phase: ``on_phase_end`` ran, test phase 3 not
    yet), resumed with VISSL's ``CheckNanLossHook``. VISSL's trainer resumes a train phase's end (its checkpoint's
    ``phase_idx``) at the next phase, the pending test phase (``while phase_idx + 1 < len(task.phases)``), so the
    resumed fit goes on as the uninterrupted one: test phase 3 with the checkpoint's weights (the same loss), then train
    phase 4, its iterator made with the sampler at the phase's index (VISSL's order), then test phase 5; every phase
    end's ``train_phase_idx`` and ``iteration``, and the final weights, bitwise. (Lightning 2.6 restored as written goes
    on with the next epoch: no test phase 3, a train phase 3 read in epoch 3's order.)"""
    result = scenario(vissl, "resumed_phase")
    fresh, resumed = result["fresh"]["seen"], result["last_batch"]["seen"]
    ended = fresh.index(("end", 2, 1, 8))  # train phase 2's end: the checkpoint's last step, 8
    assert resumed[:2] == [("test", 3, [100, 101, 102, 103], fresh[ended + 1][3]), ("end", 3, 1, 8)]
    assert resumed[2] == ("iterator", 4) and ("end", 5, 2, 12) in resumed
    assert resumed == fresh[ended + 1 :]
    weights = result["last_batch"]["weights"], result["fresh"]["weights"]
    assert weights[0].keys() == weights[1].keys() and all(torch.equal(v, weights[1][k]) for k, v in weights[0].items())
