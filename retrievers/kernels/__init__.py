"""The numba kernel layer, just above the data model: stage modules register their hot loops here.

* :mod:`~retrievers.kernels.registry` — ``kernel_example`` / ``jit_kernel`` / ``warm``: each kernel compiled once
  per process (or its Python function when numba is missing);
* :mod:`~retrievers.kernels.cache` — numba's on-disk cache with every file checked before numba reads it.

Nothing here imports a stage, an index or an embedding model.
"""
