"""Regenerate data/ from ../shared/corpus (run from the repo root; needs the test extra).

Origin: the first four books of ``gutenberg-test.txt`` in the shared corpus
(public-domain Project Gutenberg books, licence headers cut). The first three
are the sample corpus, one document each, as text files and as the same rows
in jsonl and parquet; the first 120 kB of the fourth is the held-out text.
Token arrays use the llama3 encoding of quicktok-v1, tokenized the way the
shared parity data was (pieces cut at blank lines, concatenated).
"""

import json
import lzma
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ngramdraft.build.sources import TextFiles
from ngramdraft.build.tokenize import tokenize
from ngramdraft.tokenizers import load_tokenizer

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "corpus" / "gutenberg-test.txt.xz"
END = "End of the Project Gutenberg EBook of"
NAMES = ["mary-louise-in-the-country", "sword-exercise-for-infantry", "a-christmas-carol"]


def books(text):
    lines = text.split("\n")
    out, start = [], 0
    for i, line in enumerate(lines):
        if line.startswith(END):
            out.append("\n".join(lines[start : i + 1]).strip("\n") + "\n")
            start = i + 1
    return out


def main():
    with lzma.open(SHARED, "rt", encoding="utf-8") as f:
        found = books(f.read(4_000_000))
    docs = dict(zip(NAMES, found[:3], strict=True))
    for name, text in docs.items():
        (HERE / "gutenberg" / f"{name}.txt").write_text(text, encoding="utf-8")
    # Rows in file-name order: every form of the corpus is then the same token stream.
    rows = [{"title": name, "text": docs[name]} for name in sorted(docs)]
    with open(HERE / "gutenberg.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    pq.write_table(pa.Table.from_pylist(rows), HERE / "gutenberg.parquet")
    heldout = found[3][:120_000]
    heldout = heldout[: heldout.rfind("\n\n") + 2]
    (HERE / "heldout-uneasy-money.txt").write_text(heldout, encoding="utf-8")
    tok = load_tokenizer("llama3")
    scratch = HERE / ".tokens"
    paths = sorted((HERE / "gutenberg").glob("*.txt"))
    for source, target in (
        (paths, "gutenberg.llama3.i32"),
        ([HERE / "heldout-uneasy-money.txt"], "heldout.llama3.i32"),
    ):
        tokens, _ = tokenize(TextFiles(source), tok, scratch)
        shutil.copyfile(tokens.path, HERE / target)
    shutil.rmtree(scratch)
    print("data/ regenerated", file=sys.stderr)


if __name__ == "__main__":
    main()
