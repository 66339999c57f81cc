"""A model whose class has a ``to()`` of its own is moved with it where the strategy places the module, as
``Runner.wrap_model`` moves the model (#33). Found reading mmdet's shipped ``ld/ld_r18-gflv1-r101_fpn_1x_coco.py``
(derived to tiny data it trains bitwise the Runner's on CPU): ``KnowledgeDistillationSingleStageDetector`` keeps its
teacher outside the module tree (a plain attribute, out of the state dict) and moves it in its ``to()``; Lightning's
strategies move the LightningModule through ``nn.Module._apply``, which never calls it, so on a GPU the teacher would
stay on the CPU beside the student's weights."""

from __future__ import annotations

from typing import Any

import torch
from mmengine_testkit import Toy, run_lightning, run_mmengine


class WithTeacher(Toy):
    """``Toy`` with a teacher outside its module tree, moved by its own ``to()`` (as mmdet's distillation detectors)."""

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "teacher", torch.nn.Linear(4, 1))
        self.moved_to: list[str] = []

    def to(self, *args: Any, **kwargs: Any) -> Any:
        device = torch.device(args[0] if args else kwargs["device"])
        self.moved_to.append(device.type)
        self.teacher.to(device)
        return super().to(*args, **kwargs)


def test_a_model_with_its_own_to_is_moved_with_it_as_the_runner_moves_it(tmp_path):
    runner = run_mmengine(tmp_path / "runner", max_epochs=1, model=WithTeacher(), val=False)
    _, _, module = run_lightning(tmp_path / "lightning", max_epochs=1, model=WithTeacher(), val=False)
    assert runner.model.moved_to == module.model.moved_to == ["cpu"], (runner.model.moved_to, module.model.moved_to)
