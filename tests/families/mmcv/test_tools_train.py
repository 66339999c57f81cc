"""``families/mmcv/tools_train.py``: the run's logger, as each library's ``tools/train.py`` gets it in a fresh process,
in a process an earlier run already used; ``--auto-resume``'s checkpoint. (The whole run against each library's
script: tests/families/mmcv/test_train*.py.)"""

from __future__ import annotations

import logging

import pytest
import torch
from mmcv_testkit import fresh_root_logger  # skips outside .venv-mmcv1

pytest.importorskip("mmcls", reason="mmcls 0.x lives in .venv-mmcv1")

from mmcv.runner import BaseModule  # noqa: E402
from mmcv.utils.logging import get_logger, logger_initialized  # noqa: E402

from lightning_hooks.families.mmcv.library import LIBRARIES  # noqa: E402
from lightning_hooks.families.mmcv import tools_train  # noqa: E402
from lightning_hooks.families.mmcv.tools_train import latest_checkpoint, run_logger  # noqa: E402

MMCLS = next(library for library in LIBRARIES if library.package == "mmcls")


class Initialised(BaseModule):
    """A model whose ``init_weights`` logs, as a library's models do."""

    def __init__(self) -> None:
        super().__init__(init_cfg=dict(type="Constant", layer="Linear", val=1.0))
        self.fc = torch.nn.Linear(2, 2)


@pytest.fixture
def loggers():
    """mmcv's initialised loggers and the ``mmcls`` and ``mmcv`` loggers' handlers, as they were before."""
    before = dict(logger_initialized)
    handlers = {name: list(logging.getLogger(name).handlers) for name in ("mmcls", "mmcv")}
    yield
    for name, kept in handlers.items():
        logger = logging.getLogger(name)
        for handler in [h for h in logger.handlers if h not in kept]:
            logger.removeHandler(handler)
            handler.close()
        for handler in [h for h in kept if h not in logger.handlers]:
            logger.addHandler(handler)
    logger_initialized.clear()
    logger_initialized.update(before)


def file_handlers(name: str) -> list[logging.FileHandler]:
    return [h for h in logging.getLogger(name).handlers if isinstance(h, logging.FileHandler)]


def test_a_second_run_in_a_process_logs_into_its_own_file(loggers, tmp_path):
    """An earlier run set mmcls's logger up (its file); mmcv's logger was set up too. The run's logger writes this
    run's file only and is set up after mmcv's, as in tools/train.py's fresh process (importing mmcv.cnn sets mmcv's
    up): init_weights' lines go to mmcv's logger, not into the run's file; afterwards the earlier state is back."""
    fresh_root_logger("mmcls")
    earlier = get_logger("mmcls", log_file=str(tmp_path / "earlier.log"))
    mmcv = get_logger("mmcv")  # as importing mmcv.cnn sets it up
    mmcv_lines = logging.FileHandler(tmp_path / "mmcv.log")
    mmcv.addHandler(mmcv_lines)
    initialized, handlers = dict(logger_initialized), list(earlier.handlers)
    with run_logger(MMCLS, str(tmp_path / "run.log"), "INFO") as logger:
        assert logger is earlier and list(logger_initialized)[-1] == "mmcls"
        assert list(logger_initialized).index("mmcv") < list(logger_initialized).index("mmcls")
        assert [h.baseFilename for h in file_handlers("mmcls")] == [str(tmp_path / "run.log")]
        logger.info("this run")
        Initialised().init_weights()
    run = (tmp_path / "run.log").read_text()
    assert "this run" in run and "fc.weight - torch.Size([2, 2])" not in run
    mmcv.removeHandler(mmcv_lines)
    mmcv_lines.close()
    assert "fc.weight - torch.Size([2, 2])" in (tmp_path / "mmcv.log").read_text()
    assert "this run" not in (tmp_path / "earlier.log").read_text()
    assert logger.handlers == handlers and dict(logger_initialized) == initialized
    assert list(logger_initialized) == list(initialized) and mmcv.handlers  # in their order; mmcv's left as it was


def test_the_logger_is_given_back_after_a_failure(loggers, tmp_path):
    fresh_root_logger("mmcls")
    initialized = dict(logger_initialized)
    with pytest.raises(RuntimeError, match="boom"), run_logger(MMCLS, str(tmp_path / "run.log"), "INFO"):
        assert "mmcls" in logger_initialized
        raise RuntimeError("boom")
    assert dict(logger_initialized) == initialized and not logging.getLogger("mmcls").handlers


def test_auto_resume_takes_latest_then_the_highest_numbered_checkpoint(tmp_path):
    assert latest_checkpoint(str(tmp_path / "nothing")) is None
    for name in ("epoch_2.pth", "epoch_10.pth", "best.pth"):
        (tmp_path / name).write_bytes(b"")
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "epoch_10.pth")
    (tmp_path / "latest.pth").write_bytes(b"")
    assert latest_checkpoint(str(tmp_path)) == str(tmp_path / "latest.pth")


@pytest.fixture
def process_settings(monkeypatch):
    """The process settings ``setup_env`` changes, put back afterwards."""
    import cv2
    import torch.multiprocessing as mp

    threads, method, benchmark = cv2.getNumThreads(), mp.get_start_method(allow_none=True), torch.backends.cudnn.benchmark
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    yield
    cv2.setNumThreads(threads)
    mp.set_start_method(method, force=True)
    torch.backends.cudnn.benchmark = benchmark


def test_setup_env_applies_the_configs_process_settings_as_the_script(process_settings, tmp_path):
    import os

    import cv2
    import torch.multiprocessing as mp
    from mmcv import Config

    cfg = Config(dict(mp_start_method="spawn", opencv_num_threads=3, cudnn_benchmark=True,
                      data=dict(workers_per_gpu=2), work_dir=str(tmp_path)))  # fmt: skip  # one key per concern
    tools_train.setup_env(MMCLS, cfg)
    assert (mp.get_start_method(), cv2.getNumThreads(), torch.backends.cudnn.benchmark) == ("spawn", 3, True)
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "1"  # for the data loader workers


def test_train_sets_the_process_up_before_it_makes_the_work_dir(monkeypatch, tmp_path):
    from mmcv import Config

    def stop(library, cfg):
        raise RuntimeError(f"setup_env({library.package})")

    monkeypatch.setattr(tools_train, "setup_env", stop)
    cfg = Config(dict(model=dict(type="ImageClassifier"), work_dir=str(tmp_path / "work")))
    with pytest.raises(RuntimeError, match=r"setup_env\(mmcls\)"):
        tools_train.train(cfg)
    assert not (tmp_path / "work").exists()


def test_a_library_that_sets_the_process_up_after_its_logger_logs_that_into_the_run_s_log(monkeypatch, tmp_path):
    """mmseg's script sets the process up after its logger (Library.setup_after_logger): what its
    ``setup_multi_processes`` logs ("Multi-processing start method is ...") is in the run's log file."""
    import dataclasses

    from mmcv import Config

    def stop(library, cfg):
        logging.getLogger(library.package).info("Multi-processing start method is `None`")
        raise RuntimeError(f"setup_env({library.package})")

    monkeypatch.setattr(tools_train, "library_of", lambda cfg: dataclasses.replace(MMCLS, setup_after_logger=True))
    monkeypatch.setattr(tools_train, "setup_env", stop)
    cfg = Config(dict(model=dict(type="ImageClassifier"), work_dir=str(tmp_path / "work")))
    with pytest.raises(RuntimeError, match=r"setup_env\(mmcls\)"):
        tools_train.train(cfg, timestamp="20260101_000000")
    assert "Multi-processing start method is `None`" in (tmp_path / "work" / "20260101_000000.log").read_text()


def test_the_config_is_logged_before_its_device_is_set(tmp_path, monkeypatch):
    """The scripts log ``Config:`` before ``cfg.device = ...``: the logged config has no ``device`` line."""
    from mmcv import Config
    from mmcv_testkit import stub_collect_env
    from mmcv_train_kit import tiny_resnet_cifar

    stub_collect_env(monkeypatch)  # mmcv.ops may be imported, with stubbed ops, by other tests

    cfg = Config.fromfile(str(tiny_resnet_cifar(tmp_path / "tiny.py")))
    logged: list[str] = []

    class Logger(logging.Logger):
        def info(self, msg, *args, **kwargs):
            logged.append(msg % args if args else msg)

    tools_train._prepare(MMCLS, cfg, Logger("test"), distributed=False, seed=0, diff_seed=False,
                         deterministic=False, accelerator="cpu")  # fmt: skip  # arguments aligned under the call
    (config,) = [line for line in logged if line.startswith("Config:")]
    assert "device = " not in config and cfg.device == "cpu"


def test_init_weights_passes_over_a_closed_log_file_of_an_earlier_run(tmp_path, loggers):
    """An earlier run's log file on mmcv's logger (``MMCVAdapter`` in a notebook), closed since (importing mlflow
    closes every handler of the process): ``init_weights``, which writes to the first of mmcv's loggers' file
    handlers directly, passes over it, and the handler stays on the logger."""
    earlier = logging.FileHandler(tmp_path / "earlier.log", "w")  # as MMCVAdapter's: logging does not open it again
    logger = logging.getLogger(next(iter(logger_initialized), "mmcv"))
    logger.addHandler(earlier)
    earlier.close()
    try:
        with tools_train.closed_log_files_aside():
            Initialised().init_weights()
        assert earlier in logger.handlers
    finally:
        logger.removeHandler(earlier)
