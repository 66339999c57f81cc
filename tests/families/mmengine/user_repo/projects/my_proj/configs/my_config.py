_base_ = ['../../../configs/resnet/resnet18_8xb16_cifar10.py']

custom_imports = dict(imports=['projects.my_proj.my_proj'], allow_failed_imports=False)

model = dict(
    backbone=dict(type='TinyConvNet', channels=8, _delete_=True),
    head=dict(num_classes=4, in_channels=16))
data_preprocessor = dict(num_classes=4)

train_pipeline = [
    dict(type='AddNoise', sigma=10.0),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type='SquaresDataset', n=16, seed=1, pipeline=train_pipeline, _delete_=True))
val_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(type='SquaresDataset', n=8, seed=2, pipeline=[dict(type='PackInputs')], _delete_=True))
test_dataloader = val_dataloader
val_evaluator = [dict(type='Accuracy', topk=(1, )), dict(type='MeanConfidence')]
test_evaluator = val_evaluator

custom_hooks = [dict(type='LossTrackerHook')]
param_scheduler = dict(milestones=[1])
train_cfg = dict(max_epochs=2)
default_hooks = dict(logger=dict(interval=1))
randomness = dict(seed=0)
