_base_ = ['./_base_/toy_data.py', './_base_/default_runtime.py', './_base_/schedule_10k.py']

# by-iteration hooks and logs, as mmseg's iteration-based configs set them
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=2, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=3, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
