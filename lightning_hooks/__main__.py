from lightning_hooks.cli import main

main()
