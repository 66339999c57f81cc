"""`lightning-hooks demo` (the README's main job) trains and reports what every family's real hooks produced."""

from __future__ import annotations

import json

import torch

from lightning_hooks.cli import main


def test_demo_runs_every_family_and_reports_each_hook(tmp_path, capsys):
    main(["demo", "--out", str(tmp_path), "--epochs", "2"])
    table = capsys.readouterr().out
    for hook in ("EMAHook", "CheckpointHook", "LoggerHook", "PreciseBatchNormHook", "IterationTimerHook", "PeriodicLogger"):
        assert hook in table
    assert "EMA val loss" in table and "after_train_iter x64" in table  # 2 epochs x 32 batches
    mmengine = torch.load(tmp_path / "epoch_2.pth", weights_only=True)  # MMEngine CheckpointHook
    assert "ema_state_dict" in mmengine and mmengine["meta"]["epoch"] == 2
    assert {p.name for p in (tmp_path / "classy_checkpoints").iterdir()} >= {
        "model_phase-0_end.torch", "model_phase-2_end.torch"}  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "imix_status.json").read_text().splitlines()]
    assert len(records) == 8 and all("total_loss" in r for r in records)  # every 8 of 64 iterations
