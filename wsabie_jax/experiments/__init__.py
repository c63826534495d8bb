"""What launch scripts and notebooks call: train and restore runs, the papers' tables, annotation, benchmarks."""
