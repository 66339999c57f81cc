"""Pure-torch stand-ins for the compiled mmcv ops that two-stage detectors and instance segmentation call (RPN and
RoI heads: NMS; RoI feature extraction and mask targets: RoIAlign), served as ``mmcv._ext`` by
tests/helpers/openmmlab_stubs.py, for mmcv-lite 2.x and the CPU build of mmcv 1.7 alike.

Each function takes the arguments ``mmcv.ops``' Python wrappers pass to ``ext_module.<name>`` (``nms.py``,
``roi_align.py``) and fills their output buffers in place where the wrapper allocates them. They follow mmcv's CPU
kernels (greedy NMS over scores sorted descending, a box suppressed when its IoU with a kept box is above the
threshold; RoIAlign averaging bilinear samples on a grid of ``sampling_ratio`` or ``ceil(bin size)`` points per bin),
not bit for bit: the tests need one deterministic implementation that both hosts under comparison call, not
mmcv's numbers. RoIAlign's backward recomputes the (linear) forward differentiably and lets autograd give the
gradient; only ``pool_mode`` avg (mmdet's configs) is served.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int = 0) -> Tensor:
    """The indices of the boxes kept, by descending score: a box is dropped when its IoU (box sides ``x2 - x1 +
    offset``) with a higher-scoring kept box is above ``iou_threshold``. CPU tensors; all N x N overlaps at once (the
    tests' small images)."""
    if boxes.numel() == 0:
        return boxes.new_zeros(0, dtype=torch.long)
    boxes, scores = boxes.detach(), scores.detach()
    order = scores.sort(descending=True, stable=True).indices
    x1, y1, x2, y2 = boxes[order].unbind(1)
    areas = (x2 - x1 + offset) * (y2 - y1 + offset)
    w = (torch.minimum(x2[:, None], x2) - torch.maximum(x1[:, None], x1) + offset).clamp(min=0)
    h = (torch.minimum(y2[:, None], y2) - torch.maximum(y1[:, None], y1) + offset).clamp(min=0)
    inter = w * h
    overlaps = (inter / (areas[:, None] + areas - inter) > iou_threshold).numpy()
    keep = torch.ones(len(order), dtype=torch.bool).numpy()
    for i in range(len(order)):  # greedy: only a kept box suppresses the ones after it
        if keep[i]:
            keep[i + 1:] &= ~overlaps[i, i + 1:]
    return order[torch.from_numpy(keep)]


def roi_align_forward(input: Tensor, rois: Tensor, output: Tensor, argmax_y: Tensor, argmax_x: Tensor, *,
                      aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                      pool_mode: int, aligned: bool) -> None:  # fmt: skip
    """``output`` (R, C, aligned_height, aligned_width) filled with each RoI ``(batch index, x1, y1, x2, y2)``'s
    average-pooled bilinear samples of ``input`` (N, C, H, W)."""
    _avg_only(pool_mode)
    output.copy_(_roi_align(input, rois, aligned_height, aligned_width, spatial_scale, sampling_ratio, aligned))


def roi_align_backward(grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor, grad_input: Tensor, *,
                       aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                       pool_mode: int, aligned: bool) -> None:  # fmt: skip
    """``grad_input`` filled with the gradient of :func:`roi_align_forward` (linear in its input, so recomputed on
    zeros) for ``grad_output``."""
    _avg_only(pool_mode)
    with torch.enable_grad():
        input = grad_input.new_zeros(grad_input.shape, requires_grad=True)
        output = _roi_align(input, rois, aligned_height, aligned_width, spatial_scale, sampling_ratio, aligned)
        grad_input.copy_(torch.autograd.grad(output, input, grad_output)[0])


def _avg_only(pool_mode: int) -> None:
    if pool_mode != 1:
        raise NotImplementedError("tests/helpers/torch_ops.py: RoIAlign's pool_mode 'max' has no stand-in ('avg' has)")


def _roi_align(input: Tensor, rois: Tensor, height: int, width: int, scale: float, ratio: int, aligned: bool) -> Tensor:
    """RoIAlign (avg) as differentiable torch ops: the RoIs grouped by their sampling grid (per bin: ``ratio``
    points a side, else ``ceil`` of the bin's size), each group sampled at once."""
    output = input.new_zeros(len(rois), input.size(1), height, width)
    offset = 0.5 if aligned else 0.0
    start = rois[:, 1:3] * scale - offset  # (x, y)
    size = rois[:, 3:5] * scale - offset - start
    if not aligned:  # mmcv's legacy mode: RoIs at least one pixel a side
        size = size.clamp(min=1.0)
    bin_size = size / size.new_tensor([width, height])
    grid = bin_size.ceil().long().clamp(min=1) if ratio <= 0 else torch.full_like(bin_size, ratio, dtype=torch.long)
    for gx, gy in grid.unique(dim=0).tolist():
        group = (grid == grid.new_tensor([gx, gy])).all(1).nonzero()[:, 0]
        # sample coordinates: bin p's points at start + (p + (i + 0.5) / g) * bin size
        ys = (torch.arange(height)[:, None] + (torch.arange(gy)[None] + 0.5) / gy).to(input.dtype).reshape(-1)
        xs = (torch.arange(width)[:, None] + (torch.arange(gx)[None] + 0.5) / gx).to(input.dtype).reshape(-1)
        y = start[group, 1, None] + ys * bin_size[group, 1, None]  # (G, height * gy)
        x = start[group, 0, None] + xs * bin_size[group, 0, None]  # (G, width * gx)
        samples = _bilinear(input, rois[group, 0].long(), y, x)  # (G, C, height * gy, width * gx)
        output[group] = samples.reshape(len(group), -1, height, gy, width, gx).mean(dim=(3, 5))
    return output


def _bilinear(input: Tensor, batch: Tensor, y: Tensor, x: Tensor) -> Tensor:
    """``input[batch[g]]`` sampled at every (y[g, i], x[g, j]) as mmcv's kernels interpolate: zero outside
    ``[-1, size]``, coordinates clamped to the border pixels within it. Returns (G, C, Y, X)."""
    n, c, h, w = input.shape
    pixels = input.permute(0, 2, 3, 1).reshape(n * h * w, c)
    wy, y0, y1 = _weights(y, h)  # (G, Y, 2) weights and the two rows
    wx, x0, x1 = _weights(x, w)
    out = 0
    for k, row in enumerate((y0, y1)):
        for j, col in enumerate((x0, x1)):
            index = (batch[:, None, None] * h + row[:, :, None]) * w + col[:, None, :]  # (G, Y, X)
            weight = wy[:, :, None, k] * wx[:, None, :, j]
            out = out + pixels.index_select(0, index.reshape(-1)).reshape(*index.shape, c) * weight[..., None]
    return out.permute(0, 3, 1, 2)


def _weights(coord: Tensor, size: int) -> tuple[Tensor, Tensor, Tensor]:
    """The two neighbours' weights (..., 2) and indices of each ``coord`` on an axis of ``size`` pixels."""
    outside = (coord < -1.0) | (coord > size)
    coord = coord.clamp(min=0)
    low = coord.long().clamp(max=size - 1)
    coord = torch.where(low >= size - 1, low.to(coord.dtype), coord)
    high = (low + 1).clamp(max=size - 1)
    frac = coord - low
    weights = torch.stack([1 - frac, frac], -1).masked_fill(outside[..., None], 0.0)
    return weights, low, high


#: the ``mmcv._ext`` functions served
OPS: dict[str, Any] = {"nms": nms, "roi_align_forward": roi_align_forward, "roi_align_backward": roi_align_backward}
