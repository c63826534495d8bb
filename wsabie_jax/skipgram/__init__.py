"""The image–word skip-gram (paper 004): objectives, step, image tower, word vectors, the OOV pass."""
