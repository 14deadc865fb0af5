"""Building static caches: from corpus sources to one ``.ngd`` file, on one machine or Dask.

``static`` and ``suffixes.build_suffix_corpus`` are the public entry points:
each writes a file and returns it opened, as a cache of the layer below.

``sources`` (what a corpus is: token files, text files, datasets), ``tokenize``
(text into reusable token files), ``corpus`` (one build's input, checked),
``counting`` (2-gram triples in bounded memory), ``local`` (the single-machine
build), ``distributed`` (the Dask build, byte for byte the same file) and
``suffixes`` (the suffix rules' corpus file).
Files are written by the format's one writer, ``files/ngd/writing.py``.
"""
