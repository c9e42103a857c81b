#!/usr/bin/env python3
"""English text from this Debian machine's own documentation, for training the small MoE.

Renders --man-pages manual pages of each of sections 1, 5, 7 and 8 (`man -l`, 80 columns, overstrikes removed) and
adds git's release notes and technical documents (/usr/share/doc/git), then cuts them into
paragraphs. Whole documents go to the held-out split when the SHA-256 of their path ends in a
byte below 13 (about one in twenty), so no held-out paragraph has a near-twin in training.
Writes DIR/train.txt and DIR/heldout.txt (paragraphs separated by blank lines) and DIR/sources.txt
(every document, its split and its size). Only the Python standard library and man(1).
"""
import argparse
import concurrent.futures
import hashlib
import pathlib
import re
import subprocess


def paragraphs(text: str):
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        para = " ".join(lines)
        letters = sum(c.isalpha() for c in para)
        # Prose only: long enough, mostly letters (no option tables of symbols, no hex dumps).
        if len(para) >= 80 and letters >= 0.6 * len(para):
            yield para


def render_man(path: pathlib.Path) -> str:
    run = subprocess.run(["man", "-l", str(path)], capture_output=True, env={"MANWIDTH": "80", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
                         timeout=60)
    text = run.stdout.decode("utf-8", "replace")
    return re.sub(r".\x08", "", text)  # overstrike bold and underline


def read(kind: str, path: pathlib.Path) -> str:
    try:
        return render_man(path) if kind == "man" else path.read_text(encoding="utf-8", errors="replace")
    except (subprocess.TimeoutExpired, OSError):
        return ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--man-pages", type=int, default=300, help="pages per section, spread evenly over its name order")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    documents = []
    for section in ("1", "5", "7", "8"):
        pages = sorted(pathlib.Path(f"/usr/share/man/man{section}").glob("*.gz"))
        documents += [("man", p) for p in pages[:: max(1, len(pages) // args.man_pages)][: args.man_pages]]
    git_doc = pathlib.Path("/usr/share/doc/git")
    documents += [("text", p) for p in sorted(git_doc.rglob("*.txt"))]
    # Rendering is the slow part (man runs groff per page): two at a time, written in document order.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        texts = pool.map(lambda d: read(*d), documents)
    seen = set()
    with open(out / "train.txt", "w", encoding="utf-8") as train, open(out / "heldout.txt", "w", encoding="utf-8") as heldout, \
            open(out / "sources.txt", "w", encoding="utf-8") as sources:
        for (kind, path), text in zip(documents, texts):
            held = hashlib.sha256(str(path).encode()).digest()[-1] < 13
            kept = 0
            for para in paragraphs(text):
                key = hashlib.sha256(para.encode()).digest()
                if key in seen:
                    continue
                seen.add(key)
                (heldout if held else train).write(para + "\n\n")
                kept += len(para)
            sources.write(f"{'heldout' if held else 'train'}\t{kept}\t{path}\n")


if __name__ == "__main__":
    main()
