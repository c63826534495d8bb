"""The training loop and what it runs on: clock and recorder, checkpoints, workdir, progress, data parallelism."""
