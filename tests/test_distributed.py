"""Static caches built on a real Dask cluster: byte for byte the single-machine file.

A LocalCluster of two worker processes (as a user's would be) builds the
same corpora as the single-machine build, cut into many shards and
partitions; a worker killed mid-build changes nothing; an input that cannot
be read ends in its named error with nothing at the output path.
"""

import glob
import json
import os
import signal
import threading
import time
import urllib.request

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from ngramdraft import StaticCache, SuffixCorpus  # noqa: E402
from ngramdraft.build import distributed as D  # noqa: E402
from ngramdraft.build.corpus import Corpus  # noqa: E402
from ngramdraft.build.counting import CacheTriples  # noqa: E402
from ngramdraft.build.local import write_static  # noqa: E402
from ngramdraft.build.sources import DatasetSource  # noqa: E402
from ngramdraft.build.suffixes import build_suffixes  # noqa: E402
from ngramdraft.errors import CorpusError  # noqa: E402
from ngramdraft.kernels.triples import INT32_MAX  # noqa: E402

pytestmark = pytest.mark.cluster

BOOKS = sorted(glob.glob("data/gutenberg/*.txt"))


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _single(corpus, path, tmp_path):
    write_static(corpus.triples(tmp_path / "tokens"), path, meta=corpus.meta())
    return path.read_bytes()


@pytest.mark.parametrize("separate", [False, True])
def test_text_files_build_the_single_machine_file(client, tmp_path, separate):
    corpus = Corpus.of(BOOKS, "llama3", separate)
    expected = _single(corpus, tmp_path / "single.ngd", tmp_path)
    D.build(client, corpus, tmp_path / "dist.ngd")
    assert (tmp_path / "dist.ngd").read_bytes() == expected


@pytest.mark.parametrize("shard_tokens", [1, 2, 3, 7, 1000, None])
def test_any_shards_and_partitions_give_the_same_bytes(client, tmp_path, shard_tokens):
    """Shards of one, two, three tokens put every triple across an edge: the client counts them."""
    rng = np.random.default_rng(shard_tokens or 0)
    files = []
    for i, n in enumerate((0, 1, 2, 5, 3000)):  # empty and tiny files: streams that barely start
        path = tmp_path / f"part{i}.i32"
        rng.integers(0, 40, n).astype("<i4").tofile(path)
        files.append(path)
    corpus = Corpus.of(files)
    expected = _single(corpus, tmp_path / "single.ngd", tmp_path)
    limit = None if shard_tokens else 1 << 20  # None: small partitions from a 1 MB budget
    D.build(client, corpus, tmp_path / "dist.ngd", shard_tokens=shard_tokens, memory_limit=limit)
    assert (tmp_path / "dist.ngd").read_bytes() == expected


def test_a_dataset_in_shards_builds_the_single_machine_file(client, tmp_path):
    source = DatasetSource(data_files=["data/gutenberg.jsonl"])
    corpus = Corpus.of(source, "llama3")
    expected = _single(corpus, tmp_path / "single.ngd", tmp_path)
    shards = D.plan_shards(client, corpus, shard_tokens=20_000)
    assert [s.part for s in shards] == [(3, 0), (3, 1), (3, 2)]  # a row range per book
    D.build(client, corpus, tmp_path / "dist.ngd", shard_tokens=20_000)
    assert (tmp_path / "dist.ngd").read_bytes() == expected


def test_the_command_line_on_a_local_cluster(cli, tmp_path):
    status, _, err = cli("build-static", *BOOKS, "--tokenizer", "llama3", "-o", tmp_path / "a.ngd")
    assert status == 0, err
    status, _, err = cli(
        "build-static", *BOOKS, "--tokenizer", "llama3", "-o", tmp_path / "b.ngd",
        "--cluster", "local:1", "--memory-limit", "512M",
    )  # fmt: skip
    assert status == 0, err
    assert (tmp_path / "a.ngd").read_bytes() == (tmp_path / "b.ngd").read_bytes()
    cache = StaticCache.open(tmp_path / "b.ngd")
    assert cache.meta["corpus"]["text_files"][0]["path"].endswith(os.path.basename(BOOKS[0]))


def test_a_killed_worker_changes_nothing(tmp_path):
    tokens = tmp_path / "big.i32"
    np.random.default_rng(5).integers(0, 3000, 3_000_000).astype("<i4").tofile(tokens)
    corpus = Corpus.of([tokens])
    expected = _single(corpus, tmp_path / "single.ngd", tmp_path)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        pids = list(c.run(os.getpid).values())

        def kill_when_counting():
            def counted(dask_scheduler):
                return sum(
                    ts.state == "memory" and str(ts.key).startswith("ngramdraft-count")
                    for ts in dask_scheduler.tasks.values()
                )

            deadline = time.time() + 60
            while c.run_on_scheduler(counted) < 10 and time.time() < deadline:
                time.sleep(0.01)
            os.kill(pids[0], signal.SIGKILL)

        killer = threading.Thread(target=kill_when_counting)
        killer.start()
        D.build(c, corpus, tmp_path / "dist.ngd", shard_tokens=20_000)
        killer.join()
        assert pids[0] not in c.run(os.getpid).values()  # the nanny started a new process
    assert (tmp_path / "dist.ngd").read_bytes() == expected


def test_an_input_that_cannot_be_read_is_named_and_nothing_is_written(client, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text\n\n\xff\xfe not utf-8\n")
    out = tmp_path / "out" / "cache.ngd"
    out.parent.mkdir()
    with pytest.raises(CorpusError, match="not UTF-8"):
        D.build(client, Corpus.of([BOOKS[0], bad], "llama3"), out)
    assert list(out.parent.iterdir()) == []


def test_counts_past_int32_saturate(tmp_path):
    keys = np.array([[1, 2]], dtype=np.int32)
    offsets = np.array([0, 1], dtype=np.int64)
    tokens = np.array([3], dtype=np.int32)
    big = np.array([INT32_MAX - 5], dtype=np.int32)
    sources = [CacheTriples(keys, offsets, tokens, big) for _ in range(3)]
    write_static(sources, tmp_path / "s.ngd")
    cache = StaticCache.open(tmp_path / "s.ngd")
    assert cache.followers((1, 2))[1].tolist() == [INT32_MAX]


def test_the_dashboard_serves(client):
    with urllib.request.urlopen(client.dashboard_link, timeout=10) as page:
        assert page.status == 200


def test_a_cluster_spec_that_is_neither_local_nor_an_address_is_named(cli, tmp_path):
    status, _, err = cli("build-static", *BOOKS, "--tokenizer", "llama3", "-o",
                         tmp_path / "x.ngd", "--cluster", "local:zero")  # fmt: skip
    assert status != 0 and "local:N" in err
    status, _, err = cli("build-static", *BOOKS, "--tokenizer", "llama3", "-o",
                         tmp_path / "x.ngd", "--cluster", "somehost")  # fmt: skip
    assert status != 0 and "tcp://" in err


def test_meta_is_the_single_machine_builds(client, tmp_path):
    corpus = Corpus.of(BOOKS, "llama3")
    D.build(client, corpus, tmp_path / "dist.ngd")
    meta = StaticCache.open(tmp_path / "dist.ngd").meta
    assert json.loads(json.dumps(meta))["documents"] == "joined"
    assert meta["tokenizer"]["name"] and meta["corpus"] == corpus.source.identity


def test_a_task_that_keeps_killing_its_workers_is_named(tmp_path):
    """A worker with too little memory for one shard: Dask retries, then the build says why."""
    tokens = tmp_path / "t.i32"
    np.random.default_rng(1).integers(0, 30000, 10_000_000).astype("<i4").tofile(tokens)
    out = tmp_path / "out.ngd"
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, memory_limit="300MiB",
            dashboard_address=":0",
        ) as cluster,
        distributed.Client(cluster) as c,
        pytest.raises(D.DistributedBuildError, match="more memory"),
    ):  # fmt: skip
        D.build(c, Corpus.of([tokens]), out, shard_tokens=10_000_000)
    assert not out.exists()


@pytest.mark.parametrize("separate", [False, True])
def test_files_of_many_blocks_in_shards_of_several(tmp_path, monkeypatch, separate):
    """Small blocks (a threaded cluster sees the patched size): edges fall inside files too."""
    from ngramdraft.build import sources, tokenize

    monkeypatch.setattr(sources, "BATCH_CHARS", 4096)
    monkeypatch.setattr(tokenize, "BATCH_CHARS", 4096)
    corpus = Corpus.of(BOOKS, "llama3", separate)
    expected = _single(corpus, tmp_path / "single.ngd", tmp_path)
    with (
        distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        shards = D.plan_shards(c, corpus, shard_tokens=3000)  # about 12 KB: three blocks
        assert len(shards) > 30 and max(len(s.part[1]) for s in shards) > 1
        D.build(c, corpus, tmp_path / "dist.ngd", shard_tokens=3000)
    assert (tmp_path / "dist.ngd").read_bytes() == expected


def test_suffix_files_sorted_on_workers_are_the_single_machine_file(client, tmp_path):
    """The suffix build's shards sorted as Dask tasks, merged here: the same bytes."""
    corpus = Corpus.of(BOOKS, "llama3", True)
    build_suffixes(corpus, tmp_path / "single.ngd", token_cache=str(tmp_path / "tokens"))
    build_suffixes(
        corpus,
        tmp_path / "dist.ngd",
        shard_tokens=5_000,
        token_cache=str(tmp_path / "tokens"),
        sort_shards=D.sort_shards_on(client),
    )
    assert (tmp_path / "dist.ngd").read_bytes() == (tmp_path / "single.ngd").read_bytes()
    assert len(SuffixCorpus.open(tmp_path / "dist.ngd").grams)  # the n-gram index too


def test_the_suffix_command_line_on_a_local_cluster(cli, tmp_path):
    build = ["build-static", *BOOKS, "--tokenizer", "llama3", "--suffix"]
    status, _, err = cli(*build, "-o", tmp_path / "a.ngd")
    assert status == 0, err
    status, _, err = cli(*build, "-o", tmp_path / "b.ngd", "--cluster", "local:1")
    assert status == 0, err
    assert (tmp_path / "a.ngd").read_bytes() == (tmp_path / "b.ngd").read_bytes()
