_base_ = ['../../../configs/resnet/resnet18_8xb16_cifar10.py']

custom_imports = dict(imports=['projects.my_proj.my_proj'], allow_failed_imports=False)

model = dict(
    backbone=dict(type='TinyConvNet', channels=8, _delete_=True),
    head=dict(num_classes=4, in_channels=16, topk=(1, )))

img_norm_cfg = dict(mean=[125.307, 122.961, 113.8575], std=[51.5865, 50.847, 51.255], to_rgb=False)
train_pipeline = [
    dict(type='AddNoise', sigma=10.0),
    dict(type='RandomFlip', flip_prob=0.5, direction='horizontal'),
    dict(type='Normalize', **img_norm_cfg),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='ToTensor', keys=['gt_label']),
    dict(type='Collect', keys=['img', 'gt_label']),
]
test_pipeline = [
    dict(type='Normalize', **img_norm_cfg),
    dict(type='ImageToTensor', keys=['img']),
    dict(type='Collect', keys=['img']),
]
data = dict(
    samples_per_gpu=4, workers_per_gpu=0, persistent_workers=False,
    train=dict(type='SquaresDataset', n=16, seed=1, pipeline=train_pipeline, _delete_=True),
    val=dict(type='SquaresDataset', n=8, seed=2, pipeline=test_pipeline, test_mode=True, _delete_=True),
    test=dict(type='SquaresDataset', n=8, seed=2, pipeline=test_pipeline, test_mode=True, _delete_=True))
evaluation = dict(interval=1, metric=['accuracy', 'mean_confidence'], metric_options=dict(topk=(1, )))

custom_hooks = [dict(type='LossTrackerHook')]
lr_config = dict(policy='step', step=[1])
runner = dict(max_epochs=2)
log_config = dict(interval=1)
