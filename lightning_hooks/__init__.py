"""lightning-hooks: run legacy training hooks unchanged inside lightning.Trainer."""
