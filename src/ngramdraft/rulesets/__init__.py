"""The rule sets: how a drafter turns what it has seen into a draft, one package each.

``llamacpp`` is llama.cpp's lookup decoding, bit for bit (the default);
``suffix`` copies what followed the longest earlier match (opt-in). A
package holds its rules' kernels (``step.py``), its kernel state's layout
(``state.py``), the row kernels of its batch (``rows.py``), its replay
kernel (``replay.py``) and the Python objects over them (``drafter.py``,
``batch.py``); what its ``__init__`` provides, and how ``rules=`` finds
it, is ``drafting/rulesets.py``'s to say.
"""
