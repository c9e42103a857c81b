"""Compares two GGUF models tensor by tensor (name, ggml type, dims, bytes): e.g. moequant's
`convert --format gguf --quant-method Q4_K_M` parts against llama-quantize's Q4_K_M of
moequant's BF16 GGUF of the same checkpoint. Each argument is a .gguf file or a folder of them
(gguf-split parts). Needs gguf-py (GGUFReader).
usage: python3 compare_tensors.py A B      exit 0 when every tensor is identical
"""
import glob, os, sys

from gguf import GGUFReader


def tensors(path):
    files = sorted(glob.glob(os.path.join(path, "*.gguf"))) if os.path.isdir(path) else [path]
    out = {}
    for f in files:
        for t in GGUFReader(f).tensors:
            out[t.name] = (int(t.tensor_type), tuple(int(n) for n in t.shape), bytes(t.data.tobytes()))
    return out


def main():
    a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
    differ = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {'the first' if name in a else 'the second'}")
            differ += 1
        elif a[name] != b[name]:
            ta, tb = a[name], b[name]
            print(f"{name}: type {ta[0]} vs {tb[0]}, dims {ta[1]} vs {tb[1]}, bytes {'equal' if ta[2] == tb[2] else 'differ'}")
            differ += 1
    types = sorted({t[0] for t in a.values()})
    print(f"{len(a)} and {len(b)} tensors (ggml types {types}): {'identical' if not differ else f'{differ} differ'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
