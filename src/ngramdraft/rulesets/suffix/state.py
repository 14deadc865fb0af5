"""The suffix rules' state: one int64 array holding everything a step needs.

A drafter (``rulesets/suffix/drafter.py``) writes it, so that a draft is one
kernel call with one argument; a batch hands its kernels the states'
addresses (``rows.py``).

=====  ===========  ==================================================
0      N            tokens in the sequence (read from its index)
1      MEM_N        tokens in the earlier requests (read from theirs)
2      SOURCE       the pointer's source: NONE, SEQ or MEM
3      POINTER      the position in that source standing for the next token
4      AGREED       accepted tokens equal to the source's since it was set
5      MISSES       accepted tokens in a row not equal to the source's
6      JUST_JUMPED  1 until the first token after a jump is accepted
7      JUMPS        jumps the drafter has judged (in all sequences)
8      LANDED       of those, the ones whose first token was right
9-10                n_draft, min_match
11     SEQ_INDEX    address of the sequence's PositionIndex handle
12     MEM_INDEX    address of the earlier requests' PositionIndex handle
13-14  OUT          the draft buffer (address, length)
15-22  CORPUS       the corpus's tokens, suffix array, buckets and n-gram
                    index (address, length each; lengths 0: no corpus)
23-26  CORPUS_ARGS  its search's parameters (``kernels/suffixsearch.py``)
27     HINT         where ties in the sequence go with no pointer
28-31  CORPUS_LAST  the corpus's previous search, where the next starts
32-33  DIVERGED     where a copy from the sequence diverged: the source's
                    position and the sequence's (-1: no divergence pending)
34-35  EMITTING     the substitution whose new tokens the pointer is
                    walking (-1: none), and how many it has passed
36     APPLIED      how many substitutions are seen enough to be applied
37     FROM_CORPUS  1 if the last draft came from the corpus, not a copy
40-119 LEARNED      the substitutions, 5 words each: the old tokens'
                    position in the sequence and count, the new ones',
                    and the sightings since it last missed
=====  ===========  ==================================================
"""

from ...kernels.suffixsearch import LAST_N, LAST_WORDS

N, MEM_N, SOURCE, POINTER, AGREED, MISSES = range(6)
JUST_JUMPED, JUMPS, LANDED, N_DRAFT, MIN_MATCH = range(6, 11)
SEQ_INDEX, MEM_INDEX, OUT, CORPUS_TEXT, CORPUS_SA, CORPUS_BUCKETS, CORPUS_GRAMS = (
    11, 12, 13, 15, 17, 19, 21
)  # fmt: skip
CORPUS_ARGS, HINT, CORPUS_LAST = 23, 27, 28
DIVERGED, EMITTING, APPLIED, FROM_CORPUS, LEARNED = 32, 34, 36, 37, 40
# A learned substitution's words (LEARNED + entry * ENTRY_WORDS + these).
OLD_AT, OLD_LEN, NEW_AT, NEW_LEN, SEEN = range(5)
ENTRY_WORDS = 5
SUBSTITUTIONS = 16  # entries (docs/suffix.md: why 16, as counted on edit)
STATE_WORDS = LEARNED + SUBSTITUTIONS * ENTRY_WORDS
NONE, SEQ, MEM = 0, 1, 2  # a pointer's source: none, the sequence, the earlier requests
CORPUS_LAST_WORDS = LAST_WORDS


def restart(st):
    """Drop the pointer, its hint, what was learned and the corpus's last search: a
    sequence's start."""
    st[SOURCE], st[HINT], st[CORPUS_LAST + LAST_N] = NONE, 0, -1
    st[DIVERGED + 1], st[EMITTING], st[APPLIED] = -1, -1, 0
    st[LEARNED:] = 0
