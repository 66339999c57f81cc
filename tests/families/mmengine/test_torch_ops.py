"""The pure-torch stand-ins for mmcv's compiled NMS and RoIAlign (tests/helpers/torch_ops.py), called through
``mmcv.ops`` as mmdet calls them, against results worked out by hand."""

from __future__ import annotations

import pytest
import torch
from openmmlab_stubs import stubs

with stubs():
    from mmcv.ops import nms, roi_align

#: A, B (IoU 0.82 with A), C (IoU exactly 0.5 with A), D (apart), E (IoU 0.82 with C, 0.43 with A)
BOXES = torch.tensor([[0, 0, 10, 10], [1, 0, 11, 10], [0, 0, 10, 5], [20, 20, 30, 30], [1, 0, 11, 5]], dtype=torch.float32)
SCORES = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.65])


@pytest.mark.parametrize(("offset", "kept"), [(0, [0, 2, 3]), (1, [0, 4, 3])])
def test_nms_keeps_greedily_what_no_kept_box_overlaps_above_the_threshold(offset: int, kept: list[int]) -> None:
    """offset 0: B goes (A), C stays (IoU 0.5 is not above 0.5), E goes (C); offset 1 (sides + 1): C goes (IoU
    66/121 with A), so E, suppressed only by C, stays; by descending score."""
    dets, inds = nms(BOXES, SCORES, iou_threshold=0.5, offset=offset)
    assert inds.tolist() == kept
    assert torch.equal(dets[:, 4], SCORES[kept])


def test_roi_align_averages_bilinear_samples_clamped_to_the_border_and_zero_outside() -> None:
    image = torch.arange(16.0).reshape(1, 1, 4, 4)  # value 4 y + x: bilinear sampling is exact on it
    inside = roi_align(image, torch.tensor([[0, 0.5, 0.5, 2.5, 2.5]]), (2, 2), 1.0, 1, "avg", True)
    assert inside.flatten().tolist() == [2.5, 3.5, 6.5, 7.5]  # samples at (0.5 | 1.5, 0.5 | 1.5)
    pooled = roi_align(image, torch.tensor([[0, 0.5, 0.5, 2.5, 2.5]]), (1, 1), 1.0, 2, "avg", True)
    assert pooled.item() == 5.0  # four samples averaged
    # sampling_ratio 0: ceil(bin size) samples a side, here 3 across a bin 2.5 wide, on x squared (not linear)
    squares = (torch.arange(4.0) ** 2).repeat(1, 1, 4, 1)
    dense = roi_align(squares, torch.tensor([[0, 0.5, 0.5, 3.0, 1.5]]), (1, 1), 1.0, 0, "avg", True)
    assert dense.item() == pytest.approx((5 / 12 + 7 / 4 + 53 / 12) / 3)  # at x 5/12, 5/4, 25/12
    # legacy (aligned=False): the RoI's height clamped to 1, row 4 clamped to row 3; x -0.5 to column 0, x 4.5 is out
    edges = roi_align(image, torch.tensor([[0, -1.5, 3.5, 4.5, 3.9], [0, 1.5, 3.5, 7.5, 3.9]]), (1, 3), 1.0, 1, "avg", False)
    assert edges.flatten().tolist() == [12.0, 13.5, 15.0, 14.5, 0.0, 0.0]


@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_gradient_is_the_forwards(ratio: int) -> None:
    image = torch.rand(2, 1, 6, 5, dtype=torch.float64, requires_grad=True)
    rois = torch.tensor([[1, 0.3, 0.7, 4.1, 5.2], [0, 1.0, 1.0, 2.0, 2.5], [1, -0.8, 2.0, 5.6, 6.4]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: roi_align(x, rois, (3, 2), 0.9, ratio, "avg", True), (image,))
