#!/usr/bin/env python3
"""Independent check of the kt MOE_INT8 golden vectors (pure Python, no numpy).

For every case in DATA_DIR/cases.json it
  1. checks file sizes and sha256 against cases.json;
  2. recomputes kt's quantization rule from the bf16 input with exact float32 emulation:
       d[r] = f32(amax_r * f32(1/127))   -- what kt's -O3 -ffast-math build computes for
                                            `amax / ((1 << 7) - 1)` (reciprocal-math: vmulss);
                                            --ieee-d uses the source-level f32(amax_r / 127),
                                            which differs by 1 ulp for some amax
       q[r][j] = round_half_away_from_zero(f32(f / d[r]))   -- a real division (vdivss) in kt
     (amax_r == 0 -> q = 0 expected) and compares d with CASE.scale.bin;
  3. rebuilds every NB-row block with the documented AOCL s8s8s32 'c','n' reorder layout
       KU = roundup(k,4); body[(kk//4)*NB*4 + n*4 + kk%4] = q[n][kk], zero padding for kk >= k;
       then NB int32 LE column sums 128*sum_k q[n][k]
     (a) with this script's own implementation and (b), when --ref-py is given, with the function
     aocl_reorder_s8s8s32os32_B taken verbatim from that ref.py file, and compares with
     CASE.weight.bin.
Exit status 0 only if everything matches.
"""
import argparse
import ast
import hashlib
import json
import math
import os
import struct
import sys


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


INV127 = f32(1.0 / 127.0)


def round_half_away(x):
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def own_reorder(q, nb, k):
    ku = (k + 3) // 4 * 4
    body = bytearray(ku * nb)
    for n in range(nb):
        row = q[n]
        for kk in range(k):
            body[(kk // 4) * nb * 4 + n * 4 + kk % 4] = row[kk] & 0xFF
    for n in range(nb):
        body += struct.pack("<i", ((128 * sum(q[n]) + 2**31) % 2**32) - 2**31)
    return bytes(body)


def load_ref_py(path):
    src = open(path).read()
    tree = ast.parse(src)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "aocl_reorder_s8s8s32os32_B"]
    if not fns:
        raise SystemExit("ref.py has no aocl_reorder_s8s8s32os32_B")
    mod = ast.Module(body=fns, type_ignores=[])
    ns = {"struct": struct}
    exec(compile(mod, path, "exec"), ns)
    return ns["aocl_reorder_s8s8s32os32_B"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--ref-py", help="path to kt-aocl-reorder-check/ref.py")
    ap.add_argument("--ieee-d", action="store_true", help="model d as amax/127 (IEEE) instead of amax*(1/127)")
    args = ap.parse_args()
    ref_fn = load_ref_py(args.ref_py) if args.ref_py else None
    meta = json.load(open(os.path.join(args.data_dir, "cases.json")))
    ok_all = True
    for c in meta["cases"]:
        name, n, k, nb = c["name"], c["n"], c["k"], c["NB"]
        files = {}
        for kind, fn in c["files"].items():
            b = open(os.path.join(args.data_dir, fn["path"]), "rb").read()
            if len(b) != fn["bytes"] or hashlib.sha256(b).hexdigest() != fn["sha256"]:
                print(f"{name}: {kind} size/sha256 mismatch"); ok_all = False
            files[kind] = b
        w = struct.unpack(f"<{n*k}H", files["input"])
        d_file = struct.unpack(f"<{n}f", files["scale"])
        q, zero_rows, ties, d_vs_ieee = [], 0, 0, 0
        ok_d = True
        for r in range(n):
            fs = [struct.unpack("<f", struct.pack("<I", w[r * k + j] << 16))[0] for j in range(k)]
            amax = max(abs(f) for f in fs)
            d = f32(amax / 127.0) if args.ieee_d else f32(amax * INV127)
            if struct.pack("<f", d) != struct.pack("<f", d_file[r]):
                ok_d = False
            if struct.pack("<f", d_file[r]) != struct.pack("<f", f32(amax / 127.0)):
                d_vs_ieee += 1
            if d == 0.0:
                zero_rows += 1
                q.append([0] * k)
                continue
            row = []
            for f in fs:
                x = f32(f / d)
                if abs(x) % 1.0 == 0.5:
                    ties += 1
                row.append(round_half_away(x))
            q.append(row)
        nth = n // nb
        rb = len(files["weight"]) // nth
        ok_own = ok_ref = True
        for ith in range(nth):
            blk = files["weight"][ith * rb:(ith + 1) * rb]
            qb = q[ith * nb:(ith + 1) * nb]
            if own_reorder(qb, nb, k) != blk:
                ok_own = False
            if ref_fn is not None and ref_fn(qb, nb, k) != blk:
                ok_ref = False
        ok = ok_d and ok_own and ok_ref and len(files["weight"]) == nth * rb
        ok_all &= ok
        print(f"{name}: n={n} k={k} NB={nb} nth={nth} block={rb}B scale={'OK' if ok_d else 'MISMATCH'} "
              f"own-formula={'OK' if ok_own else 'MISMATCH'} "
              f"ref.py={'n/a' if ref_fn is None else ('OK' if ok_ref else 'MISMATCH')} "
              f"(zero rows: {zero_rows}, exact .5 ties: {ties}, rows where d != IEEE amax/127: {d_vs_ieee})")
    print("ALL OK" if ok_all else "FAILED")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
