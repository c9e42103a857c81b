"""The llama vocabulary of a GGUF against what llama.cpp's converter computes from the folder's
tokenizer.model with sentencepiece itself (convert_hf_to_gguf.py _create_vocab_sentencepiece,
c392e509): every piece, score and type, [PADi] slots, added_tokens.json and tokenizer_config's
added_tokens_decoder.
usage: python3 compare_spm_vocab.py CHECKPOINT_DIR PART1.gguf    (sentencepiece, gguf-py)
"""
import json, pathlib, sys

import sentencepiece
from gguf import GGUFReader

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def looks_special(text):
    wrapped = lambda a, b: text.startswith(a) and text.endswith(b)
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or wrapped("<|", "|>") or wrapped("<\uff5c", "\uff5c>")
            or wrapped("<unused", ">"))


def expected(folder):
    sp = sentencepiece.SentencePieceProcessor()
    sp.LoadFromFile(str(folder / "tokenizer.model"))
    size = json.loads((folder / "config.json").read_text()).get("vocab_size", sp.vocab_size())
    vocab = [[f"[PAD{i}]".encode(), -10000.0, UNUSED] for i in range(size)]
    for i in range(sp.vocab_size()):
        kind = (UNKNOWN if sp.IsUnknown(i) else CONTROL if sp.IsControl(i) else UNUSED if sp.IsUnused(i)
                else BYTE if sp.IsByte(i) else NORMAL)
        vocab[i] = [sp.IdToPiece(i).encode(), sp.GetScore(i), kind]
    added = folder / "added_tokens.json"
    if added.is_file():
        for text, i in json.loads(added.read_text()).items():
            if i < size:
                vocab[i] = [text.encode(), -1000.0, USER_DEFINED]
    config = folder / "tokenizer_config.json"
    if config.is_file():
        for key, entry in json.loads(config.read_text()).get("added_tokens_decoder", {}).items():
            text, special = entry["content"], entry.get("special") or looks_special(entry["content"])
            vocab[int(key)] = [(text if special else text.replace("\u2581", " ")).encode(), -1000.0,
                               CONTROL if special else USER_DEFINED]
    return vocab


def main():
    folder, part = pathlib.Path(sys.argv[1]), sys.argv[2]
    fields = GGUFReader(part).fields
    values = lambda key, f: [f(fields[key].parts[i]) for i in fields[key].data]
    tokens = values("tokenizer.ggml.tokens", bytes)
    scores = values("tokenizer.ggml.scores", lambda p: float(p[0]))
    types = values("tokenizer.ggml.token_type", lambda p: int(p[0]))
    want = expected(folder)
    differ = [i for i, (t, s, k) in enumerate(want) if i >= len(tokens) or (tokens[i], scores[i], types[i]) != (t, s, k)]
    differ += list(range(len(want), len(tokens)))
    for i in differ[:10]:
        print(f"token {i}: GGUF {tokens[i:i+1]} {scores[i:i+1]} {types[i:i+1]}, converter {want[i:i+1]}")
    print(f"{len(tokens)} and {len(want)} tokens: " + ("identical" if not differ else f"{len(differ)} differ"))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
