"""Corpus sources, tokenizer adapters and tokenization caching (data/ ships the sample corpus)."""

import time

import numpy as np
import pytest

from conftest import REPO
from ngramdraft import CorpusError, StaticCache
from ngramdraft.build.sources import DatasetSource, TextFiles
from ngramdraft.build.tokenize import pieces, tokenize
from ngramdraft.tokenizers import HFTokenizer, QuicktokTokenizer, identity, load_tokenizer

DATA = REPO / "data"
BOOKS = sorted((DATA / "gutenberg").glob("*.txt"))


@pytest.fixture(scope="module")
def llama3():
    return load_tokenizer("llama3")


def test_pieces_keep_blank_lines():
    assert pieces("a\n\nb\n\n\nc") == ["a\n\n", "b\n\n", "\nc"]
    assert "".join(pieces("x\n\ny\n\n")) == "x\n\ny\n\n"


@pytest.mark.parametrize(
    "files",
    [BOOKS, [DATA / "gutenberg.jsonl"], [DATA / "gutenberg.parquet"]],
    ids=["text", "jsonl", "parquet"],
)
def test_local_files_through_datasets_give_the_shipped_tokens(files, llama3, tmp_path):
    source = DatasetSource(data_files=files)
    tokens, starts = tokenize(source, llama3, tmp_path)
    expected = np.fromfile(DATA / "gutenberg.llama3.i32", "<i4")
    assert len(starts) == 3
    assert np.array_equal(tokens.read(0, len(tokens)), expected)


def test_text_file_source_matches_the_tokenizer(llama3, tmp_path):
    tokens, starts = tokenize(TextFiles(BOOKS), llama3, tmp_path)
    assert np.array_equal(
        tokens.read(0, len(tokens)), np.fromfile(DATA / "gutenberg.llama3.i32", "<i4")
    )
    assert starts[0] == 0 and np.all(np.diff(starts) > 0)


def test_second_tokenize_is_served_from_the_cache(llama3, tmp_path, monkeypatch):
    tokenize(TextFiles(BOOKS[:1]), llama3, tmp_path)

    def refuse(texts):
        raise AssertionError("tokenized again")

    monkeypatch.setattr(llama3, "encode_batch", refuse)
    monkeypatch.setattr(
        "ngramdraft.build.tokenize.identity", lambda t: identity(load_tokenizer("llama3"))
    )
    tokens, _ = tokenize(TextFiles(BOOKS[:1]), llama3, tmp_path)
    assert len(tokens) > 0


def test_offline_hub_fails_fast_with_directions(monkeypatch):
    """Without the hub, load_dataset retries for ~25 s; we fail in seconds, saying what to do."""
    import datasets

    monkeypatch.setenv(
        "HF_ENDPOINT", "http://127.0.0.1:9"
    )  # refused at once, with or without a network
    before = datasets.config.HF_HUB_OFFLINE
    source = DatasetSource("Salesforce/wikitext", "wikitext-103-raw-v1", "train")
    t0 = time.perf_counter()
    with pytest.raises(CorpusError) as info:
        source.load()
    assert time.perf_counter() - t0 < 10
    message = str(info.value)
    assert "unreachable" in message and "--data-files" in message
    assert "load_dataset('Salesforce/wikitext', 'wikitext-103-raw-v1')" in message
    assert before == datasets.config.HF_HUB_OFFLINE  # the switch was restored


def test_unknown_column_and_missing_files_are_named(tmp_path):
    with pytest.raises(CorpusError, match="no column 'body'"):
        DatasetSource(data_files=[DATA / "gutenberg.jsonl"], text_column="body").load()
    with pytest.raises(CorpusError, match="not found"):
        DatasetSource(data_files=[tmp_path / "nope.txt"])
    with pytest.raises(CorpusError, match="one of"):
        DatasetSource(data_files=[DATA / "gutenberg.jsonl", DATA / "gutenberg.parquet"])


@pytest.mark.parametrize("name", ["llama3", "qwen3", "cl100k_base", "o200k_base"])
def test_quicktok_adapter_gives_the_library_ids(name):
    import quicktok

    texts = [p.read_text()[:5000] for p in BOOKS]
    ids, offsets = QuicktokTokenizer(name).encode_batch(texts)
    enc = quicktok.get_encoding(name)
    for i, text in enumerate(texts):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == list(enc.encode(text))


def test_huggingface_adapter_gives_the_library_ids(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train(
        [str(p) for p in BOOKS], trainers.BpeTrainer(vocab_size=500, special_tokens=["[UNK]"])
    )
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    adapter = load_tokenizer(str(path))
    assert isinstance(adapter, HFTokenizer)
    texts = [p.read_text()[:3000] for p in BOOKS]
    ids, offsets = adapter.encode_batch(texts)
    for i, text in enumerate(texts):
        assert ids[offsets[i] : offsets[i + 1]].tolist() == tok.encode(text).ids
    assert identity(adapter)["fingerprint"] != identity(load_tokenizer("llama3"))["fingerprint"]


def test_hub_tokenizer_offline_is_a_named_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CorpusError, match="bundled encoding"):
        load_tokenizer("meta-llama/Llama-3.1-8B")


@pytest.mark.parametrize("form", ["text", "data-files", "tokens"])
def test_build_static_cli_forms_record_the_tokenizer(cli, tmp_path, form):
    out = tmp_path / "c.ngd"
    cache_args = ["--token-cache", tmp_path / "tok", "-q"]
    if form == "text":
        status, _, err = cli(
            "build-static", *BOOKS, "--tokenizer", "llama3", "-o", out, *cache_args
        )
    elif form == "data-files":
        status, _, err = cli(
            "build-static",
            "--data-files",
            DATA / "gutenberg.parquet",
            "--tokenizer",
            "llama3",
            "-o",
            out,
            *cache_args,
        )
    else:
        status, _, err = cli(
            "build-static", DATA / "gutenberg.llama3.i32", "--tokenizer", "llama3", "-o", out, "-q"
        )
    assert status == 0, err
    cache = StaticCache.open(out, tokenizer="llama3")
    assert cache.tokenizer_name == "llama3" and len(cache) == 64409
    from ngramdraft import TokenizerMismatchError

    with pytest.raises(TokenizerMismatchError):
        StaticCache.open(out, tokenizer="qwen3")


def test_separate_documents_drop_crossing_2grams(cli, tmp_path):
    joined, apart = tmp_path / "j.ngd", tmp_path / "a.ngd"
    common = ["--tokenizer", "llama3", "--token-cache", tmp_path / "tok", "-q"]
    assert cli("build-static", *BOOKS, "-o", joined, *common)[0] == 0
    assert cli("build-static", *BOOKS, "-o", apart, "--separate-documents", *common)[0] == 0
    j, a = StaticCache.open(joined), StaticCache.open(apart)
    assert a.n_entries < j.n_entries
    assert j.header.n_entries - a.header.n_entries <= 2 * (len(BOOKS) - 1)
    assert a.meta["documents"] == "separate"
