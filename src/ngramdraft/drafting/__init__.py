"""Drafting: the objects a decoding loop talks to, whatever the rule set.

``drafter`` (one sequence) and ``batch`` (many sequences by id, one call
per step) are the interfaces every rule set implements; ``rulesets`` finds
a rule set by the name ``rules=`` gives; ``policy`` (opt-in) says how much
of each draft to submit; ``replay`` is llama.cpp's lookup-stats over a
token stream. The rules themselves are ``ngramdraft/rulesets/``.
"""
