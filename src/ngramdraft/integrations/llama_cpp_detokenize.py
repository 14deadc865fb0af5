"""A completion's text as llama-cpp-python detokenizes it, costing what its new tokens cost.

The host's ``create_completion`` detokenizes the whole completion so far
after every token it takes (to find stop strings and hold back a character
split across tokens): a completion of n tokens costs n²/2 token lookups,
each a call into llama.cpp from Python. Over a 0.5B model's 300-token
answer that was 62 ms, 0.2 ms a token, and it grows with the answer: 1-2%
of the answer's decode on a CPU, which llama-server, reading its text as
it goes, does not pay (``docs/serving.md``). Each token's text does not depend on those
around it (the host joins the pieces llama.cpp gives each token, then drops
the space a leading BOS token's text begins with), so the text of a list
that extends the last one is that text and the new tokens' own.
"""

from typing import Any

# Lists shorter than this are the host's own to detokenize, and leave the text kept
# alone: the host's stream asks, between two calls for the whole completion, for the
# text of the few tokens it has not sent yet.
SHORT = 16


class Detokenizer:
    """``Llama.detokenize`` for the host's own tokenizer, remembering the last long list.

    Calls may come from several threads (a server checks a request's tokens
    while another request streams): the list and its text are kept as one
    tuple, read and replaced whole, so a call never joins one list's text to
    another's; at worst it does not find the text it could have reused.
    """

    def __init__(self) -> None:
        self._kept: tuple[list[int], bytes, bool] = ([], b"", False)

    def __call__(self, model: Any, tokens: Any, special: bool) -> bytes:
        """The host's ``model.detokenize(tokens, special=special)`` (``model``: its
        ``LlamaModel``), its text for the tokens that extend the last long list alone."""
        short = not isinstance(tokens, list) or len(tokens) < SHORT
        if short or tokens[0] == (bos := model.token_bos()):
            return model.detokenize(tokens, special=special)
        kept, text, kept_special = self._kept
        n = len(kept)
        if special != kept_special or len(tokens) < n or tokens[:n] != kept:
            n = 0
        elif n < len(tokens) and tokens[n] == bos:
            n = 0  # the host would drop a space that begins the new tokens' text
        text = (text if n else b"") + model.detokenize(tokens[n:], special=special)
        self._kept = (list(tokens), text, special)
        return text
