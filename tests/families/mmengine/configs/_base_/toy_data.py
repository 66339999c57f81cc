# Model and data keys: MMEngine's Runner builds them; under Lightning the LightningModule and loaders own them.
model = dict(type='Toy')
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True, seed=3),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='Points', n=16, seed=1))
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='Points', n=8, seed=2))
val_evaluator = dict(type='ToyMSE')
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.1, momentum=0.0))
test_dataloader = val_dataloader
test_evaluator = val_evaluator
