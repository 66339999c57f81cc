_base_ = ['./_base_/toy_data.py', './_base_/default_runtime.py', './_base_/schedule_3e.py']
train_dataloader = dict(sampler=dict(type='DefaultSampler', shuffle=True, seed=3))
