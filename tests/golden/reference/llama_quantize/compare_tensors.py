"""Compares two GGUF models tensor by tensor (name, ggml type, dims, bytes): e.g. moequant's
`convert --format gguf --quant-method Q4_K_M` parts against llama-quantize's Q4_K_M of
moequant's BF16 GGUF of the same checkpoint. Each argument is a .gguf file or a folder of them
(gguf-split parts; a part 1 alone holds only the non-expert tensors). Needs gguf-py (GGUFReader).

usage: python3 compare_tensors.py A B
  prints one line per tensor that differs, what A and B hold, and `identical: N of M tensors`;
  exit 0 when every tensor is identical, 1 when some differ, 2 on a usage or read error
"""
import glob, os, sys


def fail(message):
    print(f"compare_tensors.py: {message}", file=sys.stderr)
    sys.exit(2)


try:
    from gguf import GGMLQuantizationType, GGUFReader
except ImportError as e:
    fail(f"needs gguf-py (and numpy) on the path: {e}")


def type_name(t):
    try:
        return GGMLQuantizationType(t).name
    except ValueError:
        return f"type {t}"


def tensors(path):
    """{name: (type, dims, bytes)} of the file, or of every *.gguf of the folder, and the files read."""
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.gguf")))
        if not files:
            fail(f"no .gguf file in the folder {path}")
    elif os.path.isfile(path):
        files = [path]
    else:
        fail(f"no such file or folder: {path}")
    out = {}
    for f in files:
        for t in GGUFReader(f).tensors:
            if t.name in out:
                fail(f"{t.name} is in two files of {path}")
            out[t.name] = (int(t.tensor_type), tuple(int(n) for n in t.shape), bytes(t.data.tobytes()))
    return out, files


def describe(path, files, ts):
    kinds = sorted({type_name(t[0]) for t in ts.values()})
    return f"{path} ({len(files)} file{'s' if len(files) > 1 else ''}): {len(ts)} tensors, {' '.join(kinds)}"


def main(argv):
    if len(argv) != 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    (a, fa), (b, fb) = tensors(argv[0]), tensors(argv[1])
    names = sorted(set(a) | set(b))
    differ = 0
    for name in names:
        if name not in a or name not in b:
            print(f"{name}: only in {'A' if name in a else 'B'}")
        elif a[name] != b[name]:
            (ta, da, ba), (tb, db, bb) = a[name], b[name]
            if ta != tb or da != db:
                print(f"{name}: {type_name(ta)} {da} vs {type_name(tb)} {db}")
            else:
                print(f"{name}: bytes differ ({type_name(ta)} {da} in both)")
        else:
            continue
        differ += 1
    print(f"A = {describe(argv[0], fa, a)}")
    print(f"B = {describe(argv[1], fb, b)}")
    print(f"identical: {len(names) - differ} of {len(names)} tensors")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
