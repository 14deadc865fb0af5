"""The engine adapters' core (integrations/core.py) and their hosts' private parts
(integrations/*_host.py): one step, one statistics type, one named error per host."""

import types

import numpy as np
import pytest

from ngramdraft import Drafter, EngineVersionError
from ngramdraft.integrations import llama_cpp_host
from ngramdraft.integrations.core import DraftStats, DraftStep

TEXT = np.tile(np.arange(50, 90, dtype=np.int32), 12)  # a passage the model repeats


def _engine(step, text, prompt):
    """A greedy engine whose model says ``text``: asks ``step`` before each pass and
    accepts the draft up to its first wrong token, plus the model's own token.
    Returns (each pass's draft, each pass's accepted drafted tokens)."""
    seq, drafts, accepted = list(text[:prompt]), [], []
    while len(seq) < len(text):
        draft = step(np.array(seq, dtype=np.int32)).tolist()
        n = 0
        while n < len(draft) and len(seq) + n < len(text) and draft[n] == text[len(seq) + n]:
            n += 1
        seq += list(text[len(seq) : len(seq) + n + 1])
        drafts.append(draft)
        accepted.append(n)
    return drafts, accepted


def test_a_step_counts_what_the_engine_saw_and_drafts_as_a_drafter():
    step = DraftStep(Drafter(n_draft=8))
    drafts, accepted = _engine(step, TEXT, 30)
    stats = step.stats
    assert stats.sequences == 1 and stats.passes == len(drafts)
    assert stats.drafted == sum(map(len, drafts)) and stats.drafts == sum(map(bool, drafts))
    # The last pass's acceptance is known only at a next call, which never comes.
    assert stats.accepted == sum(accepted[:-1]) > 0 and stats.seconds > 0
    # The drafts are the rules' own: a Drafter told the same tokens drafts the same.
    plain, seq = Drafter(n_draft=8), TEXT[:30]
    plain.start(seq)
    for draft, n in zip(drafts, accepted, strict=True):
        assert plain.draft().tolist() == draft
        plain.accept(TEXT[len(seq) : len(seq) + n + 1])
        seq = TEXT[: len(seq) + n + 1]
    step.finish()
    assert stats.finished == 1 and not step.drafter.started


def test_a_new_sequence_starts_anew_and_a_cut_draft_is_what_is_counted():
    step = DraftStep(Drafter(n_draft=8))
    _engine(step, TEXT[:200], 30)
    cut = step(TEXT[:5], lambda d: d[:1])  # another prompt: the sequence starts again
    assert step.stats.sequences == 2 and len(cut) <= 1
    before = step.stats.drafted
    step(TEXT[:6], lambda d: d[:0])
    assert step.stats.drafted == before and step.stats.passes > 0


def test_stats_report_the_servers_figures():
    stats = DraftStats()
    stats.drafted_now(4)
    stats.accepted_draft(3)
    stats.drafted_now(0)
    figures = stats.as_dict()
    assert figures["passes"] == 2 and figures["drafts"] == 1
    assert figures["accepted_tokens_by_position"] == [1, 1, 1]
    assert figures["acceptance"] == 0.75 and figures["tokens_per_pass"] == 2.5


def test_a_llama_without_the_private_parts_the_adapter_reads_is_refused_by_name():
    missing = types.SimpleNamespace(_ctx=None, _model=None)
    with pytest.raises(EngineVersionError, match=r"_n_ctx.*written for 0\.3\.36"):
        llama_cpp_host.check(missing)


def test_a_transformers_model_without_its_assisted_loop_is_refused_by_name():
    transformers_host = pytest.importorskip("ngramdraft.integrations.transformers_host")
    with pytest.raises(EngineVersionError, match="_assisted_decoding"):
        transformers_host.check(object())
