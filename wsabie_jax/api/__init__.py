"""What users, launch scripts and notebooks call: train a config into a
workdir and evaluate it (run.py), restore and annotate with a trained run
(annotate.py), configs by name (configs.py), the launch scripts' shared
command line (cli.py), the config printed field by field (config_view.py),
several processes on one machine (local_cluster.py)."""
