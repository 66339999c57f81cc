# An iteration-based schedule in mmseg's style (schedule_20k.py), scaled down to 10 iterations.
param_scheduler = [
    dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
    dict(type='MultiStepLR', by_epoch=False, milestones=[5, 8], gamma=0.5),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=10, val_interval=4)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
