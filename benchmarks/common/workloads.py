"""The requests the benchmarks draft for, on text no one here wrote (or says so).

Two kinds:

* **Teacher-forced** workloads (:data:`TEXTS`): (prompt, output) token lists
  whose output is known, for drafters measured on a fixed text
  (``drafting.py``, ``e2e.py``, ``policy.py``): ``open-ended`` (held-out
  Gutenberg prose), ``edit`` (this project's ``drafter.py`` restated with
  renames: ours, and said so), ``templated`` (short JSON answers sharing a
  system prompt) and ``real-edit`` (files changed between two releases of
  public packages, ``edits.py``).
* **Chat** workloads (:data:`CHATS`): sessions of chat messages for a
  trained model to answer in its own words (``models.py``): ``apply-edit``
  (a release's file and its change as a diff; write the updated file),
  ``quotes`` (questions over a public-domain text, answered with quotes),
  ``session`` (four successive changes to one file, the conversation kept),
  ``open`` (questions with no context) and ``records`` (JSON records from a
  list).
"""

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import corpora, edits

Encode = Callable[[str], list[int]]


def llama3_encode(text: str) -> list[int]:
    """The tokens of ``text`` in the corpus's encoding (quicktok's llama3)."""
    from ngramdraft.tokenizers import load_tokenizer

    ids, _ = load_tokenizer(corpora.TOKENIZER).encode_batch([text])
    return ids.tolist()


# -- teacher-forced --------------------------------------------------------------


def open_ended(n: int, encode: Encode = llama3_encode) -> list[tuple[list[int], list[int]]]:
    stream = corpora.test_stream(512 + n + 1).tolist()
    return [(stream[:512], stream[512:])]


# Renames an editing request asks for: identifiers of the source and common words.
_RENAMES = {
    r"\bargs\b": "options",
    r"\bpath\b": "location",
    r"\bcache\b": "store",
    r"\btokens\b": "ids",
    r"\bstatic\b": "corpus_cache",
    r"\bthe\b": "this",
    r"\berror\b": "failure",
}
EDIT_SOURCE = corpora.REPO / "src" / "ngramdraft" / "drafting" / "drafter.py"


def edit(n: int, encode: Encode = llama3_encode) -> list[tuple[list[int], list[int]]]:
    """This project's drafter.py restated with renames (about n output tokens)."""
    lines, text = EDIT_SOURCE.read_text().splitlines(keepends=True), ""
    for line in lines:  # as many whole lines as make about n tokens of output
        if len(encode(text + line)) > n + 16:
            break
        text += line
    edited = text
    for pattern, replacement in _RENAMES.items():
        edited = re.sub(pattern, replacement, edited)
    renames = ", ".join(f"{p.strip(chr(92) + 'b')} -> {r}" for p, r in _RENAMES.items())
    prompt = (
        f"Rewrite this Python module, renaming {renames}. Change nothing else.\n\n"
        f"```python\n{text}```\n\nThe rewritten module:\n\n```python\n"
    )
    return [(encode(prompt), encode(edited))]


_SYSTEM = (
    "You are a records assistant. For each request, answer with one JSON object with the "
    'keys "name", "city", "age", "plan" and "note", in that order, values as given, the '
    "note a short sentence about the plan. Answer with the JSON object only.\n\n"
)
NAMES = (
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Ken",
    "Dennis",
    "Margaret",
    "Linus",
    "Guido",
    "Bjarne",
)
CITIES = (
    "Lisbon",
    "Oslo",
    "Quito",
    "Lagos",
    "Hanoi",
    "Perth",
    "Lima",
    "Riga",
    "Turin",
    "Kyoto",
    "Cork",
    "Bergen",
)
PLANS = ("basic", "team", "enterprise", "student")


def _people(seed: int):
    rng = np.random.default_rng(seed)
    while True:
        yield (
            str(rng.choice(NAMES)),
            str(rng.choice(CITIES)),
            int(rng.integers(18, 90)),
            str(rng.choice(PLANS)),
        )


def templated(n: int, encode: Encode = llama3_encode) -> list[tuple[list[int], list[int]]]:
    requests, total = [], 0
    for name, city, age, plan in _people(0):
        if total >= n:
            break
        ask = f"Request: register {name} from {city}, age {age}, on the {plan} plan.\nAnswer: "
        answer = (
            f'{{"name": "{name}", "city": "{city}", "age": {age}, "plan": "{plan}", '
            f'"note": "{name} is on the {plan} plan."}}\n'
        )
        prompt, output = encode(_SYSTEM + ask), encode(answer)
        requests.append((prompt, output))
        total += len(output)
    return requests


def real_edit(n: int, encode: Encode = llama3_encode) -> list[tuple[list[int], list[int]]]:
    return edits.requests(n, encode)


TEXTS = {"open-ended": open_ended, "edit": edit, "templated": templated, "real-edit": real_edit}


# -- chat ------------------------------------------------------------------------


@dataclass
class Session:
    """User turns of one conversation; each answer (the model's own) is kept for the next."""

    turns: list[str]
    max_tokens: int
    system: str | None = None
    labels: list[str] = field(default_factory=list)

    def messages(self, answers: list[str]) -> list[dict[str, str]]:
        """The messages of the next turn, after the answers given so far."""
        out = [{"role": "system", "content": self.system}] if self.system else []
        for turn, answer in zip(self.turns, answers, strict=False):
            out += [{"role": "user", "content": turn}, {"role": "assistant", "content": answer}]
        return [*out, {"role": "user", "content": self.turns[len(answers)]}]


def _small_edits(n: int, max_tokens: int = 800) -> list[tuple[str, str, str, str, str, str]]:
    """n release edits whose old file is 250 .. max_tokens tokens and whose change is small
    (a diff under a third of the file), one package after another in turn."""
    chosen, seen = [], set()
    for name, old, new, inner, a, b in edits.in_turn():
        size = len(llama3_encode(a))
        diff = _diff(a, b)
        if 250 <= size <= max_tokens and len(llama3_encode(diff)) * 3 < size and name not in seen:
            chosen.append((name, old, new, inner, a, diff))
            seen.add(name)  # one file a package, so that every package takes part
            if len(chosen) == n:
                break
    return chosen


def _diff(a: str, b: str) -> str:
    lines = difflib.unified_diff(a.splitlines(), b.splitlines(), "old", "new", n=2, lineterm="")
    return "\n".join(lines) + "\n"


def apply_edit(smoke: bool) -> list[Session]:
    """(a) A file from a release and the change the next release made to it, as a diff."""
    sessions = []
    for name, old, new, inner, a, diff in _small_edits(1 if smoke else 3):
        sessions.append(
            Session(
                [
                    f"Here is `{inner}` from {name} {old}, and the change that {name} {new} "
                    "made to it, as a unified diff. Apply the change and output the whole "
                    f"updated file, nothing else.\n\n```python\n{a}```\n\n```diff\n{diff}```"
                ],
                max_tokens=64 if smoke else 900,
                labels=[f"{name} {inner}"],
            )
        )
    return sessions


DOCUMENT = corpora.REPO / "data" / "heldout-uneasy-money.txt"  # P. G. Wodehouse, 1916


def _document() -> str:
    """A public-domain text of about 700 words: paragraphs from the middle of a held-out
    Gutenberg book (no cache or corpus here holds it)."""
    paragraphs = DOCUMENT.read_text(encoding="utf-8").split("\n\n")
    start, words, out = len(paragraphs) // 2, 0, []
    for paragraph in paragraphs[start:]:
        out.append(" ".join(paragraph.split()))
        words += len(paragraph.split())
        if words >= 700:
            break
    return "\n\n".join(out)


QUESTIONS = (
    "Quote, word for word, the three sentences of the document that you find most important.",
    "Which people does the document name? For each, quote the sentence that first names them.",
    "Quote every sentence of the document that contains a number or a date.",
)


def quotes(smoke: bool) -> list[Session]:
    """(b) Questions over a given public document, answered with quotes."""
    doc = _document()
    return [
        Session(
            [f"Document:\n\n{doc}\n\nAnswer from the document alone, with quotes.\n\n{q}"],
            max_tokens=48 if smoke else 400,
            labels=[f"question {i + 1}"],
        )
        for i, q in enumerate(QUESTIONS[: 1 if smoke else 3])
    ]


SESSION_CHANGES = (
    "Add a one-line docstring to every function that has none. Output the whole file.",
    "Now rename every local variable named `result` or `value` to a name that says what it "
    "holds. Output the whole file.",
    "Now add type hints to every function signature. Output the whole file.",
    "Now remove every comment that only repeats what the code says. Output the whole file.",
)


def session(smoke: bool) -> list[Session]:
    """(c) One session of four successive changes to the same file, the conversation kept."""
    name, old, _, inner, a, _ = _small_edits(1, max_tokens=450 if smoke else 600)[0]
    first = f"Here is `{inner}` from {name} {old}:\n\n```python\n{a}```\n\n"
    changes = list(SESSION_CHANGES[: 2 if smoke else 4])
    return [
        Session(
            [first + changes[0], *changes[1:]],
            max_tokens=48 if smoke else 800,
            labels=[f"change {i + 1}" for i in range(len(changes))],
        )
    ]


OPEN_QUESTIONS = (
    "Explain how a hash table handles collisions, and when each way is the better choice.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "What should someone check before buying a used bicycle?",
)


def open_questions(smoke: bool) -> list[Session]:
    """(d) Open questions with no context: drafts have nothing to copy."""
    return [
        Session([q], max_tokens=48 if smoke else 300, labels=[f"question {i + 1}"])
        for i, q in enumerate(OPEN_QUESTIONS[: 1 if smoke else 3])
    ]


def records(smoke: bool) -> list[Session]:
    """(e) Structured output: JSON records from a list."""
    sessions = []
    for seed in (1,) if smoke else (1, 2):
        people = _people(seed)
        rows = [next(people) for _ in range(4 if smoke else 12)]
        listing = "\n".join(f"- {n}, {c}, {a} years, {p} plan" for n, c, a, p in rows)
        sessions.append(
            Session(
                [
                    'Turn this list into a JSON array of objects with the keys "name", '
                    '"city", "age" (a number) and "plan", in that order, one object per line. '
                    f"Output the JSON only.\n\n{listing}"
                ],
                max_tokens=64 if smoke else 500,
                labels=[f"list {seed}"],
            )
        )
    return sessions


CHATS = {
    "apply-edit": apply_edit,
    "quotes": quotes,
    "session": session,
    "open": open_questions,
    "records": records,
}


def chat(name: str, smoke: bool = False) -> list[Session]:
    return CHATS[name](smoke)


def answered(answering: Any, sessions: list[Session]) -> Iterator[tuple[int, int, Any]]:
    """(session, turn, answer) of ``answering`` (an engine's, ``common/engines.py``) over a
    chat workload's ``sessions``, in order, each turn after the answers before."""
    for s, session in enumerate(sessions):
        answers: list[str] = []
        for turn in range(len(session.turns)):
            a = answering.answer(session.messages(answers), session.max_tokens)
            answers.append(a.text)
            yield s, turn, a
