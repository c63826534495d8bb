"""Paper 000 §6.3's baselines: linear (One-vs-Rest, PAMIR-IA), k-NN (exact, RP-tree), ensembles (Table 7)."""
