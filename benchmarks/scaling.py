"""The scaling series: latency, open time and memory against static corpus size.

    python benchmarks/scaling.py           # 0, 25, 50, 100, 200, 541 MB; test-200k
    python benchmarks/scaling.py --smoke   # 0, 1 MB; test-20k

Every replay runs lookup-stats' protocol (n_ctx 4096, n_draft 8, empty
dynamic cache) in a fresh process, so that peak RSS and resident pages are
its own; replay latency is the median of three such processes. Baselines
run in the same command: the plain-Python reference (``tests/reference.py``,
dicts) on the same stream, where its dicts fit in memory, and the llama.cpp
lookup-file path (parse the legacy file into the mutable cache) for every
size. Results: ``benchmarks/results/scaling/STAMP.{json,md,png}``.
"""

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

# Beyond this the reference's dict-of-dicts static cache outgrows a 24 GiB machine.
REFERENCE_MAX_MB = 25
# Replays per size, each in a fresh process; the table reports their median
# and range, because other tenants of a shared machine move single runs by 10-20%.
REPLAY_RUNS = 3


def probe(mode, tokens=None, static=None, **options):
    """One measurement (``cmd_<mode>``) in a fresh process."""
    spec = {"mode": mode, "tokens": str(tokens) if tokens else None, **options}
    spec["static"] = str(static) if static else None
    return harness.fresh(
        __file__, {k: (str(v) if isinstance(v, Path) else v) for k, v in spec.items()}
    )


def work(spec):
    return globals()[f"cmd_{spec['mode']}"](spec)


def peak_rss_kb():
    """This process image's peak RSS (VmHWM): ru_maxrss would carry over the
    parent's peak through fork and exec."""
    with open("/proc/self/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM")))


def mapping_rss_kb(path):
    """Resident kB of the mappings of ``path`` in this process (/proc/self/smaps)."""
    target = str(Path(path).resolve())
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if len(head) >= 5 and "-" in head[0] and not line.startswith(("Rss", "Size")):
                inside = head[-1] == target
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


def _static(path):
    from ngramdraft import StaticCache

    return StaticCache.open(path) if path else None


def cmd_replay(args):
    from ngramdraft import replay

    tokens = np.fromfile(args["tokens"], "<i4")
    t0 = time.perf_counter()
    static = _static(args.get("static"))
    t_open = time.perf_counter() - t0
    dump = args.get("dump")
    result = replay(tokens, args["n_ctx"], args["n_draft"], static, dump=bool(dump))
    if dump:
        result.dump.astype("<i4").tofile(dump)
    out = result.to_dict()
    out.update(t_open_ms=1000 * t_open, peak_rss_kb=peak_rss_kb())
    if args.get("static"):
        out["static_resident_kb"] = mapping_rss_kb(args["static"])
    return out


def cmd_api(args):
    """lookup-stats' protocol driven through Drafter.draft()/accept() from Python."""
    from ngramdraft import Drafter

    tokens = np.fromfile(args["tokens"], "<i4")
    n_ctx = args["n_ctx"]
    drafter = Drafter(_static(args.get("static")), n_draft=args["n_draft"])
    n_drafted = n_accept = n_calls = 0
    elapsed = 0.0
    for start in range(0, len(tokens) - n_ctx, n_ctx):
        chunk = tokens[start : start + n_ctx]
        drafter.start(chunk[:1])
        n_out = 1
        while n_out < n_ctx:
            t0 = time.perf_counter()
            draft = drafter.draft()
            n = 0
            while n < len(draft) and n_out + n < n_ctx and draft[n] == chunk[n_out + n]:
                n += 1
            accepted = chunk[n_out : min(n_out + n + 1, n_ctx)]
            drafter.accept(accepted)
            elapsed += time.perf_counter() - t0
            n_calls += 1
            n_drafted += len(draft)
            n_accept += n
            n_out += len(accepted)
        drafter.finish()
    return {
        "n_calls": n_calls,
        "n_drafted": n_drafted,
        "n_accept": n_accept,
        "t_draft_ms": 1000 * elapsed,
        "us_per_drafted": 1e6 * elapsed / max(n_drafted, 1),
        "peak_rss_kb": peak_rss_kb(),
    }


def cmd_open(args):
    t0 = time.perf_counter()
    import ngramdraft  # noqa: F401  (import is not open time)

    t1 = time.perf_counter()
    _static(args["static"])
    return {"t_open_ms": 1000 * (time.perf_counter() - t1), "t_import_ms": 1000 * (t1 - t0)}


def cmd_build(args):
    from ngramdraft import build_static

    t0 = time.perf_counter()
    cache = build_static(args["tokens"], args["out"], memory_limit=args.get("memory_limit"))
    return {
        "t_build_s": time.perf_counter() - t0,
        "peak_rss_kb": peak_rss_kb(),
        "n_2grams": len(cache),
        "file_bytes": Path(args["out"]).stat().st_size,
    }


def _reference():
    """The plain-Python reference the tests hold (dicts, written from docs/rules.md)."""
    path = harness.REPO / "tests" / "reference.py"
    spec = importlib.util.spec_from_file_location("reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_replay(tokens, static_tokens, n_ctx, n_draft):
    R = _reference()

    static = R.static_cache(static_tokens.tolist()) if static_tokens is not None else None
    t0 = time.perf_counter()
    _, n_drafted, n_accept, dump = R.replay(tokens.tolist(), n_ctx, n_draft, static)
    elapsed = time.perf_counter() - t0
    return {
        "n_drafted": n_drafted,
        "n_accept": n_accept,
        "t_ms": 1000 * elapsed,
        "us_per_drafted": 1e6 * elapsed / max(n_drafted, 1),
        "dump": np.asarray(dump, dtype=np.int32),
    }


def lookup_file_path(mb):
    """Load the same static cache from a llama.cpp lookup file into the mutable cache."""
    from ngramdraft import NgramCache

    path = corpora.lookup_file(mb)
    t0 = time.perf_counter()
    cache = NgramCache.load(path)
    return {
        "t_load_s": time.perf_counter() - t0,
        "file_bytes": path.stat().st_size,
        "n_ngrams": len(cache),
    }


def median_open(path, fresh):
    if fresh:
        return float(np.median([probe("open", static=path)["t_open_ms"] for _ in range(5)]))
    from ngramdraft import StaticCache

    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        StaticCache.open(path)
        times.append(1000 * (time.perf_counter() - t0))
    return float(np.median(times))


def run(sizes, n_test, n_ctx, n_draft, with_build):
    tmp = corpora.DATA / "run"
    tmp.mkdir(parents=True, exist_ok=True)
    tokens = corpora.test_stream(n_test)
    stream = tmp / "test.i32"
    tokens.astype("<i4").tofile(stream)
    parity = {0: "P1", 25: "P2"} if n_test == 200_000 else {}
    if 25 in sizes:
        assert np.array_equal(corpora.prefix_tokens(25), corpora.parity_train_25m())
    # Compile (or load) every kernel once, so that no measured process compiles.
    warm = corpora.static_cache(min(s for s in sizes if s)).path
    protocol = {"n_ctx": n_ctx, "n_draft": n_draft}
    probe("replay", stream, warm, **protocol)
    probe("api", stream, warm, **protocol)
    rows = []
    for mb in sizes:
        print(f"--- static corpus {mb} MB", file=sys.stderr, flush=True)
        row = {"corpus_mb": mb}
        static_path = None
        if mb:
            cache = corpora.static_cache(mb)
            static_path = cache.path
            size = cache.path.stat().st_size
            row.update(
                n_2grams=len(cache),
                file_mb=size / 1e6,
                bytes_per_2gram=size / len(cache),
                n_corpus_tokens=cache.header.n_source_tokens,
                open_ms_fresh_process=median_open(cache.path, fresh=True),
                open_ms_in_process=median_open(cache.path, fresh=False),
            )
        dump = tmp / f"dump-{mb}.i32"
        # Recording the drafts is work inside the timed loop: one run records
        # them for the checks below, the timed runs do not.
        dumped = probe("replay", stream, static_path, dump=str(dump), **protocol)
        reps = [probe("replay", stream, static_path, **protocol) for _ in range(REPLAY_RUNS)]
        times = sorted(r["us_per_drafted"] for r in reps)
        rep = reps[0]
        api = probe("api", stream, static_path, **protocol)
        assert len({(r["n_drafted"], r["n_accept"]) for r in [dumped, *reps, api]}) == 1
        row.update(
            us_per_drafted=float(np.median(times)),
            us_per_drafted_range=f"{times[0]:.3f}-{times[-1]:.3f}",
            n_drafted=rep["n_drafted"],
            n_accept=rep["n_accept"],
            accept_pct=rep["accept"],
            api_us_per_drafted=api["us_per_drafted"],
            api_over_replay=api["us_per_drafted"] / float(np.median(times)),
            peak_rss_mb=rep["peak_rss_kb"] / 1024,
            static_resident_mb=rep.get("static_resident_kb", 0) / 1024,
        )
        if mb in parity:
            recorded = corpora.parity_dump(parity[mb])
            row["equals_reference_cpp_drafts"] = bool(
                np.array_equal(np.fromfile(dump, "<i4"), recorded)
            )
        if mb <= REFERENCE_MAX_MB:
            print(f"    plain-Python reference at {mb} MB", file=sys.stderr, flush=True)
            ref = reference_replay(
                tokens, corpora.prefix_tokens(mb) if mb else None, n_ctx, n_draft
            )
            assert np.array_equal(ref["dump"], np.fromfile(dump, "<i4")), "drafts differ"
            row.update(
                reference_us_per_drafted=ref["us_per_drafted"],
                speedup_vs_reference=ref["us_per_drafted"] / row["us_per_drafted"],
            )
        if mb:
            lcp = lookup_file_path(mb)
            row.update(
                lookup_file_load_s=lcp["t_load_s"],
                open_speedup_vs_lookup_file=lcp["t_load_s"] * 1000 / row["open_ms_fresh_process"],
            )
        rows.append(row)
    base = next((r["peak_rss_mb"] for r in rows if r["corpus_mb"] == 0), None)
    for r in rows:
        if base is not None and r["corpus_mb"]:
            r["static_cache_memory_mb"] = r["peak_rss_mb"] - base
    build = build_series(max(s for s in sizes if s)) if with_build else None
    return rows, build


def build_series(mb):
    """Build time and peak memory from the token array, without and with --memory-limit 1G."""
    tokens = corpora.prefix_file(mb)
    out = {}
    for label, limit in (("no limit", None), ("--memory-limit 1G", 1 << 30)):
        r = probe("build", tokens, out=str(corpora.DATA / "run" / "built.ngd"), memory_limit=limit)
        out[label] = {"seconds": r["t_build_s"], "peak_rss_mb": r["peak_rss_kb"] / 1024}
    return {"corpus_mb": mb, "n_tokens": int(tokens.stat().st_size // 4), "runs": out}


COLUMNS = [
    ("corpus_mb", "static corpus (MB)", "{:g}"),
    ("n_2grams", "2-grams", "{:,}"),
    ("file_mb", "file (MB)", "{:.1f}"),
    ("bytes_per_2gram", "bytes / 2-gram", "{:.1f}"),
    ("open_ms_fresh_process", "open (ms)", "{:.2f}"),
    ("us_per_drafted", "replay (us / drafted)", "{:.3f}"),
    ("us_per_drafted_range", "replay range", "{}"),
    ("api_us_per_drafted", "Drafter API (us / drafted)", "{:.2f}"),
    ("accept_pct", "accept (%)", "{:.3f}"),
    ("peak_rss_mb", "peak RSS (MB)", "{:.0f}"),
    ("static_cache_memory_mb", "static cache memory (MB)", "{:.0f}"),
    ("static_resident_mb", "mmap resident (MB)", "{:.0f}"),
    ("speedup_vs_reference", "x plain-Python reference", "{:.0f}"),
    ("lookup_file_load_s", "llama.cpp file load (s)", "{:.2f}"),
]


def markdown(result):
    lines = [
        "# Scaling: replay latency, open time and memory against the static corpus's size",
        "",
        f"Test stream: {result['n_test_tokens']:,} tokens of the held-out Gutenberg text "
        f"(llama3), n_ctx {result['n_ctx']}, n_draft {result['n_draft']}.",
        "",
        "| " + " | ".join(c[1] for c in COLUMNS) + " |",
        "|" + "---:|" * len(COLUMNS),
    ]
    for r in result["rows"]:
        cells = [fmt.format(r[k]) if r.get(k) is not None else "" for k, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    checks = [
        f"{r['corpus_mb']} MB: {'equal' if r['equals_reference_cpp_drafts'] else 'DIFFERENT'}"
        for r in result["rows"]
        if "equals_reference_cpp_drafts" in r
    ]
    if checks:
        lines += [
            "",
            "Drafts against llama.cpp's recorded drafts (P1, P2): "
            + ", ".join(checks)
            + ". Where the plain-Python reference ran, its drafts are equal too.",
        ]
    if result.get("build"):
        b = result["build"]
        lines += ["", f"Build from the {b['corpus_mb']} MB token array ({b['n_tokens']:,} tokens):"]
        for label, r in b["runs"].items():
            lines.append(f"- {label}: {r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:.0f} MB")
    return "\n".join(lines) + "\n"


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    mb = [r["corpus_mb"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(mb, [r["us_per_drafted"] for r in rows], "o-", label="replay (numba)")
    a.plot(mb, [r["api_us_per_drafted"] for r in rows], "s-", label="Drafter API (Python calls)")
    a.set_xlabel("static corpus (MB)")
    a.set_ylabel("us per drafted token")
    a.set_ylim(bottom=0)
    a.legend()
    a.set_title("Draft latency")
    with_static = [r for r in rows if r["corpus_mb"]]
    x = [r["corpus_mb"] for r in with_static]
    b.plot(x, [r["file_mb"] for r in with_static], "o-", label="file")
    b.plot(
        x,
        [r.get("static_cache_memory_mb", 0) for r in with_static],
        "s-",
        label="static cache memory (peak RSS - no-cache peak)",
    )
    b.plot(x, [r["static_resident_mb"] for r in with_static], "^-", label="resident mmap pages")
    b.set_xlabel("static corpus (MB)")
    b.set_ylabel("MB")
    b.legend()
    b.set_title("Memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=REPLAY_RUNS)
    ap.add_argument("--no-build", action="store_true", help="skip the build series")
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    corpora.SMOKE = args.smoke
    sizes = [0, 1] if args.smoke else [0, 25, 50, 100, 200, corpora.FULL_MB]
    n_test = 20_000 if args.smoke else 200_000
    rows, build = run(sizes, n_test, 4096, 8, with_build=not args.no_build)
    result = {"n_ctx": 4096, "n_draft": 8, "n_test_tokens": n_test, "rows": rows, "build": build}
    out = harness.save(
        "scaling",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )
    plot(result, out.with_suffix(".png"))


if __name__ == "__main__":
    main()
