"""llama.cpp's tokens for the texts of tests/data/tokenizers (llama-cli --verbose-prompt) against
reference ids: sentencepiece's encode of a tokenizer.model (with BOS), or the Hugging Face ids of
an expected.json there (ids_with_special_tokens).
usage: python3 compare_tokens.py PART1.gguf spm TOKENIZER.model | hf EXPECTED.json
       (LLAMA_BIN: the folder of llama-cli, also put on LD_LIBRARY_PATH)
"""
import json, os, pathlib, re, subprocess, sys

data = pathlib.Path(__file__).resolve().parents[3] / "data" / "tokenizers"


def main():
    part, kind, reference = sys.argv[1], sys.argv[2], sys.argv[3]
    if kind == "spm":
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor(model_file=reference)
        texts = json.loads((data / "texts.json").read_text())
        refs = [[1] + sp.encode(t) for t in texts]
    else:
        cases = json.loads(pathlib.Path(reference).read_text())["cases"]
        texts, refs = [c["text"] for c in cases], [c["ids_with_special_tokens"] for c in cases]
    bin_dir = os.environ.get("LLAMA_BIN", "/tmp/llama-old/build/bin")
    env = dict(os.environ, LD_LIBRARY_PATH=bin_dir)
    same = 0
    for text, ref in zip(texts, refs):
        run = subprocess.run([f"{bin_dir}/llama-cli", "-m", part, "-p", text, "-n", "1", "-no-cnv", "--verbose-prompt",
                              "--temp", "0", "-c", "512"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", env=env)
        ids = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> ", run.stdout, re.M)]
        same += ids == ref
        if ids != ref:
            print(f"differs: {text[:40]!r}: llama.cpp {ids[:12]}..., reference {ref[:12]}...")
    print(f"{same} of {len(texts)} texts tokenized identically")


if __name__ == "__main__":
    main()
