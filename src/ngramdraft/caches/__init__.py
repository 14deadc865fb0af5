"""Caches: the three roles' storage behind one interface (``base.Cache``).

``ngram`` is the mutable cache (context and dynamic roles), ``static`` the
mmap'd static cache and ``warmup`` its background page-in and check,
``shared`` the dynamic file many writers add to. Each module also says what
its role accepts (``as_mutable``, ``as_static``, ``dynamic_role``).
"""
