"""wsabie_jax: joint image–label embeddings trained with ranking losses (WSABIE, WARP)."""
