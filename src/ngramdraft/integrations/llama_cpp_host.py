"""Every private part of llama-cpp-python that ngramdraft's adapter touches, in one place.

llama-cpp-python has no public way to evaluate a batch with the logits of
chosen rows, to drop positions from the KV cache, to run its sampler chain
on one row, or to reach the model its server loaded; ngramdraft's loop and
server need each. They are reached here alone, so that a host release that
renames one is met by one named error at load (:func:`check`), not by an
``AttributeError`` inside a request, and the next port touches one file.

Written against llama-cpp-python :data:`WRITTEN_FOR` (the version
``../shared/wheels`` and CI install).
"""

from typing import Any

from ..errors import EngineVersionError
from ..optional import require

WRITTEN_FOR = "0.3.36"
# The Llama attributes read below; checked on every model the adapter takes.
LLAMA_PRIVATE = (
    "_ctx", "_model", "_n_ctx", "_requires_eval", "_logits_all", "_is_recurrent",
    "_is_hybrid", "_init_sampler",
)  # fmt: skip


def _host() -> Any:
    return require("llama_cpp", "llama", "llama-cpp-python drafting")


def check(llama: Any) -> Any:
    """``llama`` itself, if it has every private attribute the adapter reads, else
    EngineVersionError naming those missing and the version this adapter was written for."""
    missing = [name for name in LLAMA_PRIVATE if not hasattr(llama, name)]
    if missing:
        raise EngineVersionError(
            f"llama-cpp-python {getattr(_host(), '__version__', '?')} has no "
            f"{', '.join(missing)} on its Llama; ngramdraft's adapter was written for "
            f"{WRITTEN_FOR}: pip install llama-cpp-python=={WRITTEN_FOR}"
        )
    return llama


def context(llama: Any) -> Any:
    """The ``llama_context`` pointer that llama.cpp's C functions take."""
    return llama._ctx.ctx


def drop_positions(llama: Any, start: int) -> None:
    """Remove positions ``start`` and after from every sequence of the KV cache."""
    llama._ctx.kv_cache_seq_rm(-1, start, -1)


def evaluated(llama: Any) -> None:
    """Tell the host its state holds what was just decoded (its own ``eval`` says so)."""
    llama._requires_eval = False


def context_size(llama: Any) -> int:
    """The context llama.cpp made, which may be rounded up from the one asked for."""
    return int(llama._n_ctx)


def vocab(llama: Any) -> Any:
    """The host's model wrapper (token texts, its ``vocab`` pointer)."""
    return llama._model


def own_tokenizer(llama: Any) -> bool:
    """Whether ``llama`` detokenizes with the host's own tokenizer (llama.cpp's vocabulary),
    not one given to it (a Hugging Face tokenizer, which reads ``prev_tokens``)."""
    return type(llama.tokenizer_) is _host().llama_tokenizer.LlamaTokenizer


def is_end(llama: Any, token: int) -> bool:
    """Whether ``token`` ends a generation (an end-of-generation token of the vocabulary)."""
    return bool(_host().llama_vocab_is_eog(llama._model.vocab, token))


def sampler(llama: Any, **settings: Any) -> Any:
    """The host's sampler chain for ``Llama.generate``'s sampling ``settings``."""
    return llama._init_sampler(**settings)


def sample(chain: Any, llama: Any, row: int) -> int:
    """The token the host's sampler chain picks from the last decode's output ``row``
    (negative: counted from the end, llama.cpp's own indexing)."""
    return int(chain.sample(llama._ctx, row))


def keeps_every_logit(llama: Any) -> bool:
    """Whether the model was made with ``logits_all``: every position's logits kept."""
    return bool(llama._logits_all)


def rolls_back(llama: Any) -> bool:
    """Whether the model's state can drop positions: not a recurrent or hybrid model."""
    return not (llama._is_recurrent or llama._is_hybrid)


def served_model(server_app: Any, cls: type) -> Any:
    """The one model ``llama_cpp.server.app.create_app`` just loaded, made an instance of
    ``cls`` (a subclass of its class that adds no state of its own): the host's server
    builds its ``Llama`` itself, and takes no class to build."""
    llama = check(server_app._llama_proxy())
    llama.__class__ = cls
    return llama
