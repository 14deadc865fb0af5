"""Random-weight llama models as GGUF files: tiny ones for lossless tests, real shapes for speed.

No model can be downloaded on the machines this project runs on, and none is
needed: greedy decoding with drafting must equal greedy decoding without it
for *any* weights, and a forward pass costs what the shape and quantization
make it cost, whatever the values. So the tests write a model of a few
hundred KB, and the engine benchmark one with a released model's dimensions.

The vocabulary is SentencePiece-style (``tokenizer.ggml.model = "llama"``):
``<unk>``, ``<s>``, ``</s>``, the 256 byte-fallback tokens ``<0x00>`` ..
``<0xFF>``, then word pieces (``▁the``, ...) with descending scores, so any
text tokenizes (unknown characters fall back to bytes) and detokenizes back.

Needs the ``gguf`` package (extra ``ngramdraft[llama]``).
"""

from dataclasses import dataclass

import numpy as np

from ngramdraft.errors import InvalidParameterError

# Word pieces of the tiny vocabulary: common English, enough that ordinary
# prompts tokenize mostly into pieces rather than bytes.
_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "was",
    "that",
    "he",
    "it",
    "for",
    "with",
    "as",
    "his",
    "on",
    "be",
    "at",
    "by",
    "had",
    "not",
    "are",
    "but",
    "from",
    "or",
    "have",
    "an",
    "they",
    "which",
    "one",
    "you",
    "were",
    "her",
    "all",
    "she",
    "there",
    "would",
    "their",
    "we",
    "him",
    "been",
    "has",
    "when",
    "who",
    "will",
    "more",
    "no",
    "if",
    "out",
    "so",
    "said",
    "what",
    "up",
    "its",
    "about",
    "into",
    "than",
    "them",
    "can",
    "only",
    "other",
    "new",
    "some",
    "could",
    "time",
    "these",
    "two",
    "may",
    "then",
    "do",
    "first",
    "any",
    "my",
    "now",
    "such",
    "like",
    "our",
    "over",
    "man",
    "me",
    "even",
    "most",
    "made",
    "after",
    "also",
    "did",
    "many",
    "before",
    "must",
    "through",
    "back",
    "years",
    "where",
    "much",
    "your",
    "way",
    "well",
    "down",
    "should",
    "because",
    "each",
    "just",
    "those",
    "people",
    "how",
    "too",
    "little",
    "state",
    "good",
    "very",
    "make",
    "world",
    "still",
    "own",
    "see",
    "men",
    "work",
    "long",
    "get",
    "here",
    "between",
    "both",
    "life",
    "being",
    "under",
    "never",
    "day",
    "same",
    "another",
    "know",
    "while",
    "last",
    "might",
    "us",
    "great",
    "old",
    "year",
    "off",
    "come",
    "since",
    "against",
    "go",
    "came",
    "right",
    "used",
    "take",
]


@dataclass(frozen=True)
class Shape:
    """A llama-architecture model's dimensions."""

    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx: int = 4096
    tied_output: bool = False  # no output.weight: the embedding doubles as the head

    @property
    def head_dim(self):
        return self.n_embd // self.n_head


# A few hundred KB: fast enough to generate thousands of tokens in a test.
TINY = Shape(n_vocab=259 + 3 * 64, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128)

# Qwen2.5-0.5B's transformer with the Llama-3 vocabulary (128,256 ids), so that
# token files tokenized with the bundled llama3 encoding feed it directly.
QWEN25_05B_LLAMA3 = Shape(
    n_vocab=128256, n_embd=896, n_layer=24, n_head=14, n_head_kv=2, n_ff=4864, tied_output=True
)


def sentencepiece_vocab(n_vocab):
    """(tokens, scores, types) of a byte-fallback SentencePiece vocabulary of n_vocab entries."""
    import gguf

    if n_vocab < 259 + 1:
        raise InvalidParameterError(f"n_vocab must be at least 260 (byte fallback), got {n_vocab}")
    T = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    types = [T.UNKNOWN, T.CONTROL, T.CONTROL, *([T.BYTE] * 256)]
    pieces = (
        ["▁", *(f"▁{w}" for w in _WORDS)] + [w for w in _WORDS] + list("abcdefghijklmnopqrstuvwxyz")
    )
    pieces = list(dict.fromkeys(pieces))
    i = 0
    while len(tokens) < n_vocab:
        tokens.append(pieces[i] if i < len(pieces) else f"▁w{i}")
        types.append(T.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(n_vocab - 259)]
    return tokens, scores, types


# A chat template of the simplest kind, so that chat completions and the benchmarks'
# smoke runs render messages as they do for a trained model.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def write_random_gguf(path, shape=TINY, *, quantization="F32", seed=0, name="ngramdraft-random"):
    """Write a llama-architecture GGUF with random weights of ``shape`` to ``path``.

    ``quantization`` is ``F32``, ``F16`` or ``Q8_0`` for the matrices (norms stay
    F32). Weights are scaled like an initialised network (std 1/sqrt(fan-in))
    so activations neither vanish nor overflow over many layers.
    """
    import gguf

    qtype = {
        "F32": gguf.GGMLQuantizationType.F32,
        "F16": gguf.GGMLQuantizationType.F16,
        "Q8_0": gguf.GGMLQuantizationType.Q8_0,
    }.get(quantization)
    if qtype is None:
        raise InvalidParameterError(f"quantization must be F32, F16 or Q8_0, got {quantization!r}")
    rng = np.random.default_rng(seed)
    s = shape
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(s.n_ctx)
    w.add_embedding_length(s.n_embd)
    w.add_block_count(s.n_layer)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_head_kv)
    w.add_rope_dimension_count(s.head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(s.n_vocab)
    w.add_file_type({"F32": 0, "F16": 1, "Q8_0": 7}[quantization])
    tokens, scores, types = sentencepiece_vocab(s.n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template(CHAT_TEMPLATE)

    def matrix(name, rows, cols, scale=None):
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        a *= scale if scale is not None else 1.0 / np.sqrt(cols)
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, a)
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qtype), raw_dtype=qtype)

    def norm(name):
        w.add_tensor(name, np.ones(s.n_embd, dtype=np.float32))

    kv = s.n_head_kv * s.head_dim
    matrix("token_embd.weight", s.n_vocab, s.n_embd, scale=1.0)
    for i in range(s.n_layer):
        norm(f"blk.{i}.attn_norm.weight")
        matrix(f"blk.{i}.attn_q.weight", s.n_embd, s.n_embd)
        matrix(f"blk.{i}.attn_k.weight", kv, s.n_embd)
        matrix(f"blk.{i}.attn_v.weight", kv, s.n_embd)
        matrix(f"blk.{i}.attn_output.weight", s.n_embd, s.n_embd)
        norm(f"blk.{i}.ffn_norm.weight")
        matrix(f"blk.{i}.ffn_gate.weight", s.n_ff, s.n_embd)
        matrix(f"blk.{i}.ffn_up.weight", s.n_ff, s.n_embd)
        matrix(f"blk.{i}.ffn_down.weight", s.n_embd, s.n_ff)
    norm("output_norm.weight")
    if not s.tied_output:
        matrix("output.weight", s.n_vocab, s.n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
