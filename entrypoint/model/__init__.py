"""The checkpoint: where it lives (local, S3, hub), what its config files say, and the tiny test model."""
