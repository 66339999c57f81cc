# An epoch-based schedule in mmdet's style (schedule_1x.py), scaled down to 3 epochs.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
    dict(type='MultiStepLR', by_epoch=True, begin=0, end=3, milestones=[2], gamma=0.1),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=3, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
