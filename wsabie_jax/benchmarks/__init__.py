"""The benchmark suites of launch/benchmark.py (suites.py): this project
beside LightFM on a panel of data sets (panel.py, timed.py), the
accelerator's feed (accelerator.py), the step's tables gathered or read
whole (gather_vs_whole.py). Scripts that print figures, never timed tests."""
