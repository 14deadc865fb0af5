"""The native cache file (``.ngd``): its header, reading it, writing it, one module each.

The byte layout is specified in ``docs/format.md``; this package is its only
implementation, the numba kernels that read the arrays (``kernels/frozen.py``,
``kernels/constmap.py``) aside. A file is a 512-byte header followed by
sections, each aligned to 64 bytes, in any order the header's section table
gives. The 2-gram kinds (static, dynamic) have these seven:

=========  ===========================  ======================================
section    contents                     size
=========  ===========================  ======================================
meta       UTF-8 JSON object            <= 1 MiB
keys       int32[n_keys, key_width]     n_keys * key_width * 4
offsets    int64[n_keys + 1]            (n_keys + 1) * 8
stats      int32[n_keys, 3]             n_keys * 12
tokens     int32[n_entries]             n_entries * 4
counts     int32[n_entries]             n_entries * 4
fuse       uint32[(segs + 2) * seglen]  0 when n_keys == 0
=========  ===========================  ======================================

The suffix kind (a corpus for ``rules="suffix"``) has meta, tokens
(int32[T]) and suffixes (int32[T]), written by :func:`write_suffix_file`.
Every 2-gram file, static or dynamic, built on one machine or on a cluster,
or saved from memory, is assembled by :class:`NgdWriter`. Reading parses and
checks only the header (one page): opening costs the same at any size.
``verify_sections`` reads everything and checks the checksums.

``header`` holds the format's constants and parses the header with every
size checked; ``reading`` maps a file and reads its sections; ``writing``
holds the writers.
"""
