"""numba kernels. Nothing here validates its input: the Python API does that first."""
