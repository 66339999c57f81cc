"""Base classes compatible with the legacy frameworks, for hooks written without those frameworks installed."""
