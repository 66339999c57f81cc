"""``core/trainer_options.py``: ``--trainer.KEY VALUE`` / ``--trainer-config`` typed by ``Trainer.__init__``, the
contradictions with what a legacy config decides, and the ``--logger`` loggers on local stores (issue #34). The
families' train commands are tested with real configs in ``tests/families/*/test_loggers.py``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

import pytest

from lightning_hooks.core.lightning_api import pl
from lightning_hooks.core.trainer_flags import add_arguments, split_argv
from lightning_hooks.core.trainer_options import ANY, Owned, TrainerOptionError, TrainerRequest, build_loggers


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    group = p.add_argument_group("Lightning")
    group.add_argument("--devices", default="auto")
    group.add_argument("--precision", default=None)
    add_arguments(group)
    return p


def request(argv: list[str]) -> TrainerRequest:
    argv, trainer_argv = split_argv(argv)
    p = parser()
    return TrainerRequest.from_args(p.parse_args(argv), trainer_argv, parser=p)


def test_split_argv_takes_the_trainer_items_and_their_values() -> None:
    rest, trainer = split_argv(["cfg.py", "--trainer.max_steps", "-1", "--work-dir", "w", "--trainer.callbacks+=X",
                                "--trainer.callbacks.monitor=loss", "--trainer.fast_dev_run", "--amp"])  # fmt: skip
    assert rest == ["cfg.py", "--work-dir", "w", "--amp"]
    assert trainer == ["--trainer.max_steps", "-1", "--trainer.callbacks+=X", "--trainer.callbacks.monitor=loss",
                       "--trainer.fast_dev_run"]  # fmt: skip


def test_options_are_typed_by_the_trainer_signature_and_the_yaml_comes_first(tmp_path: Path) -> None:
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor

    yaml = tmp_path / "trainer.yaml"
    yaml.write_text("max_epochs: 3\nlog_every_n_steps: 7\ncallbacks:\n"
                    "  - class_path: lightning.pytorch.callbacks.LearningRateMonitor\n")  # fmt: skip
    asked = request(["c.py", "--trainer-config", str(yaml), "--trainer.log_every_n_steps", "2",
                     "--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=loss",
                     "--trainer.max_time", "00:01:00:00"])  # fmt: skip
    options = asked.options
    assert (options["max_epochs"], options["log_every_n_steps"], options["max_time"]) == (3, 2, "00:01:00:00")
    assert [type(cb) for cb in options["callbacks"]] == [LearningRateMonitor, EarlyStopping]
    assert options["callbacks"][1].monitor == "loss"
    assert asked.origins["log_every_n_steps"] == "--trainer.log_every_n_steps 2"
    assert asked.origins["max_epochs"] == f"max_epochs: in --trainer-config {yaml}"


@pytest.mark.parametrize(("argv", "message"), [
    (["--trainer.max_epocs", "3"], ["--trainer.max_epocs", "max_epochs"]),
    (["--trainer.max_epochs", "three"], ["--trainer.max_epochs three", "int"]),
    (["--trainer.callbacks+=NoSuchCallback"], ["NoSuchCallback"]),
])  # fmt: skip
def test_a_bad_option_is_an_error_naming_it(argv: list[str], message: list[str]) -> None:
    with pytest.raises(TrainerOptionError) as err:
        request(["c.py", *argv])
    for part in message:
        assert part in str(err.value)


OWNED = {"max_epochs": Owned(2, "train_cfg.max_epochs=2", "use --cfg-options"),
         "check_val_every_n_epoch": Owned(1, "train_cfg.val_interval=1"),
         "gradient_clip_val": Owned(None, "optim_wrapper.clip_grad"), "precision": Owned(ANY, "--amp")}  # fmt: skip


@pytest.mark.parametrize(("argv", "sides"), [
    (["--trainer.max_epochs", "5"], ["--trainer.max_epochs 5 contradicts train_cfg.max_epochs=2: use --cfg-options"]),
    (["--trainer.max_steps", "4"], ["--trainer.max_steps 4 contradicts train_cfg.max_epochs=2: use --cfg-options"]),
    (["--trainer.fast_dev_run", "true"], ["--trainer.fast_dev_run true contradicts train_cfg.max_epochs=2"]),
    (["--trainer.val_check_interval", "2"], ["--trainer.val_check_interval 2 contradicts train_cfg.val_interval=1"]),
    (["--trainer.gradient_clip_val", "1"], ["--trainer.gradient_clip_val 1", "optim_wrapper.clip_grad"]),
    (["--trainer.precision", "32"], ["--trainer.precision 32", "--amp"]),
    (["--devices", "1", "--trainer.devices", "2"], ["--trainer.devices 2 contradicts --devices 1"]),
    (["--precision", "bf16-mixed", "--trainer.precision", "32"], ["--trainer.precision 32", "--precision bf16-mixed"]),
    (["--logger", "csv", "--trainer.logger", "false"], ["--trainer.logger false contradicts --logger csv"]),
])  # fmt: skip
def test_an_option_decided_elsewhere_is_refused_naming_both_sides(tmp_path: Path, argv: list[str],
                                                                  sides: list[str]) -> None:  # fmt: skip
    owned = {k: v for k, v in OWNED.items() if not (k == "precision" and "--precision" in argv)}
    with pytest.raises(TrainerOptionError) as err:
        request(["c.py", *argv]).resolve({}, owned, save_dir=str(tmp_path), name="c")
    for side in sides:
        assert side in str(err.value)


def test_resolve_keeps_the_config_s_values_and_adds_the_asked_ones(tmp_path: Path) -> None:
    asked = request(["c.py", "--trainer.max_epochs", "2", "--trainer.callbacks+=ModelCheckpoint", "--devices", "1",
                     "--trainer.accumulate_grad_batches", "4"])  # fmt: skip
    adapter = object()
    options = asked.resolve({"logger": False, "enable_checkpointing": False, "deterministic": None},
                            {"max_epochs": Owned(2, "the loop")}, save_dir=str(tmp_path), name="c",
                            callbacks=[adapter])  # fmt: skip
    assert options["max_epochs"] == 2 and options["accumulate_grad_batches"] == 4 and options["logger"] is False
    assert options["callbacks"][0] is adapter and isinstance(options["callbacks"][1], pl.callbacks.ModelCheckpoint)
    assert options["enable_checkpointing"] is True  # a ModelCheckpoint asked for: Lightning's checkpoints on
    assert "deterministic" not in options


def test_loggers_write_under_the_save_dir_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_MODE", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        loggers = {type(lg).__name__: lg for lg in build_loggers(["csv", "tensorboard", "wandb", "mlflow"], str(tmp_path), "run")}
    assert not [w for w in seen if issubclass(w.category, FutureWarning)]  # MLflow 3.x: the file: store is deprecated
    assert Path(loggers["CSVLogger"].log_dir).parent == tmp_path / "lightning_logs"
    assert Path(loggers["TensorBoardLogger"].log_dir).parent == tmp_path / "tensorboard"
    assert loggers["WandbLogger"]._offline and loggers["WandbLogger"].save_dir == str(tmp_path)
    assert "anonymous" not in loggers["WandbLogger"]._wandb_init  # wandb warns about anonymous=None on every run
    assert loggers["MLFlowLogger"]._tracking_uri == f"file:{tmp_path / 'mlruns'}"
    assert loggers["MLFlowLogger"]._experiment_name == "run"
    monkeypatch.setenv("WANDB_API_KEY", "x")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    wandb, mlflow = build_loggers(["wandb", "mlflow"], str(tmp_path), "run")
    assert not wandb._offline and mlflow._tracking_uri == "http://tracking:5000"


def test_the_mlflow_store_is_made_by_rank_0_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On another rank the logger's ``MlflowClient`` is made when used, not when built: building it makes a ``file:``
    store, which ranks started before the Trainer (torchrun, mmcv's processes) made beside rank 0 (found by
    tests/integration/ddp/test_write_audit.py on mmcv 1.x)."""
    from lightning_hooks.core.lightning_api import rank_zero_only

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    (logger,) = build_loggers(["mlflow"], str(tmp_path / "rank1"), "run")
    assert not (tmp_path / "rank1").exists() and logger.save_dir == str(tmp_path / "rank1" / "mlruns")
    assert type(logger.experiment).__name__ == "_DummyExperiment"  # Lightning's on another rank: no client made
    assert not (tmp_path / "rank1").exists()
    assert logger._mlflow_client.tracking_uri == f"file:{tmp_path / 'rank1' / 'mlruns'}"  # made when used
    assert (tmp_path / "rank1" / "mlruns").is_dir()
    monkeypatch.setattr(rank_zero_only, "rank", 0)
    build_loggers(["mlflow"], str(tmp_path / "rank0"), "run")
    assert (tmp_path / "rank0" / "mlruns").is_dir()  # rank 0 makes the store when it builds the logger


def test_a_request_for_mlflow_imports_it_before_a_family_opens_its_log_file(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing mlflow closes every logging handler of the process (``logging.config.dictConfig``), and a
    ``FileHandler`` in mode ``w`` (OpenMMLab 1.x's ``{timestamp}.log``) takes no line once closed: reading
    ``--logger mlflow`` imports it, so the log file a family opens after reading its command line, before the
    Trainer's loggers are built, keeps its lines. A request without mlflow does not import it (it is heavy).
    Mutation: ``from_args`` without ``_import_mlflow_first`` leaves the log file empty."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    imported = {name: module for name, module in sys.modules.items() if name.partition(".")[0] == "mlflow"}
    for name in imported:  # as in a fresh process: the first import of mlflow is still to come
        del sys.modules[name]
    log = logging.getLogger("lightning_hooks.test_run_log")
    try:
        request(["cfg.py", "--logger", "csv"])
        assert "mlflow" not in sys.modules
        asked = request(["cfg.py", "--logger", "mlflow"])
        handler = logging.FileHandler(tmp_path / "run.log", mode="w")  # the family's run log, opened after that
        log.addHandler(handler)
        asked.resolve({}, {}, save_dir=str(tmp_path), name="run")  # the Trainer's loggers, MLFlowLogger among them
        log.warning("after the loggers")
        log.removeHandler(handler)
        handler.close()
    finally:
        for name in [name for name in sys.modules if name.partition(".")[0] == "mlflow"]:
            del sys.modules[name]
        sys.modules.update(imported)  # the modules other tests of this process hold
    assert (tmp_path / "run.log").read_text() == "after the loggers\n"


def test_a_run_with_the_mlflow_logger_leaves_mlflows_tracking_uri_as_it_was(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Lightning's ``MLFlowLogger`` sets MLflow's tracking URI to the run's store, which MLflow exports as
    ``MLFLOW_TRACKING_URI``: after the run it is as before, so a later run in the process (a notebook) makes its own
    store under its own work dir rather than logging into this run's."""
    from lightning.pytorch.demos.boring_classes import BoringModel

    from lightning_hooks.core.trainer_options import TrackingUriRestored

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for run in ("first", "second"):
        options = request(["cfg.py", "--logger", "mlflow"]).resolve({}, {}, save_dir=str(tmp_path / run), name=run)
        assert any(isinstance(cb, TrackingUriRestored) for cb in options["callbacks"])
        pl.Trainer(max_steps=1, limit_val_batches=0, enable_progress_bar=False, enable_model_summary=False,
                   enable_checkpointing=False, **options).fit(BoringModel())  # fmt: skip
        assert "MLFLOW_TRACKING_URI" not in os.environ
        assert (tmp_path / run / "mlruns").is_dir()
    import mlflow

    mlflow.set_tracking_uri(None)  # MLflow's own default again, as before this test


@pytest.mark.parametrize("fails", [False, True], ids=["finished", "failed"])
def test_the_wandb_run_of_a_wandb_logger_ends_with_the_fit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          fails: bool) -> None:  # fmt: skip
    """The W&B run that ``--logger wandb`` starts ends with the fit (exit code 0; 1 when the fit fails), as a W&B
    user's script ends it: left to wandb's exit hook, a torchrun agent's ``os.killpg`` of a finished rank could take
    wandb's service before it wrote the exit record, and a later run in the process found this one open."""
    pytest.importorskip("wandb", reason="wandb is in the test extra (scripts/setup.sh test)")
    import wandb
    from lightning.pytorch.demos.boring_classes import BoringModel
    from tracker_stores import finished_records

    from lightning_hooks.core.trainer_options import WandbRunsFinished

    class Failing(BoringModel):
        def training_step(self, batch, batch_idx):  # type: ignore[no-untyped-def]
            raise RuntimeError("the user's step fails")

    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    options = request(["cfg.py", "--logger", "wandb"]).resolve({}, {}, save_dir=str(tmp_path), name="run")
    assert any(isinstance(cb, WandbRunsFinished) for cb in options["callbacks"])
    trainer = pl.Trainer(max_steps=2, limit_val_batches=0, enable_progress_bar=False, enable_model_summary=False,
                         enable_checkpointing=False, log_every_n_steps=1, **options)  # fmt: skip
    if fails:
        with pytest.raises(RuntimeError, match="the user's step fails"):
            trainer.fit(Failing())
    else:
        trainer.fit(BoringModel())
    assert wandb.run is None  # ended by the command, not left to the interpreter's exit
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    (exit_record,) = [r.exit for r in finished_records(run_file) if r.WhichOneof("record_type") == "exit"]
    assert exit_record.exit_code == (1 if fails else 0)
