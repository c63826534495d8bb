"""Objects and parts (paper 002): the quadruplet model and step, its evaluation, proxy data, WordNet."""
