"""build-static, tokenize and merge-static: corpora into static caches and token files."""

import argparse
import warnings
from pathlib import Path
from typing import Any

from ..build import distributed
from ..build.corpus import ONE_CORPUS, Corpus
from ..build.local import write_static
from ..build.sources import DatasetSource
from ..build.static import merge_static
from ..build.suffixes import build_suffixes
from ..errors import EmptyCacheWarning, InvalidParameterError
from ..files.atomic import atomic_output, write_array
from ..files.tokens import RAW_SUFFIXES
from ..tokenizers import CHOICES
from .args import parse_size, say, subcommand

CHUNK_TOKENS = 1 << 24  # tokens copied at a time into the token file


def register(sub: Any) -> None:
    b = subcommand(
        sub,
        "build-static",
        "count the 2-grams of a corpus into a static cache",
        "Count every (2-gram, follower) of a corpus into a static cache file, as "
        "llama.cpp's llama-lookup-create does. Inputs are token files, text files (with "
        "--tokenizer), local data files or a Hugging Face dataset.",
        [
            "ngramdraft build-static books/*.txt --tokenizer llama3 -o books.ngd",
            "ngramdraft build-static corpus.i32 -o corpus.ngd --memory-limit 1G",
            "ngramdraft build-static notes.txt --tokenizer model.gguf -o notes.ngd",
            "ngramdraft build-static books/*.txt --tokenizer llama3 -o books.ngd "
            "--cluster local:4 --memory-limit 2G",
            "ngramdraft build-static books/*.txt --tokenizer llama3 --suffix -o books.sfx.ngd",
        ],
    )
    b.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="token files (.i32/.bin little-endian int32, .npy) or text files (.txt)",
    )
    b.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")
    b.add_argument(
        "--memory-limit",
        type=parse_size,
        metavar="SIZE",
        help="target peak memory, e.g. 1G (default: one pass, as much as it takes); "
        "with --cluster, per worker",
    )
    b.add_argument(
        "--cluster",
        metavar="SPEC",
        help="count on Dask: local:N starts N worker processes here, tcp://HOST:PORT uses "
        "a running scheduler (pip install 'ngramdraft[dask]'); the file is the same",
    )
    b.add_argument(
        "--suffix",
        action="store_true",
        help="write the corpus's suffix array instead, for --rules suffix (8 bytes per token)",
    )
    b.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    _add_corpus_arguments(b)
    b.set_defaults(run=build_static_command)

    t = subcommand(
        sub,
        "tokenize",
        "tokenize a corpus into one token file",
        "Tokenize text files, local data files or a Hugging Face dataset into one "
        "little-endian int32 token file, the streams joined in order: the input both "
        "build-static and build-static --suffix take, or a prefix of it.",
        ["ngramdraft tokenize books/*.txt --tokenizer llama3 -o books.llama3.i32"],
    )
    t.add_argument("inputs", nargs="*", metavar="INPUT", help="text files (.txt)")
    t.add_argument("-o", "--output", required=True, metavar="FILE", help="the .i32 file to write")
    t.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    _add_corpus_arguments(t)
    t.set_defaults(run=tokenize_command, suffix=False)

    m = subcommand(
        sub,
        "merge-static",
        "combine static caches (e.g. built from shards)",
        "Add up the counts of several static caches into one (the same file as building "
        "from the joined corpora). Caches of different tokenizers are refused.",
        ["ngramdraft merge-static shard-*.ngd -o all.ngd --memory-limit 2G"],
    )
    m.add_argument("inputs", nargs="+", metavar="CACHE", help="static caches to combine")
    m.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")
    m.add_argument(
        "--memory-limit", type=parse_size, metavar="SIZE", help="target peak memory, e.g. 1G"
    )
    m.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    m.set_defaults(run=merge_static_command)


def _add_corpus_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("corpus (text is tokenized; token files are used as they are)")
    g.add_argument(
        "--dataset", metavar="NAME", help="Hugging Face dataset, e.g. Salesforce/wikitext"
    )
    g.add_argument("--config", metavar="NAME", help="dataset config, e.g. wikitext-103-raw-v1")
    g.add_argument(
        "--split", default="train", metavar="NAME", help="dataset split (default: train)"
    )
    g.add_argument(
        "--data-files",
        nargs="+",
        metavar="FILE",
        help="local text/jsonl/parquet/csv files, read by the same datasets builders",
    )
    g.add_argument(
        "--text-column",
        default="text",
        metavar="NAME",
        help="column holding the text in --dataset/--data-files (default: text)",
    )
    g.add_argument(
        "--tokenizer",
        metavar="NAME",
        help=f"what makes text tokens: {CHOICES}",
    )
    g.add_argument(
        "--separate-documents",
        action="store_true",
        help="no 2-gram crosses a document boundary (default: one joined sequence, "
        "as llama-lookup-create)",
    )
    g.add_argument(
        "--token-cache",
        metavar="DIR",
        help="where token arrays are kept for reuse (default $NGRAMDRAFT_CACHE "
        "or ~/.cache/ngramdraft)",
    )


def corpus_from_args(args: argparse.Namespace) -> Corpus:
    """The Corpus that build-static's arguments name."""
    if args.dataset or args.data_files:
        if args.inputs:
            raise InvalidParameterError(ONE_CORPUS)
        source = DatasetSource(
            args.dataset, args.config, args.split, args.data_files, args.text_column
        )
        return Corpus.of(source, args.tokenizer, args.separate_documents)
    return Corpus.of(args.inputs, args.tokenizer, args.separate_documents)


def build_static_command(args: argparse.Namespace) -> None:
    corpus = corpus_from_args(args)
    if args.suffix:
        _build_suffix(args, corpus)
        return
    if args.cluster:
        header = distributed.build_on(
            args.cluster, corpus, args.output, memory_limit=args.memory_limit, quiet=args.quiet
        )
    else:
        header = write_static(
            corpus.triples(args.token_cache, quiet=args.quiet),
            args.output,
            memory_limit=args.memory_limit,
            meta=corpus.meta(),
            quiet=args.quiet,
        )
    if header.n_keys == 0:
        warnings.warn(
            f"{args.output}: the corpus has {header.n_source_tokens} tokens and no 2-gram "
            "with a follower: the cache drafts nothing (is the input empty?)",
            EmptyCacheWarning,
            stacklevel=1,
        )
    say(
        args,
        f"{args.output}: {header.n_keys} 2-grams, {header.n_entries} entries, "
        f"from {header.n_source_tokens} tokens",
    )


def _build_suffix(args: argparse.Namespace, corpus: Corpus) -> None:
    if args.cluster:
        header = distributed.build_on(
            args.cluster,
            corpus,
            args.output,
            memory_limit=args.memory_limit,
            suffix=True,
            token_cache=args.token_cache,
            quiet=args.quiet,
        )
    else:
        header = build_suffixes(
            corpus,
            args.output,
            memory_limit=args.memory_limit,
            token_cache=args.token_cache,
            quiet=args.quiet,
        )
    if header.n_source_tokens < 3:
        warnings.warn(
            f"{args.output}: the corpus has {header.n_source_tokens} tokens, and a draft needs "
            "two matched and one after them: the file drafts nothing (is the input empty?)",
            EmptyCacheWarning,
            stacklevel=1,
        )
    say(
        args,
        f"{args.output}: the suffix array of {header.n_source_tokens} tokens "
        f"({header.n_entries - header.n_source_tokens} separators)",
    )


def tokenize_command(args: argparse.Namespace) -> None:
    corpus = corpus_from_args(args)
    if not corpus.source.is_text:
        raise InvalidParameterError("tokenize reads text: these inputs are token files already")
    if Path(args.output).suffix not in RAW_SUFFIXES:
        raise InvalidParameterError(f"{args.output}: a token file's name ends in .i32 or .bin")
    n = 0
    with atomic_output(args.output) as out:
        for stream, _ in corpus.source.streams(
            corpus.loaded_tokenizer, args.token_cache, quiet=args.quiet
        ):
            for start in range(0, len(stream), CHUNK_TOKENS):
                write_array(out, stream.read(start, CHUNK_TOKENS).astype("<i4"))
            n += len(stream)
    say(args, f"{args.output}: {n} tokens ({corpus.tokenizer})")


def merge_static_command(args: argparse.Namespace) -> None:
    cache = merge_static(args.inputs, args.output, memory_limit=args.memory_limit, quiet=args.quiet)
    say(args, f"{args.output}: {len(cache)} 2-grams, {cache.n_entries} entries")
