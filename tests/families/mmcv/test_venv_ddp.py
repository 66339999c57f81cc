"""The OpenMMLab 1.x family's 2-process tests (``lightning-hooks train --devices 2`` against each library's
``tools/train.py`` under torchrun, and the family's write audit, tests/integration/ddp/test_write_audit_mmcv.py) in
``.venv-mmcv1``, apart from test_venv.py's run of the rest, so that the suite's two xdist workers run the two halves
side by side."""

from __future__ import annotations

from mmcv1_suite import DDP_FILES, run_mmcv1_suite


def test_mmcv_two_process_tests_pass_in_the_mmcv1_environment():
    run_mmcv1_suite(list(DDP_FILES))
