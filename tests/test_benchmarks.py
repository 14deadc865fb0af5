"""The benchmarks cannot rot: each runs (its smoke mode, as a user runs it), uses the public
API only, and imports no other benchmark script; their workloads and ceilings are right.

Two benchmarks once failed at their first line for a year of no one running
them (a module the tests had moved, a private attribute renamed); now the
suite runs every one.
"""

import ast
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
SCRIPTS = sorted(
    p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith(("test_", "conftest"))
)
SHARED = sorted(p.name for p in (BENCHMARKS / "common").glob("*.py"))
# What a benchmark may import of ngramdraft: what a user may.
PUBLIC = {
    "ngramdraft",
    "ngramdraft.cli",
    "ngramdraft.integrations.llama_cpp",
    "ngramdraft.integrations.llama_cpp_measure",
    "ngramdraft.integrations.llama_cpp_server",
    "ngramdraft.integrations.transformers",
    "ngramdraft.integrations.vllm",
}
PUBLIC_NAMES = {"ngramdraft.tokenizers": {"load_tokenizer"}, "ngramdraft.cli": {"main"}}
# The smoke runs that need an engine or a cluster, and what they need.
NEEDS = {
    "ab.py --probes llama-load,llama-text,decode-apply-edit": ("engine", ("llama_cpp",)),
    "e2e.py": ("engine", ("llama_cpp", "gguf")),
    "real_model.py": ("engine", ("llama_cpp",)),
    "quality.py": ("engine", ("llama_cpp",)),
    "servers.py --before src": ("engine", ("llama_cpp", "gguf", "fastapi")),
    "cluster_build.py": ("cluster", ("distributed",)),
    "startup.py --first": ("slow", ()),  # compiles every kernel in a new cache: minutes
}

sys.path.insert(0, str(BENCHMARKS))


def _imports(path):
    """(module, names) of every import in a file, those inside functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, set()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.module or "", {a.name for a in node.names}))
    return found


@pytest.mark.parametrize("name", [*SCRIPTS, *(f"common/{n}" for n in SHARED), "test_latency.py"])
def test_benchmarks_use_the_public_api_only(name):
    for module, names in _imports(BENCHMARKS / name):
        if not module.startswith("ngramdraft"):
            continue
        if module in PUBLIC_NAMES and names <= PUBLIC_NAMES[module]:
            continue
        assert module in PUBLIC, f"{name} imports {module} {sorted(names)}: not public API"


@pytest.mark.parametrize("name", [*SCRIPTS, *(f"common/{n}" for n in SHARED)])
def test_no_benchmark_imports_another(name):
    scripts = {Path(s).stem for s in SCRIPTS}
    for module, names in _imports(BENCHMARKS / name):
        assert module.split(".")[0] not in scripts, f"{name} imports the script {module}"
        if module == "common":
            assert not names & scripts, f"{name} imports a script as common.{names & scripts}"


# ab.py's smoke run in two: its drafting probes need no engine, so the fast loop runs them.
SPLIT = {
    "ab.py": (
        "ab.py --probes drafter,suffix-batch",
        "ab.py --probes llama-load,llama-text,decode-apply-edit",
    ),
    "startup.py": ("startup.py", "startup.py --first"),
    "servers.py": ("servers.py --before src",),  # serve beside itself: the A/B's path runs
}
SMOKES = [
    pytest.param(n, marks=getattr(pytest.mark, NEEDS[n][0])) if n in NEEDS else n
    for script in SCRIPTS
    for n in SPLIT.get(script, (script,))
]


@pytest.mark.parametrize("name", SMOKES)
def test_every_benchmark_has_a_smoke_run(name, tmp_path):
    for module in NEEDS.get(name, (None, ()))[1]:
        pytest.importorskip(module)
    _smoke(sys.executable, name, tmp_path)


# The measurements of ngramdraft's vLLM proposer run in vLLM's own environment.
VLLM_SMOKES = ["serving.py --vllm", "ab.py --before src --after src --probes vllm-few"]


@pytest.mark.parametrize("name", VLLM_SMOKES)
def test_the_vllm_measurements_have_a_smoke_run(name, tmp_path, vllm_python):
    # vLLM's numba is another version: a cache of its own, not this one's recompiled.
    _smoke(
        vllm_python,
        name,
        tmp_path,
        NUMBA_CACHE_DIR=str(Path(vllm_python).parents[1] / "numba-cache"),
    )


def _smoke(python, name, tmp_path, **env):
    """Run ``name`` (a script and its arguments) with --smoke; check the results it wrote."""
    env = {**os.environ, **env, "NGRAMDRAFT_SMOKE_RESULTS": str(tmp_path)}
    script, *args = name.split()
    done = subprocess.run(
        [python, str(BENCHMARKS / script), "--smoke", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = tmp_path.glob("*/*.json")
    assert json.loads(result.read_text())["benchmark"] == Path(script).stem
    assert result.with_suffix(".md").read_text().strip()


def test_the_pytest_benchmark_suite_runs():
    command = ["-m", "pytest", "benchmarks/test_latency.py", "--smoke", "--benchmark-disable"]
    done = subprocess.run(
        [sys.executable, *command, "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_failing_worker_shows_its_error(tmp_path):
    """A measurement whose process fails names the error it printed, not an exit status."""
    from common import harness

    script = tmp_path / "broken.py"
    script.write_text("import sys\nraise RuntimeError('the real reason')\n")
    with pytest.raises(harness.WorkerFailed, match="the real reason"):
        harness.fresh(script, {})


def test_a_fresh_clone_gets_the_folder_benchmarks_keep_their_data_in(tmp_path):
    """CI runs on a clean clone: a benchmark whose probes build nothing still writes there."""
    import shutil

    shutil.copytree(BENCHMARKS / "common", tmp_path / "benchmarks" / "common")
    done = subprocess.run(
        [sys.executable, "-c", "from common import corpora"],
        capture_output=True,
        text=True,
        cwd=tmp_path / "benchmarks",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "benchmarks" / ".data").is_dir()


def test_rounds_alternate_and_spreads_summarize():
    from common import harness

    order = [v for _, v in harness.rounds("abc", 3)]
    assert order == list("abccbaabc")
    assert harness.spread([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}


@pytest.mark.parametrize("workload", ["open-ended", "edit", "templated", "real-edit"])
def test_every_teacher_forced_workload_builds(workload):
    from common import workloads

    requests = workloads.TEXTS[workload](200)
    assert requests and all(len(prompt) and len(output) for prompt, output in requests)
    assert sum(len(output) for _, output in requests) >= 150


@pytest.mark.parametrize("workload", ["apply-edit", "quotes", "session", "open", "records"])
def test_every_chat_workload_builds(workload):
    from common import workloads

    for smoke in (True, False):
        sessions = workloads.chat(workload, smoke)
        assert sessions
        for session in sessions:
            answers = []
            for turn in range(len(session.turns)):
                messages = session.messages(answers)
                assert messages[-1]["role"] == "user" and messages[-1]["content"]
                assert len(messages) == 1 + 2 * turn
                answers.append(f"answer {turn}")
    if workload == "session":
        assert len(workloads.chat(workload)[0].turns) == 4  # four successive requests


def test_corpus_rules_reports_the_defaults_it_measured_against():
    import corpus_rules
    from ngramdraft.rulesets.suffix.drafter import SuffixDrafter

    defaults = inspect.signature(SuffixDrafter).parameters
    assert (
        tuple(defaults[f"corpus_min_{k}"].default for k in ("match", "count", "share"))
        == corpus_rules.CHOSEN
    )


def test_the_ceiling_bounds_what_copying_drafters_reach():
    from common import drafters

    context = np.array([1, 2, 3, 4, 5, 1, 2], dtype=np.int32)
    assert drafters.ceiling_length(context, np.array([3, 4, 9], dtype=np.int32), 8) == 2
    assert drafters.ceiling_length(context, np.array([4, 5, 1, 2, 3], dtype=np.int32), 3) == 3
    assert drafters.ceiling_length(context, np.array([7], dtype=np.int32), 8) == 0
    after = np.array([4, 5], dtype=np.int32)  # found, but not after an earlier "2" or "1 2"
    assert drafters.ceiling_length(context, after, 8) == 2
    assert drafters.ceiling_length(context, after, 8, after=1) == 0
    assert drafters.ceiling_length(context, np.array([3, 4, 9], dtype=np.int32), 8, 2) == 2
    # where a copy stands is tried too, with or without a match before it
    assert drafters.ceiling_run(context, after, 8, after=1, copy=3, window=0) == (2, 3)
    assert drafters.ceiling_run(context, after, 8, after=1, copy=1, window=1) == (0, -1)
    assert drafters.ceiling_run(context, after, 8, after=1, copy=1, window=2) == (2, 3)
    rng = np.random.default_rng(0)
    text = rng.integers(0, 30, 300).tolist()
    requests = [(text[:200], text[100:250])]  # the output repeats part of the prompt
    ceiling = drafters.run("toy", "ceiling", 8, requests)
    rules = drafters.run("toy", "llama.cpp", 8, requests)
    assert ceiling["accepted_share"] == 1.0
    assert ceiling["tokens_per_pass"] >= rules["tokens_per_pass"] > 1.0
    edits = [(text[:200], [*text[:60], 99, *text[61:120]])]  # one token replaced
    per_pass = [
        drafters.run("toy", name, 8, edits)["tokens_per_pass"]
        for name in ("ceiling-1", "ceiling-1+copy", "ceiling-1+near", "ceiling")
    ]
    assert per_pass == sorted(per_pass)  # each a choice among more places


def test_context_cost_workloads_hold_the_context_asked_for():
    import context_cost
    from common import drafters

    ((prompt, prose),) = context_cost.requests(1024, 200, "prose")
    ((same, copy),) = context_cost.requests(1024, 200, "copy")
    assert len(prompt) == 1024 and len(prose) == len(copy) == 200
    assert np.array_equal(prompt, same) and np.count_nonzero(copy != prompt[-200:]) == 5
    rows = [
        [{"context": 1, "workload": "w", "drafter": d, "us_per_token": us} for d in "ab"]
        for us in (1.0, 3.0, 2.0)
    ]
    summary = drafters.summarize(rows, ("context", "workload", "drafter"))
    assert [(r["drafter"], r["us_per_token"], r["us_per_token_range"]) for r in summary] == [
        ("a", 2.0, [1.0, 3.0]),
        ("b", 2.0, [1.0, 3.0]),
    ]


def test_ab_times_the_suffix_rules(tmp_path):
    import ab

    rng = np.random.default_rng(0)
    from ngramdraft import build_suffix_corpus

    build_suffix_corpus(rng.integers(0, 50, 5000), tmp_path / "c.ngd")
    stream = tmp_path / "stream.npy"
    np.save(stream, rng.integers(0, 50, 3 * 4096).astype(np.int32))
    for name in ("suffix-corpus", "suffix-long"):
        assert ab.probe(name, tmp_path / "c.ngd", stream, quick=True) > 0
    for name in ("batch", "sync", "replay", "start", "rebase", "evict", "edit"):
        assert ab.probe(f"suffix-{name}", "-", stream, quick=True) > 0


def test_ab_times_a_finish_and_a_load_of_a_dynamic_cache(tmp_path):
    import ab

    stream = tmp_path / "stream.npy"
    np.save(stream, np.random.default_rng(0).integers(0, 50, 3 * 4096).astype(np.int32))
    for name in ("finish", "load"):
        assert ab.probe(name, "-", stream, quick=True) > 0


def test_serving_runs_one_configuration_alone(tmp_path):
    """The issue's own configuration (a static cache, a run's length) can be measured
    without the four minutes of the long-lived dynamic cache's runs."""
    args = "serving.py --sizes 8 --static parity --seq-steps 1000 --no-budget"
    _smoke(sys.executable, args, tmp_path)
    (path,) = tmp_path.glob("*/*.json")
    result = json.loads(path.read_text())
    assert result["dynamic_cache"] == [] and list(result["sizes"]) == ["8"]
    assert "Dynamic cache" not in path.with_suffix(".md").read_text()


@pytest.mark.engine
def test_quality_finds_a_file_no_different_from_itself_and_scores_the_next_token(smollm):
    """The same file twice: no divergence, the same top token everywhere. A perplexity in
    the tens on code says each position is scored on the token that follows it (one
    off, a small model's perplexity runs into the thousands)."""
    pytest.importorskip("llama_cpp")
    import quality

    rows = quality.measure({"as shipped": smollm, "again": smollm}, 2, 128)
    for r in rows:
        assert r["tokens"] == 2 * 64
        assert abs(r["kl_mean"]) < 1e-9 and r["same_top"] == 1.0
    code = [r for r in rows if r["text"] == "code"]
    assert code[0]["perplexity"] == code[1]["perplexity"] < 30


def test_requantized_files_are_measured_against_the_shipped_files_plain_engine():
    import real_model

    def run(rnd, q, drafter, decode_s, output):
        spec = {"model": "m", "quantization": q}
        rows = [{"output": output}]
        return {
            "round": rnd,
            "spec": spec,
            "workload": "w",
            "drafter": drafter,
            "decode_s": decode_s,
            "total_s": decode_s + 1.0,
            "rows": rows,
        }

    shipped = {(r, "m", "w"): run(r, None, "none", 9.0, [1, 2, 3]) for r in (0, 1)}
    mine = [run(0, "F16", "suffix", 3.0, [1, 2, 3]), run(1, "F16", "suffix", 4.0, [1, 2, 4])]
    got = real_model._against_shipped(mine, shipped)
    assert got["decode_speedup"] == {"median": 2.625, "min": 2.25, "max": 3.0}
    assert got["total_speedup"]["max"] == 10.0 / 4.0
    assert got["identical"] is False  # round 1 parted at its last token
    assert real_model._against_shipped(mine[:1], shipped)["identical"] is True


@pytest.mark.engine
def test_a_divergence_is_weighed_by_the_plain_model_where_it_happens(tiny_gguf):
    """real_model's margin worker, given what its driver finds: the plain model's choice
    leads, by a margin no smaller than the gap to its runner-up."""
    pytest.importorskip("llama_cpp")
    import real_model
    from ngramdraft.integrations.llama_cpp import plain_llama
    from ngramdraft.integrations.llama_cpp_measure import generate

    prompt = list(range(1, 40)) * 2
    plain = generate(plain_llama(tiny_gguf, n_ctx=512), prompt, 30).tokens
    other = [*plain[:12], plain[12] + 1, *plain[13:]]
    spec = {"engine": "llama_cpp", "model": str(tiny_gguf), "kind": "margin"}
    got = real_model.work(
        {**spec, "prompt": prompt, "plain": plain, "other": other, "position": 12}
    )
    assert got["margin"] >= got["top_gap"] >= 0 and got["logit_a"] > got["logit_b"]
    shorter = real_model.work(
        {**spec, "prompt": prompt, "plain": plain, "other": plain[:5], "position": 5}
    )
    assert np.isnan(shorter["margin"])


@pytest.mark.engine
def test_the_decode_clock_times_llama_decode_in_the_hosts_loop_and_ngramdrafts(tiny_gguf):
    llama_cpp = pytest.importorskip("llama_cpp")
    from common.engines import _DecodeClock
    from ngramdraft.integrations.llama_cpp import (
        NgramDraftModel,
        load_llama,
        plain_llama,
    )
    from ngramdraft.integrations.llama_cpp_measure import generate

    inner = llama_cpp.llama_cpp.llama_decode
    prompt = list(range(1, 40)) * 3
    draft = NgramDraftModel(rules="suffix")
    for llama, model in (
        (plain_llama(tiny_gguf, n_ctx=512, verbose=False), None),
        (load_llama(tiny_gguf, n_ctx=512, draft_model=draft), draft),
    ):
        with _DecodeClock() as clock:
            t0 = time.perf_counter()
            generate(llama, prompt, 24, model)
            wall = time.perf_counter() - t0
        assert 0 < clock.seconds <= wall
    assert llama_cpp.llama_decode is inner and llama_cpp.llama_cpp.llama_decode is inner


def _served(config, rnd, prompt, text, tokens, prompt_s, decode_s):
    row = {"workload": "w", "session": 0, "turn": 0, "prompt": prompt, "text": text,
           "tokens": tokens, "prompt_s": prompt_s, "decode_s": decode_s, "drafted": 0,
           "accepted": 0}  # fmt: skip
    return {"round": rnd, "model": "m", "config": config, "load_s": 1.0, "rows": [row]}


def test_servers_takes_a_decode_at_plain_llama_servers_length():
    """An answer that parts at a near tie and stops at half the length is not twice as
    fast: its decode is taken at plain llama-server's length (before, its time alone:
    2.0x here, and a 1.5B's quotes 1.23x where like for like they were 1.06x)."""
    import servers

    runs = [
        _served(servers.PLAIN, 0, "p", "a b c d", 200, 1.0, 10.0),
        _served("ngramdraft serve", 0, "p", "a b", 100, 1.0, 5.0),
    ]
    (_, ours) = servers.summarize(runs, servers.PLAIN)
    w = ours["workloads"]["w"]
    assert w["decode"]["median"] == 1.0 and w["total"]["median"] == 1.0
    runs[1]["rows"][0]["decode_s"] = 2.5  # twice as fast a token
    (_, ours) = servers.summarize(runs, servers.PLAIN)
    assert ours["workloads"]["w"]["decode"]["median"] == 2.0


@pytest.mark.engine
def test_servers_weighs_a_divergence_after_the_prompt_as_the_servers_read_it(smollm):
    """The prompt's chat markers are special tokens: read as plain text they made another
    prompt, and a near tie (0.25 logits) was reported 2.4 logits apart."""
    pytest.importorskip("llama_cpp")
    import servers
    from common import engines
    from ngramdraft.integrations.llama_cpp import plain_llama
    from ngramdraft.integrations.llama_cpp_decode import decoder_of
    from ngramdraft.integrations.llama_cpp_measure import generate

    llama = plain_llama(smollm, n_ctx=512, flash_attn=True)
    prompt = "<|im_start|>user\nName three colours, one a line.<|im_end|>\n<|im_start|>assistant\n"
    tokens = engines.prompt_tokens(llama, prompt)
    plain = generate(llama, tokens, 12).tokens
    text = llama.detokenize(plain).decode()
    plain = engines.answer_tokens(llama, text)
    llama.reset()
    row = decoder_of(llama).prompt(tokens + plain[:4])[0]  # the plain model's logits at 4
    best, runner_up = np.argsort(row)[-2:][::-1]
    assert best == plain[4]
    other = llama.detokenize([*plain[:4], int(runner_up)]).decode()
    runs = [
        _served(servers.PLAIN, 0, prompt, text, len(plain), 1.0, 1.0),
        _served("ngramdraft serve", 0, prompt, other, 5, 1.0, 1.0),
    ]
    (found,) = servers.divergences(runs, {"m": smollm}, servers.PLAIN)
    assert found["position"] == 4
    assert found["margin"] == pytest.approx(found["top_gap"], abs=1e-4)
    assert found["margin"] == pytest.approx(float(row[best] - row[runner_up]), abs=0.05)
