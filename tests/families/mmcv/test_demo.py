"""``lightning-hooks demo`` with mmcv 1.x installed runs the family's demo hooks too (the demo venv, with mmcv-lite
2.x, leaves them out: ``FAMILY.demo_hooks`` is None there). The demo's own run is tested in the main suite
(tests/test_demo.py); here the family's hooks and probes run on the demo's model and data."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mmcv.runner", reason="mmcv 1.x lives in .venv-mmcv1 (bash scripts/setup.sh test)")

import lightning.pytorch as pl  # noqa: E402

from lightning_hooks import adapt  # noqa: E402
from lightning_hooks.demo import DemoNet, SyntheticData  # noqa: E402
from lightning_hooks.families import mmcv  # noqa: E402


def test_demo_hooks_run_on_the_demo_model_and_their_probes_report(tmp_path, caplog):
    assert mmcv.FAMILY.demo_hooks is mmcv.demo_hooks  # mmcv 1.x is installed here
    hooks = mmcv.demo_hooks(tmp_path)
    [adapter] = adapt([hook for hook, _ in hooks], work_dir=tmp_path)
    assert [type(h).__name__ for h in adapter.hooks] == ["IterTimerHook", "TextLoggerHook"]
    trainer = pl.Trainer(max_epochs=1, callbacks=[adapter], default_root_dir=tmp_path, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    with caplog.at_level("INFO", logger="mmcv"):
        trainer.fit(DemoNet(), SyntheticData(n_train=512, n_val=64))
    report = [probe(hook, None) for hook, probe in hooks]
    assert report[0].startswith("time into mmcv's LogBuffer: ") and report[1].startswith("2 JSON log lines")
    [log] = tmp_path.glob("*.log.json")
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["mode"], line["iter"]) for line in lines if "mode" in line] == [("train", 16), ("val", 2)]
    # TextLoggerHook's line, through runner.logger: mmcv's get_logger("mmcv")
    assert any(r.name == "mmcv" and r.getMessage().startswith("Epoch [1][16/16]") for r in caplog.records)
