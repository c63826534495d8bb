"""The papers' tables, each run from its configs and written beside the
paper's figures (launch/reproduce.py): WSABIE's (wsabie_tables.py), the
objects-and-parts model's (parts_tables.py), the negative samplers'
(sampler_tables.py), the skip-gram objective's (skipgram_tables.py), the
rank weights' (rank_weights.py); by_name.py finds one by its name."""
