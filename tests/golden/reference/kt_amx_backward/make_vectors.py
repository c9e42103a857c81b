"""Golden vectors of kt-kernel's SFT backward weights (convert_cpu_weights.py --save-backward-weights).

Runs kt-kernel's own code the way its converter does (AMXSFTMoEWrapper with method
AMXINT8_SFT_SkipLoRA / AMXINT4_SFT_SkipLoRA, load_weights_from_tensors, then
save_backward_weights_from_tensors: TP_MOE_SFT::prepare_and_save_bwd) on one small layer, and
keeps every `{INT8|INT4}_{gate|up|down}_bwd_{E}_*Byte_{quant|scale}_.kt` file it writes, per
NUMA part, with cases.json (shapes, seed, sizes, sha256). The inputs are not stored: they are
drawn by the generator below, which tests/golden/amx_backward_golden_test.cpp repeats.

Input generator: one SplitMix64 stream (state = SEED; next(): state += 0x9E3779B97F4A7C15, then
the usual two xor-shift-multiply rounds and a final xor-shift), one draw per element, in the
order gate [E, I, H], up [E, I, H], down [E, H, I], each row-major. A draw x gives the BF16 bits
((x >> 48) & 0x807F) | ((120 + ((x >> 40) & 7)) << 7): random sign and mantissa, magnitude in
[2^-7, 2). Then gate column ZERO_COLUMN (every expert, every row) is set to +0.0, so one row of
the gate's backward weights is all zero (scale 0).

usage: PYTHONPATH=<kt site>/shims:<kt site> python3 make_vectors.py OUT_DIR
(<kt site>: a kt-kernel build as /work/shared/tools/kt-client/README.md makes it; ktshim is its
import shim for this CPU-only torch).
"""
import glob, hashlib, json, os, shutil, sys, tempfile

import ktshim  # noqa: F401  (must precede kt_kernel)
import torch
from kt_kernel import AMXSFTMoEWrapper

SEED = 20261205
E, H, I, PARTS = 1, 256, 256, 2
ZERO_COLUMN = 5
MASK = (1 << 64) - 1


def draws(state, count):
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


def inputs():
    bits = [((x >> 48) & 0x807F) | ((120 + ((x >> 40) & 7)) << 7) for x in draws(SEED, 3 * E * I * H)]
    t = torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    gate = t[: E * I * H].reshape(E, I, H).clone()
    up = t[E * I * H: 2 * E * I * H].reshape(E, I, H).clone()
    down = t[2 * E * I * H:].reshape(E, H, I).clone()
    gate[:, :, ZERO_COLUMN] = 0.0
    return gate.contiguous(), up.contiguous(), down.contiguous()


def run(method, out):
    gate, up, down = inputs()
    scratch = tempfile.mkdtemp()
    try:
        wrapper = AMXSFTMoEWrapper(layer_idx=0, num_experts=E, num_experts_per_tok=1, hidden_size=H,
                                   moe_intermediate_size=I, num_gpu_experts=0, cpuinfer_threads=2,
                                   threadpool_count=PARTS, weight_path=scratch, chunked_prefill_size=512,
                                   lora_rank=1, lora_alpha=1.0, max_cache_depth=1, method=method)
        experts = torch.arange(E, dtype=torch.int64)
        wrapper.load_weights_from_tensors(gate, up, down, experts)
        wrapper.save_backward_weights_from_tensors(gate, up, down, experts, scratch)
        del wrapper
        files = []
        for part in range(PARTS):
            for path in sorted(glob.glob(os.path.join(scratch, "_layer_0", f"_numa_{part}", "*_bwd_*.kt"))):
                name = f"numa{part}_" + os.path.basename(path)
                shutil.copyfile(path, os.path.join(out, name))
                data = open(path, "rb").read()
                files.append({"part": part, "file": name, "kt_name": os.path.basename(path), "bytes": len(data),
                              "sha256": hashlib.sha256(data).hexdigest()})
        return files
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "*.kt")):
        os.remove(old)
    cases = [{"method": m, "files": run(f"AMX{m}_SFT_SkipLoRA", out)} for m in ("INT8", "INT4")]
    site = os.path.dirname(os.path.dirname(torch.__file__))
    doc = {
        "format": "kt-kernel AMX SFT backward weights: per NUMA part i, gate/up bwd = BufferB(n=H, k=I/T) of the part "
                  "transposed, down bwd = BufferB(n=I/T, k=H); quant = code bytes, scale = row scales float32 LE",
        "generator": "make_vectors.py (SplitMix64 inputs, see its docstring)",
        "seed": SEED, "experts": E, "hidden_size": H, "intermediate_size": I, "parts": PARTS, "zero_column": ZERO_COLUMN,
        "kt_commit": open(os.path.join(os.environ.get("KT_SITE", ""), "KT_COMMIT")).read().strip()
        if os.path.exists(os.path.join(os.environ.get("KT_SITE", ""), "KT_COMMIT")) else "unknown",
        "cases": cases,
    }
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print("wrote", sum(len(c["files"]) for c in cases), "files to", out)


if __name__ == "__main__":
    main()
