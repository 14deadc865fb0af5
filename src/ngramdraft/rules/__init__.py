"""Drafting rules: what to draft from what the caches hold, one rule set per module.

``llamacpp`` is llama.cpp's rules bit for bit, the default, specified in
``docs/rules.md``. A rule set reads the caches through their kernels
(``kernels/``) and is called by the drafting layer's state kernels
(``drafting/state.py``) and replay (``drafting/replay.py``).
"""
