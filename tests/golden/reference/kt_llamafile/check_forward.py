"""kt-kernel's LLAMAFILE MoE (the GGUF backend kt serves experts from on CPUs without AMX) on a
moequant GGUF output: kt's own GGUF loader reads the folder, its llamafile kernels compute the
MoE, and the result is compared with
  (a) an FP32 MoE of the experts as ggml's own dequantizer (libggml-base's to_float, through
      ctypes) reads the GGUF bytes: what kt should compute, up to its activation rounding;
  (b) an FP32 MoE of the source's BF16 experts: the quantization error;
  (c) kt's forward on the same GGUF with every route moved to the next expert, which must be far
      off (the check is sensitive to the layout).
kt quantizes the activations to 8 bits (ggml's vec_dot types) before each product, so (a) is
about 1.5-2 %, as kt's own MOE_INT8 (1.5 %) and AMX INT8 forwards are against their codes.
usage: KTC_SITE=<kt site> PYTHONPATH=<site>:<site>/shims MOEQUANT_SHARED_DIR=<shared> \
       GGML_BASE=<libggml-base.so> python3 check_forward.py --src SRC --gguf OUT [--qlens 1,7,64]
"""
import argparse, ctypes, glob, os, sys

sys.path.insert(0, os.path.join(os.environ.get("MOEQUANT_SHARED_DIR", "../shared"), "tools", "kt-client"))
import ktc_common as C  # noqa: E402  (imports ktshim before kt_kernel)
import numpy as np  # noqa: E402
import torch  # noqa: E402


class TypeTraits(ctypes.Structure):  # ggml.h struct ggml_type_traits (ggml 0.21)
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64), ("blck_size_interleave", ctypes.c_int64),
                ("type_size", ctypes.c_size_t), ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


def ggml_dequantizer(path):
    lib = ctypes.CDLL(path)
    lib.ggml_get_type_traits.restype = ctypes.POINTER(TypeTraits)
    to_float_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.c_int64)

    def dequantize(data: np.ndarray, ggml_type: int, n: int) -> np.ndarray:
        traits = lib.ggml_get_type_traits(ggml_type).contents
        out = np.empty(n, dtype=np.float32)
        to_float_t(traits.to_float)(data.ctypes.data, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), n)
        return out
    return dequantize


def gguf_experts(reader_tensors, dequantize, L, proj, m):
    t = reader_tensors[f"blk.{L}.ffn_{proj}_exps.weight"]
    rows, cols = (m.I, m.H) if proj in ("gate", "up") else (m.H, m.I)
    values = dequantize(np.ascontiguousarray(t.data).view(np.uint8), int(t.tensor_type), m.E * rows * cols)
    return torch.from_numpy(values.reshape(m.E, rows, cols))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--qlens", default="1,7,64")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    from gguf import GGUFReader
    from kt_kernel.utils.llamafile import LlamafileMoEWrapper
    dequantize = ggml_dequantizer(os.environ["GGML_BASE"])
    tensors = {}
    for f in sorted(glob.glob(os.path.join(a.gguf, "*.gguf"))):
        for t in GGUFReader(f).tensors:
            tensors[t.name] = t
    m = C.Model(a.src)
    print("kt commit", C.kt_commit(), "| threads", C.THREADS)
    gen = torch.Generator().manual_seed(a.seed)
    fails = 0
    layers = m.moe_layers()
    if not layers:  # kt-client's Model reads model.layers.L.mlp.experts.E.{gate,up,down}_proj only
        print("RESULT check_llamafile_forward: FAIL (no MoE layer named model.layers.L.mlp.experts.E.* in --src: nothing checked)")
        return 1
    for L in layers:
        LlamafileMoEWrapper._gguf_loader_instance = None
        wr = C.make_wrapper(m, L, "LLAMAFILE", a.gguf, tp=1)
        wr.load_weights()
        types = {p: int(tensors[f"blk.{L}.ffn_{p}_exps.weight"].tensor_type) for p in ("gate", "up", "down")}
        dq = {p: gguf_experts(tensors, dequantize, L, p, m) for p in ("gate", "up", "down")}
        g, u, d = (t.float() for t in m.experts_bf16(L))
        for T in [int(t) for t in a.qlens.split(",")]:
            for trial in range(2):
                x = torch.randn(T, m.H, generator=gen).to(torch.bfloat16)
                if trial == 0:
                    ids, w = m.route(L, x.float())
                else:
                    ids = torch.stack([torch.randperm(m.E, generator=gen)[: m.K] for _ in range(T)]).long()
                    w = torch.rand(T, m.K, generator=gen) + 0.1
                    w = (w / w.sum(-1, keepdim=True)).float()
                y = C.kt_forward(wr, x, ids, w).float()
                e_deq = C.relerr(y, C.ref_moe(x, ids, w, dq["gate"], dq["up"], dq["down"]))
                e_src = C.relerr(y, C.ref_moe(x, ids, w, g, u, d))
                swapped = (ids + 1) % m.E  # every route to the next expert
                e_swap = C.relerr(C.kt_forward(wr, x, swapped, w).float(), C.ref_moe(x, ids, w, dq["gate"], dq["up"], dq["down"]))
                ok = bool(torch.isfinite(y).all()) and e_deq < 0.03 and e_swap > 10 * e_deq
                fails += not ok
                print(f"  L{L} types {types} T={T:3d} {'router' if trial == 0 else 'random'}: relerr(kt, ggml-dequantized)={e_deq:.5f} "
                      f"relerr(kt, source BF16)={e_src:.5f} swapped-experts={e_swap:.3f} -> {'PASS' if ok else 'FAIL'}", flush=True)
        del wr
    print("RESULT check_llamafile_forward:", "PASS" if fails == 0 else f"FAIL ({fails})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
