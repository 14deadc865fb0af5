"""Drafting: the objects a decoding loop talks to, over the caches and the rules.

``drafter`` (one sequence), ``batch`` (many sequences by id, one call per
step), ``state`` (a sequence's kernel state and the kernels that draft and
accept from it), ``policy`` (opt-in: how much of each draft to submit) and
``replay`` (llama.cpp's lookup-stats over a token stream).
"""
