"""Caches: the three roles' storage behind one interface (``base.Cache``), opened.

This layer opens, reads and updates caches; a static file is made by the
build layer (``ngramdraft.build.static``, ``ngramdraft.build.suffixes``).

``ngram`` is the mutable cache (context and dynamic roles), ``static`` the
mmap'd static cache, ``shared`` the dynamic files many writers add to.
For the suffix rules: ``positions`` (a sequence's index), ``requests`` (the
earlier requests) and ``suffix_corpus`` (a corpus's suffix file). The two
mapped kinds share ``mapped.MappedFile`` and its background page-in and
check (``warmup``). Each module also says what its role accepts
(``as_mutable``, ``dynamic_role``, ``as_corpus``; ``as_static`` may build a
frozen copy, and lives in ``build/static.py``).
"""
