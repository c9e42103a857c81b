#!/usr/bin/python3
"""Reference outputs at group sizes 32 and 64 for tests/golden/gptq_golden_test.cpp
(group_sizes_match_the_torch_reference), written from shared/spec/gptq-compressed-tensors.md
§3.1-3.2 (min-max observer, scales, save-time codes), §4.2 (GPTQ's quantize_weight) and §6.3
(packing) in torch float32, on the inputs of shared/golden/gptq (weight and the oracle's
Hessian). shared/golden only has group 128 and channel; before writing anything this script
re-derives those cases and stops unless every byte equals the golden files, so the same code at
32 and 64 is the reference's rule at those sizes.

Run once by hand with Debian's python3-torch:
    /usr/bin/python3 make_reference.py /path/to/shared
It writes one folder per case beside it (raw little-endian files, as shared/golden/gptq) and
index.json. CI only reads them."""
import hashlib
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK = 128  # GPTQModifier.block_size


def load(path, dtype, shape):
    raw = bytearray(open(path, "rb").read())
    if dtype == torch.bfloat16:
        return torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).reshape(shape).clone()
    return torch.frombuffer(raw, dtype=dtype).reshape(shape).clone()


def raw_bytes(t):
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.contiguous().numpy().tobytes()


def scales_of(w_bf16, bits, group):
    """§3.1: absmax over each group of the BF16 weight, / (bit_range / 2) in fp32, one rounding
    to BF16; an all-zero group gets BF16's eps."""
    n, k = w_bf16.shape
    g = w_bf16.reshape(n, k // group, group)
    lo = torch.clamp(g.amin(dim=2), max=0).float()
    hi = torch.clamp(g.amax(dim=2), min=0).float()
    absmax = torch.maximum(lo.abs(), hi.abs())
    s = (absmax / ((2 ** bits - 1) / 2.0)).to(torch.bfloat16)
    s[s == 0] = torch.finfo(torch.bfloat16).eps
    return s


def saved_codes(w_bf16, s_bf16, bits, group):
    """§3.2 quantize at save: bf16(W / s) (BF16 division), clamp, round half even."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    s_full = s_bf16.repeat_interleave(group, dim=1)
    t = w_bf16 / s_full  # bf16 / bf16: computed in fp32, rounded once to bf16
    return torch.round(torch.clamp(t.float(), qmin, qmax)).to(torch.int8)


def pack(codes, bits):
    """§6.3: u = code + 2^(b-1), element j at bits [j*b, j*b+b) of its row, LSB first, int32 words."""
    n, k = codes.shape
    u = (codes.to(torch.int64) + 2 ** (bits - 1)).reshape(n, k * bits // 32, 32 // bits)
    shifts = torch.arange(32 // bits, dtype=torch.int64) * bits
    words = (u << shifts).sum(dim=2)
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def gptq_weight(w_bf16, h, s_bf16, bits, group, actorder, damp_frac):
    """§4.2 quantize_weight: the fake-quantized weight GPTQ leaves in module.weight."""
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    n, k = w_bf16.shape
    w = w_bf16.float()
    h = h.clone()
    perm = None
    if actorder == "static":
        perm = torch.argsort(torch.diag(h), descending=True)
        w = w[:, perm]
        h = h[perm][:, perm]
    g_idx = torch.arange(k) // group
    if perm is not None:
        g_idx = g_idx[perm]
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    h += damp_frac * torch.mean(torch.diag(h)) * torch.eye(k)
    u = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    s = s_bf16.float()
    for i1 in range(0, k, BLOCK):
        i2 = min(i1 + BLOCK, k)
        w1 = w[:, i1:i2].clone()
        q1 = torch.zeros_like(w1)
        err1 = torch.zeros_like(w1)
        for i in range(i2 - i1):
            col = w1[:, i]
            d = u[i1 + i, i1 + i]
            s_col = s[:, g_idx[i1 + i]]
            q = torch.round(torch.clamp(col / s_col, qmin, qmax))
            q = (q.to(torch.bfloat16) * s_col.to(torch.bfloat16)).float()
            q1[:, i] = q
            e = (col - q) / d
            w1[:, i:] -= e.unsqueeze(1).matmul(u[i1 + i, i1 + i:i2].unsqueeze(0))
            err1[:, i] = e
        w[:, i1:i2] = q1
        w[:, i2:] -= err1.matmul(u[i1:i2, i2:])
    if perm is not None:
        w = w[:, torch.argsort(perm)]
    return w.to(torch.bfloat16)


def outputs(case_dir, params, group):
    n, k, bits = params["out_features"], params["in_features"], params["bits"]
    w = load(os.path.join(case_dir, "W.bf16.bin"), torch.bfloat16, (n, k))
    h = load(os.path.join(case_dir, "H.f32.bin"), torch.float32, (k, k))
    s = scales_of(w, bits, group)
    actorder = params["actorder"]
    wq = gptq_weight(w, h, s, bits, group, actorder, params["dampening_frac"])
    codes = saved_codes(wq, s, bits, group)
    # RTN's scales are these too (no case here reorders groups).
    return {
        "weight_scale.bf16.bin": raw_bytes(s),
        "weight_packed.i32.bin": raw_bytes(pack(codes, bits)),
        "rtn_weight_packed.i32.bin": raw_bytes(pack(saved_codes(w, s, bits, group), bits)),
    }


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../../shared")
    golden = os.path.join(shared, "golden", "gptq")
    torch.set_num_threads(1)
    sources = ["w4a16_g128_static", "w4a16_g128_noact_damp001", "w8a16_g128_static", "w4a16_g128_static_dead"]
    # The script's own check: at the golden group size its bytes are the golden files'.
    for name in sources:
        case_dir = os.path.join(golden, name)
        params = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
        for file, data in outputs(case_dir, params, params["group_size"]).items():
            if data != open(os.path.join(case_dir, file), "rb").read():
                sys.exit(f"{name}/{file}: this script does not reproduce the golden bytes; nothing written")
    cases = []
    for name in sources:
        case_dir = os.path.join(golden, name)
        params = json.load(open(os.path.join(case_dir, "manifest.json")))["params"]
        weight_sha = hashlib.sha256(open(os.path.join(case_dir, "W.bf16.bin"), "rb").read()).hexdigest()
        for group in (32, 64):
            case = name.replace("g128", f"g{group}")
            os.makedirs(os.path.join(HERE, case), exist_ok=True)
            files = {}
            for file, data in outputs(case_dir, params, group).items():
                open(os.path.join(HERE, case, file), "wb").write(data)
                files[file] = hashlib.sha256(data).hexdigest()
            manifest = {"source": name, "source_weight_sha256": weight_sha, "group_size": group,
                        "bits": params["bits"], "actorder": params["actorder"],
                        "dampening_frac": params["dampening_frac"], "files": files}
            json.dump(manifest, open(os.path.join(HERE, case, "manifest.json"), "w"), indent=1)
            cases.append(case)
    json.dump({"cases": cases}, open(os.path.join(HERE, "index.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
