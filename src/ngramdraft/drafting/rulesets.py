"""The rule sets, by name: what ``rules=`` chooses everywhere (Drafter, BatchDrafter, replay,
the adapters, the command line).

Each rule set is a package of its own (``ngramdraft/rulesets/<name>/``):
its rules' kernels, its state's layout, its batch's row kernels and its
replay kernel, and the Python objects over them. The package's namespace
provides what the rest of ngramdraft looks up by name:

* ``DRAFTER``: its subclass of :class:`~ngramdraft.Drafter`;
* ``BATCH``: its subclass of :class:`~ngramdraft.BatchDrafter`;
* ``replay(tokens, n_ctx, n_draft, static, dynamic, *, dump, quiet, tokenizer)``:
  lookup-stats' protocol, returning a :class:`~ngramdraft.ReplayResult`;
* ``ENGINE_N_DRAFT`` and ``engine_policy()``: what an engine adapter drafts
  with unless told otherwise (``integrations/core.py``);
* ``exercise(folder)``: every kernel of the rule set run on tiny inputs,
  which ``cli/compiled.py`` runs to compile an installation's kernels once.

Adding a rule set is a package like those and one line below
(``docs/architecture.md``). A package is imported at its first use.
"""

import importlib
from types import ModuleType

from ..errors import InvalidParameterError

RULE_SETS = {
    "llamacpp": "ngramdraft.rulesets.llamacpp",  # llama.cpp's rules, bit for bit: the default
    "suffix": "ngramdraft.rulesets.suffix",  # opt-in: copy what followed the longest match
}
DEFAULT = "llamacpp"


def check_rules(rules: object) -> str:
    """``rules`` if it names a rule set, else InvalidParameterError listing them."""
    if not isinstance(rules, str) or rules not in RULE_SETS:
        names = ", ".join(f"'{name}'" for name in RULE_SETS)
        raise InvalidParameterError(
            f"rules={rules!r}: unknown rule set (choose one of {names}; '{DEFAULT}' is the default)"
        )
    return rules


def rule_set(rules: object) -> ModuleType:
    """The package of the rule set ``rules`` names."""
    return importlib.import_module(RULE_SETS[check_rules(rules)])
