"""Files: the bytes on disk and writing them safely.

``ngd`` is the native cache format (specified in ``docs/format.md``),
``llamacpp`` llama.cpp's lookup files, ``tokens`` token array files,
``atomic`` atomic writes and locks, ``kinds`` what a path holds. Nothing
here knows the drafting rules or the caches built on these files.
"""
