"""Shipped OpenMMLab 2.0 configs trained fresh, stopped at an arbitrary iteration and resumed: ``lightning-hooks train
CONFIG`` stopped after iteration k (mid-epoch for the epoch-based ones) and resumed with ``--resume``, against
``tools/train.py`` (``Runner.from_cfg(cfg).train()``) stopped and resumed the same way (tests/helpers/resume_kit.py).

The corpus (:data:`CASES`): mmpretrain's ResNet-18 CIFAR, DeiT-tiny (Mixup / CutMix), ConvNeXt with EMA, and the
self-supervised SimCLR, MoCo v2, BYOL and MAE recipes; mmdet's RetinaNet, FCOS and ATSS (one-stage), DETR, Conditional
DETR and DINO (DETR-style; DINO with deformable attention, two-stage query selection and denoising queries), Faster
R-CNN (two-stage), Mask R-CNN and SOLO (instance segmentation); mmseg's SegFormer, PSPNet, DeepLabV3 and FCN
(iteration-based); mmpose's top-down SimpleBaseline heatmap config and RTMPose-s (SimCC, EMA, the two-stage pipeline
switch; CocoMetric through xtcocotools); mmagic's SRCNN and EDSR (``MultiValLoop``, mmagic's ``Evaluator``): 24 configs. Each case is a shipped config as the ``_base_`` of a
small derived config: tiny generated data (train_kit.py, pose_kit.py,
mmagic_parts.py), tiny widths, 5 to 9 iterations, ``CheckpointHook`` by iteration (so iteration k has a checkpoint).

Compared, bitwise on this CPU (both hosts run the same kernels in the same order in one process): the stopped run's
first k iterations (the fresh run against ``Runner.train()``) and the resumed run's: the loss, learning rates and
metrics of every iteration, the log lines of training; then the work-dir files and each checkpoint's weights, EMA
weights, optimizer, scheduler and message-hub state. A failure names the config, the run, the quantity and the first
iteration where the two sides part. The SIGKILL case (Mask R-CNN, killed mid-epoch between two validations)
compares the resumed runs only (the killed runs' logs end wherever the kill landed).
tests/families/mmengine/test_train_ddp.py runs some of these cases in two processes.

What the derived configs change beyond size, and why: validation is dropped where it would only slow a case down
(the one-stage and DETR-style detectors, SOLO; Faster and Mask R-CNN validate with mmdet's CocoMetric on boxes large
enough for their barely trained proposals to score, the pose config with mmpose's on persons whose annotated area, the
scale of the keypoint similarity, lets its barely trained keypoints score); AMP recipes (MAE) train in fp32, as the Runner's ``AmpOptimWrapper`` needs a GPU; the
self-supervised views crop to 32 px and jitter no hue (mmcv 2.0's ``adjust_hue`` overflows numpy 2's uint8 on a
negative shift, under both hosts). The two-stage detectors' RPN and RoI heads call mmcv's compiled NMS and RoIAlign,
which mmcv-lite lacks: both hosts call the same pure-torch stand-ins (tests/helpers/torch_ops.py, served as
``mmcv._ext`` by tests/helpers/openmmlab_stubs.py). Not here: mmagic's models beyond SRCNN and EDSR (their packages
import diffusers and the like, which the venv lacks; tests/helpers/mmagic_parts.py imports what those two name).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import train_kit
from resume_kit import (
    first_difference,
    killed_then_resumed,
    pretty_text_once,
    scalars,
    stopped_then_resumed,
)

_LIBRARIES = ("mmpretrain", "mmseg", "mmdet", "mmpose", "mmagic")
_CONFIGS = {name: Path(importlib.util.find_spec(name).origin).parent / ".mim" / "configs" for name in _LIBRARIES
            if importlib.util.find_spec(name)}  # fmt: skip

_CIFAR_DATA = """train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=12, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5, direction="horizontal"), dict(type="PackInputs")]))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=6, seed=2, _delete_=True, pipeline=[dict(type="PackInputs")]))
test_dataloader = val_dataloader
"""
#: the swin schedule (LinearLR warm-up by iteration for 20 epochs, then CosineAnnealingLR) over 2 epochs
_SWIN_SCHEDULE = """param_scheduler = [
    dict(type="LinearLR", start_factor=1e-3, by_epoch=True, end=1, convert_to_iter_based=True),
    dict(type="CosineAnnealingLR", eta_min=1e-5, by_epoch=True, begin=1)]
train_cfg = dict(max_epochs=2)
"""

#: a Cityscapes ResNet-18 segmentor on tiny data: 5 iterations, validation every 2
_SEG_R18 = """model = dict(pretrained=None, data_preprocessor=dict(size=(32, 32)),
             backbone=dict(stem_channels=16, base_channels=8), decode_head=dict(in_channels=64, channels=16, num_classes=4),
             auxiliary_head=dict(in_channels=32, channels=8, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=5, val_interval=2)
"""

#: two-stage detectors validated by the shipped CocoMetric (ground truth from the data's ``instances``), on boxes of
#: 24 px and more, so that the barely trained proposals score a nonzero mAP
_COCO_VALIDATION = """val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyDetection", n=2, seed=2, min_side=24, _delete_=True, test_mode=True,
                 pipeline=[dict(type="PackDetInputs", meta_keys=("img_id", "img_path", "ori_shape", "img_shape",
                                                                 "scale_factor", "instances"))]))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=None)
test_evaluator = val_evaluator
"""

#: a one-stage detector's ResNet-50 + FPN and head at 32 channels, epoch-based (2 iterations an epoch), no validation
_ONE_STAGE_R50 = """model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             neck=dict(in_channels=[32, 64, 128, 256], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
"""

#: name: (library, shipped config, derived lines, the iteration the run stops after)
CASES = {
    # epoch-based (3 iterations an epoch), Accuracy each epoch, MultiStepLR; stopped in the second epoch
    "mmpretrain-resnet18-cifar": ("mmpretrain", "resnet/resnet18_8xb16_cifar10.py", _CIFAR_DATA + """
model = dict(backbone=dict(stem_channels=8, base_channels=8), head=dict(in_channels=64))
param_scheduler = dict(milestones=[2])
train_cfg = dict(max_epochs=3)
""", 4),
    # a transformer: DeiT (VisionTransformer) with Mixup / CutMix batch augments drawing from torch's generator,
    # AdamW with paramwise_cfg, clip_grad, LinearLR warm-up by iteration + CosineAnnealingLR
    "mmpretrain-deit-tiny": ("mmpretrain", "deit/deit-tiny_4xb256_in1k.py", _CIFAR_DATA + """
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
                           img_size=32, patch_size=8, drop_path_rate=0.1),
             head=dict(num_classes=10, in_channels=16))
data_preprocessor = dict(num_classes=10)
""" + _SWIN_SCHEDULE, 2),
    # ConvNeXt with EMAHook (ema_state_dict in the checkpoints, the EMA weights validated)
    "mmpretrain-convnext-tiny-ema": ("mmpretrain", "convnext/convnext-tiny_32xb128_in1k.py", _CIFAR_DATA + """
model = dict(backbone=dict(arch=dict(_delete_=True, depths=[1, 1, 1, 1], channels=[8, 8, 16, 16]), drop_path_rate=0.1),
             head=dict(num_classes=10, in_channels=16), train_cfg=None)
data_preprocessor = dict(num_classes=10)
""" + _SWIN_SCHEDULE, 4),
    # one-stage detector, epoch-based (2 iterations an epoch), AspectRatioBatchSampler, LinearLR + MultiStepLR
    "mmdet-retinanet-r18": ("mmdet", "retinanet/retinanet_r18_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=16, base_channels=16),
             neck=dict(in_channels=[16, 32, 64, 128], out_channels=32),
             bbox_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # DETR-style detector: a transformer encoder / decoder with dropout, Hungarian matching, AdamW with clip_grad and
    # paramwise_cfg, MultiStepLR; epoch-based (2 iterations an epoch), stopped in the second epoch
    "mmdet-detr-r18": ("mmdet", "detr/detr_r18_8xb2-500e_coco.py", """
_layer = dict(self_attn_cfg=dict(embed_dims=16, num_heads=2), ffn_cfg=dict(embed_dims=16, feedforward_channels=32))
model = dict(num_queries=10,
             backbone=dict(init_cfg=None, stem_channels=8, base_channels=8), neck=dict(in_channels=[64], out_channels=16),
             encoder=dict(num_layers=1, layer_cfg=_layer),
             decoder=dict(num_layers=1, layer_cfg=dict(_layer, cross_attn_cfg=dict(embed_dims=16, num_heads=2))),
             positional_encoding=dict(num_feats=8), bbox_head=dict(num_classes=2, embed_dims=16))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # iteration-based segmentor (InfiniteSampler), IoUMetric every 3 iterations, drop path in the MiT backbone,
    # AdamW + LinearLR + PolyLR by iteration; stopped where it validates next (the checkpoint precedes that
    # validation, which neither host runs on resuming)
    "mmseg-segformer-b0": ("mmseg", "segformer/segformer_mit-b0_8xb2-160k_ade20k-512x512.py", """
model = dict(data_preprocessor=dict(size=(32, 32)), backbone=dict(init_cfg=None),
             decode_head=dict(channels=32, num_classes=4))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=6, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomFlip", prob=0.5), dict(type="PackSegInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySegmentation", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackSegInputs")]))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=9, val_interval=3)
""", 6),
    # super-resolution: mmagic's MultiValLoop with mmagic's Evaluator (MAE, PSNR, SSIM), BaseEditModel / SRCNN,
    # CosineRestartLR, iteration-based (InfiniteSampler); the config's MultiTestLoop evaluators are never built
    "mmagic-srcnn": ("mmagic", "srcnn/srcnn_x4k915_1xb16-1000k_div2k.py", """
model = dict(generator=dict(channels=(3, 8, 4, 3)))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=4, seed=1, _delete_=True, pipeline=[dict(type="PackInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackInputs")]))
train_cfg = dict(max_iters=5, val_interval=2)
""", 3),
    # self-supervised, contrastive: SimCLR (two views of each image through the shipped augmentations at 32 px,
    # without hue jitter: mmcv 2.0's adjust_hue overflows numpy 2's uint8 on a negative shift, under both hosts),
    # NonLinearNeck, ContrastiveHead, LARS with lars_exclude, LinearLR warm-up + CosineAnnealingLR; SyncBN reverted
    "mmpretrain-simclr": ("mmpretrain", "simclr/simclr_resnet50_8xb32-coslr-200e_in1k.py", """
_view = [dict(type="RandomResizedCrop", scale=32, backend="pillow"), dict(type="RandomFlip", prob=0.5),
         dict(type="RandomApply", prob=0.8,
              transforms=[dict(type="ColorJitter", brightness=0.8, contrast=0.8, saturation=0.8, hue=0.0)]),
         dict(type="RandomGrayscale", prob=0.2, keep_channels=True, channel_weights=(0.114, 0.587, 0.2989)),
         dict(type="GaussianBlur", magnitude_range=(0.1, 2.0), magnitude_std="inf", prob=0.5)]
model = dict(backbone=dict(stem_channels=8, base_channels=8), neck=dict(in_channels=256, hid_channels=32, out_channels=16))
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=8, seed=1, _delete_=True,
                 pipeline=[dict(type="MultiView", num_views=2, transforms=[_view]), dict(type="PackInputs")]))
train_cfg = dict(max_epochs=3)
""", 3),
    # self-supervised, momentum: BYOL (an online and a momentum target network updated each step by
    # CosineEMA, asymmetric views with Solarize), LARS
    "mmpretrain-byol": ("mmpretrain", "byol/byol_resnet50_16xb256-coslr-200e_in1k.py", """
_view = [dict(type="RandomResizedCrop", scale=32, interpolation="bicubic", backend="pillow"),
         dict(type="RandomFlip", prob=0.5),
         dict(type="RandomApply", prob=0.8,
              transforms=[dict(type="ColorJitter", brightness=0.4, contrast=0.4, saturation=0.2, hue=0.0)]),
         dict(type="RandomGrayscale", prob=0.2, keep_channels=True, channel_weights=(0.114, 0.587, 0.2989))]
model = dict(backbone=dict(stem_channels=8, base_channels=8), neck=dict(in_channels=256, hid_channels=32, out_channels=16),
             head=dict(predictor=dict(in_channels=16, hid_channels=32, out_channels=16)))
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=8, seed=1, _delete_=True,
                 pipeline=[dict(type="MultiView", num_views=[1, 1],
                                transforms=[[*_view, dict(type="GaussianBlur", magnitude_range=(0.1, 2.0), magnitude_std="inf", prob=1.0)],
                                            [*_view, dict(type="Solarize", thr=128, prob=0.2)]]),
                           dict(type="PackInputs")]))
train_cfg = dict(max_epochs=3)
""", 3),
    # masked image modelling: MAE (random masking from torch's generator, MAEViT + MAEPretrainDecoder,
    # pixel reconstruction); AdamW with paramwise_cfg in fp32 (the shipped AmpOptimWrapper needs a GPU under the Runner)
    "mmpretrain-mae-vit": ("mmpretrain", "mae/mae_vit-base-p16_8xb512-amp-coslr-300e_in1k.py", """
model = dict(backbone=dict(arch=dict(_delete_=True, embed_dims=16, num_layers=2, num_heads=2, feedforward_channels=32),
                           img_size=32, patch_size=8),
             neck=dict(patch_size=8, num_patches=16, embed_dim=16, decoder_embed_dim=16, decoder_depth=1,
                       decoder_num_heads=2),
             head=dict(patch_size=8))
optim_wrapper = dict(type="OptimWrapper", _delete_=True,
    optimizer=dict(type="AdamW", lr=1.5e-4 * 4096 / 256, betas=(0.9, 0.95), weight_decay=0.05),
    paramwise_cfg=dict(custom_keys={"ln": dict(decay_mult=0.0), "bias": dict(decay_mult=0.0),
                                    "pos_embed": dict(decay_mult=0.0), "mask_token": dict(decay_mult=0.0),
                                    "cls_token": dict(decay_mult=0.0)}))
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=8, seed=1, _delete_=True,
                 pipeline=[dict(type="RandomResizedCrop", scale=32, crop_ratio_range=(0.2, 1.0), backend="pillow",
                                interpolation="bicubic"), dict(type="RandomFlip", prob=0.5), dict(type="PackInputs")]))
train_cfg = dict(max_epochs=3)
""", 3),
    # DETR-style with deformable attention (MultiScaleDeformableAttention's PyTorch path on CPU), two-stage query
    # selection, box refinement and denoising queries drawn from torch's generator: DINO
    "mmdet-dino-4scale": ("mmdet", "dino/dino-4scale_r50_8xb2-12e_coco.py", """
_ffn = dict(feedforward_channels=64)  # DINO's decoder encodes its reference points in 256 dimensions, the width kept
model = dict(num_queries=10,
             backbone=dict(init_cfg=None, stem_channels=8, base_channels=8), neck=dict(in_channels=[64, 128, 256]),
             encoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=_ffn)),
             decoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=_ffn)), bbox_head=dict(num_classes=2),
             dn_cfg=dict(group_cfg=dict(num_dn_queries=8)))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=2)
""", 3),
    # one-stage anchor-free: FCOS (caffe-style ResNet-50, GN heads, centerness), SGD with paramwise_cfg bias
    # lr / decay, LinearLR warm-up + MultiStepLR
    "mmdet-fcos-r50-caffe": ("mmdet", "fcos/fcos_r50-caffe_fpn_gn-head_1x_coco.py", _ONE_STAGE_R50, 3),
    # one-stage with adaptive training-sample selection: ATSS (ATSSAssigner on anchors, centerness, GIoU), GN heads
    "mmdet-atss-r50": ("mmdet", "atss/atss_r50_fpn_1x_coco.py", _ONE_STAGE_R50, 3),
    # instance segmentation: SOLO (ResNet-50 + FPN, SOLOHead with Dice mask loss and focal classification on
    # grids), instance masks from the data
    "mmdet-solo-r50": ("mmdet", "solo/solo_r50_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             neck=dict(in_channels=[32, 64, 128, 256], out_channels=32),
             mask_head=dict(num_classes=2, in_channels=32, feat_channels=32, stacked_convs=1,
                            num_grids=[8, 8, 6, 4, 4], norm_cfg=dict(type="GN", num_groups=8, requires_grad=True)))
""" + train_kit.TINY_MASK_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # two-stage: Faster R-CNN (RPN proposals through NMS, MaxIoUAssigner + RandomSampler drawing from torch's generator
    # at both stages, RoIAlign features from the FPN levels, Shared2FCBBoxHead) on the shipped train_cfg, validated
    # each epoch by the shipped CocoMetric (pycocotools; its ground truth from the data's instances); mmcv's compiled
    # NMS and RoIAlign served by pure-torch stand-ins (tests/helpers/torch_ops.py) under both hosts
    "mmdet-faster-rcnn-r50": ("mmdet", "faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             neck=dict(in_channels=[32, 64, 128, 256], out_channels=32), rpn_head=dict(in_channels=32, feat_channels=32),
             roi_head=dict(bbox_roi_extractor=dict(out_channels=32),
                           bbox_head=dict(in_channels=32, fc_out_channels=32, num_classes=2)))
""" + train_kit.TINY_DETECTION_TRAIN + _COCO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # two-stage instance segmentation: Mask R-CNN (Faster R-CNN with an FCN mask head on 14x14 RoIAlign features,
    # mask targets cropped from the instance masks by RoIAlign), CocoMetric on boxes and masks (RLE-encoded by
    # pycocotools) each epoch
    "mmdet-mask-rcnn-r50": ("mmdet", "mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py", """
model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             neck=dict(in_channels=[32, 64, 128, 256], out_channels=32), rpn_head=dict(in_channels=32, feat_channels=32),
             roi_head=dict(bbox_roi_extractor=dict(out_channels=32),
                           bbox_head=dict(in_channels=32, fc_out_channels=32, num_classes=2),
                           mask_roi_extractor=dict(out_channels=32),
                           mask_head=dict(num_convs=2, in_channels=32, conv_out_channels=16, num_classes=2)))
""" + train_kit.TINY_MASK_TRAIN + _COCO_VALIDATION + """train_cfg = dict(max_epochs=3)
""", 3),
    # iteration-based segmentors on ResNet-18 (V1c, dilated): PSPNet (pyramid pooling) and DeepLabV3 (ASPP) with
    # an auxiliary FCN head, SGD + PolyLR by iteration, IoUMetric every 2 iterations; FCN alone
    "mmseg-pspnet-r18": ("mmseg", "pspnet/pspnet_r18-d8_4xb2-80k_cityscapes-512x1024.py", _SEG_R18, 3),
    "mmseg-deeplabv3-r18": ("mmseg", "deeplabv3/deeplabv3_r18-d8_4xb2-80k_cityscapes-512x1024.py", _SEG_R18, 3),
    "mmseg-fcn-r18": ("mmseg", "fcn/fcn_r18-d8_4xb2-80k_cityscapes-512x1024.py", _SEG_R18, 3),
    # top-down pose: SimpleBaseline heatmaps (ResNet-50, HeatmapHead with deconvolutions, MSRAHeatmap targets,
    # KeypointMSELoss), half-body / bbox-jitter / flip augments, Adam + LinearLR warm-up + MultiStepLR by epoch,
    # CocoMetric (xtcocotools) each epoch with flip test, the best checkpoint by coco/AP; the 12 validation persons
    # are annotated with a 128 x 128 area (the OKS scale), so the barely trained keypoints score a partial OKS: coco/AP
    # around 0.13, which a 1-px shift of the predictions changes
    "mmpose-topdown-res50": ("mmpose", "body_2d_keypoint/topdown_heatmap/coco/td-hm_res50_8xb64-210e_coco-256x192.py", """
_codec = dict(type="MSRAHeatmap", input_size=(32, 32), heatmap_size=(8, 8), sigma=2)
model = dict(backbone=dict(init_cfg=None, stem_channels=8, base_channels=8),
             head=dict(in_channels=256, deconv_out_channels=(16, 16, 16), decoder=_codec))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyPose", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="LoadImage"), dict(type="GetBBoxCenterScale"),
                           dict(type="RandomFlip", direction="horizontal"), dict(type="RandomHalfBody"),
                           dict(type="RandomBBoxTransform"), dict(type="TopdownAffine", input_size=(32, 32)),
                           dict(type="GenerateTarget", encoder=_codec), dict(type="PackPoseInputs")]))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyPose", n=12, seed=2, area=128 * 128, _delete_=True, test_mode=True,
                 pipeline=[dict(type="LoadImage"), dict(type="GetBBoxCenterScale"),
                           dict(type="TopdownAffine", input_size=(32, 32)), dict(type="PackPoseInputs")]))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=None)
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=3, val_interval=1)
""", 3),
    # top-down pose, RTMPose-s: mmdet's CSPNeXt backbone (channel attention, SyncBN reverted in one process),
    # RTMCCHead (SimCC coordinate classification through a gated attention unit, KLDiscretLoss), the shipped train
    # pipelines (YOLOXHSVRandomAug; albumentations' Blur, MedianBlur and CoarseDropout), AdamW with paramwise_cfg +
    # LinearLR warm-up by iteration, the shipped EMAHook (ExpMomentumEMA, the EMA weights validated) and mmdet's
    # PipelineSwitchHook moved to epoch 1 (was 390), so the run stopped in epoch 1 has switched and its resume
    # switches again; CocoMetric each epoch with flip test
    "mmpose-rtmpose-s": ("mmpose", "body_2d_keypoint/rtmpose/coco/rtmpose-s_8xb256-420e_coco-256x192.py", """
model = dict(backbone=dict(init_cfg=None, deepen_factor=0.167, widen_factor=0.0625),
             head=dict(in_channels=64, gau_cfg=dict(hidden_dims=16, s=8)))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyPose", n=4, seed=1, _delete_=True, pipeline=_base_.train_pipeline))
val_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyPose", n=12, seed=2, area=128 * 128, _delete_=True, test_mode=True,
                 pipeline=_base_.val_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=None)
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=3, val_interval=1)
custom_hooks = [_base_.custom_hooks[0], dict(_base_.custom_hooks[1], switch_epoch=1)]
""", 3),
    # super-resolution, EDSR x4: residual blocks and pixel-shuffle upsampling, paired random crops, flips and
    # transposes drawn from numpy, Adam + MultiStepLR by iteration, MultiValLoop with MAE / PSNR / SSIM
    "mmagic-edsr-x4": ("mmagic", "edsr/edsr_x4c64b16_1xb16-300k_div2k.py", """
model = dict(generator=dict(mid_channels=8, num_blocks=2))
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=4, seed=1, _delete_=True,
                 pipeline=[dict(type="SetValues", dictionary=dict(scale=4)), dict(type="PairedRandomCrop", gt_patch_size=16),
                           dict(type="Flip", keys=["img", "gt"], flip_ratio=0.5, direction="horizontal"),
                           dict(type="Flip", keys=["img", "gt"], flip_ratio=0.5, direction="vertical"),
                           dict(type="RandomTransposeHW", keys=["img", "gt"], transpose_ratio=0.5), dict(type="PackInputs")]))
val_dataloader = dict(batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinySR", n=2, seed=2, _delete_=True, pipeline=[dict(type="PackInputs")]))
train_cfg = dict(max_iters=5, val_interval=2)
""", 3),
    # self-supervised with a queue: MoCo v2 (a momentum encoder, a queue of negatives in the model's buffers),
    # SGD + CosineAnnealingLR by epoch
    "mmpretrain-mocov2": ("mmpretrain", "mocov2/mocov2_resnet50_8xb32-coslr-200e_in1k.py", """
_view = [dict(type="RandomResizedCrop", scale=32, crop_ratio_range=(0.2, 1.0), backend="pillow"),
         dict(type="RandomApply", prob=0.8,
              transforms=[dict(type="ColorJitter", brightness=0.4, contrast=0.4, saturation=0.4, hue=0.0)]),
         dict(type="RandomGrayscale", prob=0.2, keep_channels=True, channel_weights=(0.114, 0.587, 0.2989)),
         dict(type="GaussianBlur", magnitude_range=(0.1, 2.0), magnitude_std="inf", prob=0.5),
         dict(type="RandomFlip", prob=0.5)]
model = dict(queue_len=16, feat_dim=16, backbone=dict(stem_channels=8, base_channels=8),
             neck=dict(in_channels=256, hid_channels=32, out_channels=16))
train_dataloader = dict(batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type="TinyCifar", n=8, seed=1, _delete_=True,
                 pipeline=[dict(type="MultiView", num_views=2, transforms=[_view]), dict(type="PackInputs")]))
train_cfg = dict(max_epochs=3)
""", 3),
    # DETR-style with conditional cross-attention: Conditional DETR (focal loss, its own attention modules)
    "mmdet-conditional-detr": ("mmdet", "conditional_detr/conditional-detr_r50_8xb2-50e_coco.py", """
_ffn = dict(feedforward_channels=64)  # its decoder encodes the reference points in 256 dimensions, the width kept
model = dict(num_queries=10, backbone=dict(init_cfg=None, stem_channels=8, base_channels=8), neck=dict(in_channels=[256]),
             encoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=_ffn)), decoder=dict(num_layers=1, layer_cfg=dict(ffn_cfg=_ffn)),
             bbox_head=dict(num_classes=2))
""" + train_kit.TINY_DETECTION_TRAIN + train_kit.NO_VALIDATION + """train_cfg = dict(max_epochs=2)
""", 3),
}


#: the scalars a case must log (in the fresh or the resumed run): its validation's metrics; the two-stage detectors'
#: losses of both stages (and the mask head's)
_TWO_STAGE = ["loss_rpn_cls", "loss_rpn_bbox", "loss_cls", "loss_bbox"]
METRICS = {"mmdet-faster-rcnn-r50": [*_TWO_STAGE, "coco/bbox_mAP"],
           "mmdet-mask-rcnn-r50": [*_TWO_STAGE, "loss_mask", "coco/bbox_mAP", "coco/segm_mAP"],
           "mmpretrain-resnet18-cifar": ["accuracy/top1"], "mmseg-segformer-b0": ["mIoU"], "mmseg-pspnet-r18": ["mIoU"],
           "mmseg-deeplabv3-r18": ["mIoU"], "mmseg-fcn-r18": ["mIoU"], "mmagic-srcnn": ["PSNR", "SSIM", "MAE"],
           "mmagic-edsr-x4": ["PSNR", "SSIM", "MAE"],
           "mmpose-topdown-res50": ["coco/AP"], "mmpose-rtmpose-s": ["coco/AP"]}  # fmt: skip
#: cases whose shipped CheckpointHook keeps one checkpoint (max_keep_ckpts=1): both hosts remove iter_{stop}.pth
KEEPS_ONE = {"mmpose-rtmpose-s"}
#: metrics that must score above zero under the Runner (the evaluator is handed predictions it tells apart)
SCORING = {"mmpose-topdown-res50": "coco/AP", "mmpose-rtmpose-s": "coco/AP"}


def derived_config(directory: Path, case: str) -> Path:
    """The case's config: the shipped config as ``_base_``, the case's lines, then a log line every iteration,
    ``seed=0``, a checkpoint every ``stop`` iterations (and at the end) in the work dir (mmagic's configs name a
    shared ``out_dir``) and the hook that stops the first run, after the case's ``custom_hooks`` where it names
    them, else the shipped ones."""
    library, shipped, lines, stop = CASES[case]
    hooks = "custom_hooks" if "\ncustom_hooks = " in f"\n{lines}" else "_base_.get('custom_hooks', [])"
    path = directory / f"{case}.py"
    path.write_text(f"_base_ = [{str(_CONFIGS[library] / shipped)!r}]\n{lines}"
                    f"default_hooks = dict(logger=dict(interval=1), checkpoint=dict(by_epoch=False, interval={stop}, out_dir=None))\n"
                    "randomness = dict(seed=0)\n"
                    f"custom_hooks = [*{hooks}, dict(type='StopRunHook')]\n")  # fmt: skip
    return path


@pytest.fixture(autouse=True)
def _resume_loads_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    import mmengine.runner.loops

    # MMEngine's own resume loads the message hub's pickled buffers with torch.load's default
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    # MMEngine's _InfiniteDataloaderIterator sleeps 2 s whenever it restarts a finite loader
    monkeypatch.setattr(mmengine.runner.loops, "time", SimpleNamespace(sleep=lambda _: None))


@pytest.fixture(autouse=True)
def _config_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Config.pretty_text`` formatted once per config content (:func:`resume_kit.pretty_text_once`)."""
    from mmengine.config import Config

    monkeypatch.setattr(Config, "pretty_text", pretty_text_once())


@pytest.fixture
def library(case: str) -> str:
    """The case's library, imported as its configs need (mmagic: its SR parts); skipped where not installed."""
    name = CASES[case][0]
    if name not in _CONFIGS:
        pytest.skip(f"{name} is not installed")
    if name == "mmagic":
        import mmagic_parts

        mmagic_parts.import_sr_parts()
    if name == "mmpose":
        pytest.importorskip("xtcocotools", reason="mmpose's modules import xtcocotools (scripts/setup.sh builds it)")
        if "rtmpose" in case:
            pytest.importorskip("albumentations", reason="RTMPose's pipelines run albumentations (scripts/setup.sh)")
        import pose_kit  # noqa: F401  mmpose's modules and TinyPose
    return name


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_at_an_arbitrary_iteration_continues_as_the_runners_resume(tmp_path: Path, case: str, library: str) -> None:
    stop = CASES[case][3]
    runner, lightning = stopped_then_resumed(derived_config(tmp_path, case), tmp_path, stop)
    checkpoints = sorted(path.name for path in runner.glob("*.pth"))
    assert (f"iter_{stop}.pth" in checkpoints or case in KEEPS_ONE) and len(checkpoints) > 1, checkpoints
    keys = {key for run in (0, 1) for row in scalars(runner, run) for key in row}
    assert keys >= set(METRICS.get(case, ())), sorted(keys)  # the case trains and validates as meant, under the Runner
    if case in SCORING:
        assert any(row.get(SCORING[case], 0) > 0 for run in (0, 1) for row in scalars(runner, run)), SCORING[case]
    assert first_difference(case, runner, lightning, checkpoints) is None


#: the killed runs: case: (the checkpoint the kill follows, the iteration the process is held before, the checkpoint
#: files after the resume). Mask R-CNN (2 iterations an epoch, CocoMetric on boxes and masks each epoch; the two-stage
#: path, its samplers drawing from torch's generator, and the mask head): killed in iteration 4 (mid-epoch 2), in epoch
#: 2's validation or at the start of iteration 5, wherever the kill lands; both hosts resume from iter_3.pth by running
#: epoch 2 again (iterations 4 to 7), validating after epochs 2 and 3
KILLED = {"mmdet-mask-rcnn-r50": (3, 5, ["iter_3.pth", "iter_6.pth"])}


@pytest.mark.parametrize("case", sorted(KILLED))
def test_resume_after_a_sigkill_continues_as_the_runners_resume(tmp_path: Path, case: str, library: str) -> None:
    """``lightning-hooks train`` and ``tools/train.py`` of a shipped config, each in a process of its own, killed with
    SIGKILL once the checkpoint is written (:data:`KILLED`; the kill lands in the iteration after it, its work lost),
    then resumed with ``--resume`` (``resume=True``), each in a new second (its own time-stamp folder): the resumed
    runs agree as in the corpus (losses, lr, metrics, log lines, files, every checkpoint's weights and optimizer
    state)."""
    checkpoint, hold, expected = KILLED[case]
    config = derived_config(tmp_path, case)
    config.write_text(config.read_text() + "custom_hooks = [*custom_hooks, dict(type='HoldHook')]\n"
                      "custom_imports = dict(imports=['train_kit', 'resume_kit'], allow_failed_imports=False)\n")  # fmt: skip
    runner, lightning = killed_then_resumed(config, tmp_path, checkpoint, hold)
    checkpoints = sorted(path.name for path in runner.glob("*.pth"))
    assert checkpoints == expected, checkpoints
    assert scalars(runner)[0]["step"] == checkpoint + 1  # the resumed run starts after the checkpoint
    keys = {key for row in scalars(runner) for key in row}
    assert keys >= set(METRICS.get(case, ())), sorted(keys)  # the resumed run trains and validates as meant
    # the killed runs' logs end wherever the kill landed: the resumed runs are compared
    assert first_difference(case, runner, lightning, checkpoints, every_run=False) is None
