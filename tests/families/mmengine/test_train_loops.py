"""``lightning-hooks train`` on a config whose ``train_cfg`` names a loop of its own (``dict(type="GenTrainLoop")``,
a subclass of MMEngine's loops with its own ``run()``): refused before anything is built, with the loop type, the
config key and what to do; MMEngine's two loops run."""

from __future__ import annotations

import re
from pathlib import Path

import mmpretrain
import pytest

from lightning_hooks import train as dispatcher
from lightning_hooks.families.mmengine.train import check_eval_loops

SHIPPED = Path(mmpretrain.__file__).parent / ".mim" / "configs" / "resnet" / "resnet18_8xb16_cifar10.py"


def test_a_custom_train_loop_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "custom_loop.py"
    path.write_text(f"_base_ = [{str(SHIPPED)!r}]\ntrain_cfg = dict(type='GenTrainLoop', max_iters=4, _delete_=True)\n")
    with pytest.raises(ValueError, match=r"train_cfg type 'GenTrainLoop' is not a loop the adapter can run on "
                       r"Lightning's fit loop\. Use 'EpochBasedTrainLoop' or 'IterBasedTrainLoop'"):  # fmt: skip
        dispatcher.main([str(path), "--work-dir", str(tmp_path / "work")])
    assert not (tmp_path / "work").exists()  # nothing built, nothing written


def test_an_evaluation_loop_with_its_own_run_is_refused_with_the_way_out(tmp_path: Path, capsys) -> None:
    # mmdet's semi-supervised TeacherStudentValLoop (soft_teacher): the Runner runs its run(), Lightning cannot; the
    # message alone, no traceback (an InputError); the way out it names passes the check
    path = tmp_path / "custom_val.py"
    path.write_text(f"_base_ = [{str(SHIPPED)!r}]\nval_cfg = dict(type='TeacherStudentValLoop')\n")
    with pytest.raises(SystemExit):
        dispatcher.main([str(path), "--work-dir", str(tmp_path / "work")])
    assert re.fullmatch(r"lightning-hooks train: error: val_cfg=dict\(type='TeacherStudentValLoop'\) is an "
                        r"evaluation loop with its own run\(\).*--cfg-options val_cfg\.type=ValLoop;.*\n",
                        capsys.readouterr().err, re.S)  # fmt: skip  # one pattern continued under its first half
    assert not (tmp_path / "work").exists()  # nothing built, nothing written
    check_eval_loops(dict(val_cfg=dict(type="ValLoop"), test_cfg=dict(type="mmagic.MultiTestLoop")))
