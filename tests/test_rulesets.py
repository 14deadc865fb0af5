"""The rule sets' registry (drafting/rulesets.py): every package it names provides what
rules= looks up, every package under ngramdraft/rulesets/ is named, and each entry point
makes its rule set's objects, instances of the interfaces."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ngramdraft.rulesets
from ngramdraft import BatchDrafter, Drafter, InvalidParameterError, ReplayResult, replay
from ngramdraft.drafting.rulesets import DEFAULT, RULE_SETS, rule_set
from ngramdraft.integrations.core import engine_drafter


def test_every_package_is_named_and_every_name_a_package():
    folder = Path(ngramdraft.rulesets.__file__).parent
    packages = {p.parent.name for p in folder.glob("*/__init__.py")}
    assert packages == set(RULE_SETS) and DEFAULT in RULE_SETS
    assert all(RULE_SETS[name] == f"ngramdraft.rulesets.{name}" for name in packages)


@pytest.mark.parametrize("rules", list(RULE_SETS))
def test_a_rule_set_provides_what_rules_looks_up(rules):
    package = rule_set(rules)
    assert issubclass(package.DRAFTER, Drafter) and package.DRAFTER is not Drafter
    assert issubclass(package.BATCH, BatchDrafter) and package.BATCH is not BatchDrafter
    assert isinstance(package.ENGINE_N_DRAFT, int) and package.ENGINE_N_DRAFT >= 1
    policy = package.engine_policy()
    assert policy is None or hasattr(policy, "length_of")  # a Policy (a Protocol)

    drafter = Drafter(n_draft=4, rules=rules)
    assert type(drafter) is package.DRAFTER and isinstance(drafter, Drafter)
    batch = BatchDrafter(n_draft=4, rules=rules)
    assert type(batch) is package.BATCH and isinstance(batch, BatchDrafter)
    # A rule set's class made directly is the same drafter.
    assert type(package.DRAFTER(n_draft=4)) is package.DRAFTER

    stream = np.tile(np.arange(40, dtype=np.int32), 20)
    result = replay(stream, 256, 4, rules=rules)
    assert isinstance(result, ReplayResult) and result.n_accept > 0

    made = engine_drafter(rules=rules)
    assert made.n_draft == package.ENGINE_N_DRAFT
    assert type(made.policy) is type(policy)


# Run in a fresh process (rules in argv[1]), each script prints the kernels that its
# first sequence loaded after the drafter was made: what a first request would wait for.
_LOADED = """
import sys
import numpy as np
from numba.core.registry import CPUDispatcher

def loaded():
    return {
        (name, k)
        for name, mod in list(sys.modules.items())
        if name.startswith("ngramdraft")
        for k, v in list(vars(mod).items())
        if isinstance(v, CPUDispatcher) and v.overloads
    }
"""

# An engine adapter's drafter (engine_drafter, as load_llama's and transformers' make it).
_FIRST_SEQUENCE = """
from ngramdraft.integrations.core import engine_drafter

drafter = engine_drafter(rules=sys.argv[1])
before = loaded()
drafter.start([5, 6, 7, 5, 6, 7, 5])
drafter.accept(drafter.draft())
drafter.accept([9])
drafter.sync([*drafter.tokens, 5, 6])
drafter.rewind(1)
drafter.draft()
for token in range(100, 3000):  # a sequence whose context table grows
    drafter.draft()
    drafter.accept([token % 700])
drafter.finish()
print(sorted(loaded() - before))
"""

# BatchDrafters after their rule set's load_batch_kernels (what vLLM's proposer calls as it is
# made), on one thread and over the machine's threads.
_FIRST_STEP = """
from ngramdraft import BatchDrafter
from ngramdraft.drafting.batch import PARALLEL_FROM
from ngramdraft.drafting.practice import load_batch_kernels

load_batch_kernels(sys.argv[1])
before = loaded()
for n in (1, 8, PARALLEL_FROM + 3):
    batch = BatchDrafter(rules=sys.argv[1], max_seqs=n)
    ids = list(range(n))
    for i in ids:
        batch.add(i, [5, 6, 7, 5, 6, 7, 5])
    out, lengths = batch.draft(ids)
    batch.accept(ids, out, lengths)
    batch.accept(ids, [[9]] * n)
    table = np.array([[*batch.tokens(i), 5, 6] for i in ids], dtype=np.int32)
    batch.sync(ids, table, np.full(n, table.shape[1]))
    batch.rewind(0, 1)
    batch.draft(ids)
    for token in range(100, 3000):  # sequences whose context tables grow
        batch.draft(ids)
        batch.accept(ids, [[token % 700]] * n)
    for i in ids:
        batch.finish(i)
print(sorted(loaded() - before))
"""


@pytest.mark.parametrize("rules", list(RULE_SETS))
@pytest.mark.parametrize("script", [_FIRST_SEQUENCE, _FIRST_STEP], ids=["one", "batch"])
def test_kernels_are_loaded_before_a_first_sequence(rules, script):
    # numba loads a kernel at its first call (about half a second for a rule set's): a
    # server's or a one-shot generate's first request waited for it after its prompt.
    run = subprocess.run(
        [sys.executable, "-c", _LOADED + script, rules],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert run.stdout.strip() == "[]"


def _unimplemented(interface):
    """The names an interface leaves to its rule sets (they raise NotImplementedError)."""
    names = set()
    for name, member in vars(interface).items():
        code = getattr(getattr(member, "fget", member), "__code__", None)
        if code is not None and "NotImplementedError" in code.co_names:
            names.add(name)
    return names


@pytest.mark.parametrize("rules", list(RULE_SETS))
@pytest.mark.parametrize("interface", [Drafter, BatchDrafter])
def test_a_rule_set_implements_all_its_interface_leaves_to_it(rules, interface):
    made = rule_set(rules).DRAFTER if interface is Drafter else rule_set(rules).BATCH
    left = _unimplemented(interface)
    assert len(left) >= (8 if interface is Drafter else 4)  # what the interface leaves is seen
    missing = [name for name in left if getattr(made, name) is getattr(interface, name)]
    assert not missing, f"{made.__name__} lacks {missing}"


@pytest.mark.parametrize("make", [Drafter, BatchDrafter, lambda **k: replay([1, 2], **k)])
def test_an_unknown_rule_set_is_named_with_the_choices(make):
    with pytest.raises(InvalidParameterError, match="choose one of 'llamacpp', 'suffix'"):
        make(rules="vllm")
