"""The shared core: tables and projection, row-sparse optimisers, negative samplers, exact metrics and evaluation."""
