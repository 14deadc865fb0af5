"""Caches: the three roles' storage behind one interface (``base.Cache``).

``ngram`` is the mutable cache (context and dynamic roles), ``static`` the
mmap'd static cache, ``shared`` the dynamic files many writers add to.
For the suffix rules: ``positions`` (a sequence's index), ``requests`` (the
earlier requests) and ``suffix_corpus`` (a corpus's suffix file). The two
mapped kinds share ``mapped.MappedFile`` and its background page-in and
check (``warmup``). Each module also says what its role accepts
(``as_mutable``, ``as_static``, ``dynamic_role``, ``as_corpus``).
"""
