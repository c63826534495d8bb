"""WSABIE (paper 000): settings, WARP with a fixed budget of draws, the per-pair objective, the step, VSE-ens (paper 003)."""
