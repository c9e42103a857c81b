#!/usr/bin/env python3
"""llama.cpp's own ids for texts.json on a GGUF with this SentencePiece vocabulary.

Writes llama_cpp_ids.json, which tests/unit/gguf_source_tokenizer_test.cpp compares with the
tokenizer moequant rebuilds from the GGUF's tokenizer.ggml.* keys (docs/gguf-source.md). Made once,
by hand (CI has no llama.cpp):

    make_llama_cpp_ids.py --llama-bin LLAMA_CPP_BUILD/bin --moequant BUILD/bin/moequant

It synthesizes a Mixtral checkpoint, gives it this tokenizer.model (512 pieces: the vocabulary size
of the synthesized model), writes the GGUF with moequant (the converter's llama vocabulary: tokens,
scores, token types from the model file) and runs llama-tokenize on each text (special tokens
parsed, as Hugging Face's tokenizers match added tokens), with the BOS the vocabulary adds and
without it.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

here = pathlib.Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--llama-bin", required=True, help="a llama.cpp build's bin/ holding llama-tokenize")
    parser.add_argument("--moequant", default="moequant")
    args = parser.parse_args()
    texts = json.loads((here.parent / "texts.json").read_text(encoding="utf-8"))
    env = dict(os.environ, LD_LIBRARY_PATH=args.llama_bin)
    with tempfile.TemporaryDirectory() as work:
        src, out = pathlib.Path(work) / "src", pathlib.Path(work) / "gguf"
        subprocess.run([args.moequant, "synth", "--family", "mixtral", "--out", str(src)], check=True, capture_output=True)
        shutil.copy(here / "tokenizer.model", src / "tokenizer.model")
        (src / "tokenizer.json").unlink()
        subprocess.run([args.moequant, "convert", "-i", str(src), "-o", str(out), "--format", "gguf", "--quant-method", "Q8_0",
                        "--single-file", "-q"], check=True, capture_output=True)
        cases = []
        for i, text in enumerate(texts):
            prompt = pathlib.Path(work) / f"text{i}.txt"
            prompt.write_bytes(text.encode("utf-8"))
            ids = {}
            for key, extra in (("ids_with_bos", []), ("ids", ["--no-bos"])):
                run = subprocess.run([str(pathlib.Path(args.llama_bin) / "llama-tokenize"), "-m", str(out / "model.gguf"), "-f", str(prompt),
                                      "--ids", "--log-disable", *extra],
                                     check=True, capture_output=True, text=True, env=env)
                ids[key] = json.loads(run.stdout.strip().splitlines()[-1])
            cases.append({"text": text, **ids})
    lines = ",\n".join("  " + json.dumps(case, ensure_ascii=False) for case in cases)
    (here / "llama_cpp_ids.json").write_text('{"made_by": "llama-tokenize (llama.cpp 82bb48500)", "cases": [\n' + lines + "\n]}\n",
                                             encoding="utf-8")


if __name__ == "__main__":
    main()
