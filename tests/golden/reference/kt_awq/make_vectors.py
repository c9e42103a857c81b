"""Golden vectors for kt-kernel's awq re-layout: AutoAWQ qweight/qzeros words through kt's own
functions (convert_cpu_weights.py's unpack_reverse_awq_interleaving and pack_column_major_1d,
the calls its AWQToColumnMajorConverter makes per batch), on the CPU.

The words are random over the whole int32 range (high nibbles set, so negative words) and drawn
by numpy with a fixed seed; inputs and kt's outputs are stored together in one safetensors file:
{case}.qweight [k, n/8], {case}.qzeros [groups, n/8] (inputs) and {case}.weight [n, k/8],
{case}.zeros [groups, n/8] (kt's outputs), all I32.

usage: KT_SITE=<kt site> PYTHONPATH=<site>/shims:<site> python3 make_vectors.py OUT_DIR
"""
import json, os, runpy, sys

import ktshim  # noqa: F401  (the kt-client harness's CPU shims, imported before kt)
import numpy as np
import torch
from safetensors.torch import save_file

SITE = os.environ["KT_SITE"]
kt = runpy.run_path(os.path.join(SITE, "ktscripts", "convert_cpu_weights.py"), run_name="kt_convert_cpu_weights")

# (name, k = input features, n = output features, groups): one full-group case, a short last
# group (k = 200 with group 64), and a kt-sized down projection.
CASES = [("k64_n32_g2", 64, 32, 2), ("k200_n48_g4", 200, 48, 4), ("k256_n256_g2", 256, 256, 2)]


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261205)
    tensors, cases = {}, []
    for name, k, n, groups in CASES:
        qweight = torch.from_numpy(rng.integers(-2**31, 2**31, size=(k, n // 8), dtype=np.int64).astype(np.int32))
        qzeros = torch.from_numpy(rng.integers(-2**31, 2**31, size=(groups, n // 8), dtype=np.int64).astype(np.int32))
        iweights, izeros = kt["unpack_reverse_awq_interleaving"](qweight[None], qzeros[None])
        weight, zeros = kt["pack_column_major_1d"](iweights, izeros)
        tensors.update({f"{name}.qweight": qweight, f"{name}.qzeros": qzeros,
                        f"{name}.weight": weight[0].contiguous(), f"{name}.zeros": zeros[0].contiguous()})
        cases.append({"name": name, "k": k, "n": n, "groups": groups})
    save_file(tensors, os.path.join(out_dir, "relayout.safetensors"))
    commit = open(os.path.join(SITE, "KT_COMMIT")).read().strip() if os.path.exists(os.path.join(SITE, "KT_COMMIT")) else "?"
    with open(os.path.join(out_dir, "cases.json"), "w") as f:
        json.dump({"ktransformers": commit, "seed": 20261205, "cases": cases}, f, indent=1)


if __name__ == "__main__":
    main()
