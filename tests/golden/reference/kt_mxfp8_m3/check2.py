"""(a) KTMoEWrapper(method=MXFP8) end-to-end on /tmp/m3kt/mx (loader prefix probing, backend auto-select, swiglu plumbing);
(b) kt MXFP8 backends (AVX2, AMX-class) vs kt BF16 backends on moequant's BF16 export, same inputs: bitwise/ulp comparison."""
import os, sys, glob, json
SITE = "/tmp/ktc-moe/site"; sys.path[:0] = [SITE + "/shims", SITE]
import ktshim  # noqa
import torch
from safetensors import safe_open
from kt_kernel import kt_kernel_ext, KTMoEWrapper
from kt_kernel.utils import amx as ktamx
from kt_kernel.utils.loader import MXFP8SafeTensorLoader
L = int(os.environ.get("LAYER", "1")); MX, BF = "/tmp/m3kt/mx", "/tmp/m3kt/bf16x"
E, K, H, I = 8, 2, 256, 256
print("KT_MXFP8_BACKEND=", os.environ.get("KT_MXFP8_BACKEND"), "-> _select_mxfp8_backend():", ktamx._select_mxfp8_backend().__name__ if ktamx._select_mxfp8_backend() else None)

cpu_infer = kt_kernel_ext.CPUInfer(2)
def fwd(moe, x, ids, w):
    y = torch.zeros_like(x); bsz = torch.tensor([x.shape[0]], dtype=torch.int32)
    cpu_infer.submit(moe.forward_task(bsz.data_ptr(), ids.shape[1], ids.data_ptr(), w.data_ptr(), x.data_ptr(), y.data_ptr(), False))
    cpu_infer.sync(); return y

def mk(cls, g, u, d, gs=None, us=None, ds=None):
    cfg = kt_kernel_ext.moe.MOEConfig(E, K, H, I, 0)
    cfg.layer_idx = L; cfg.max_len = 64; cfg.pool = cpu_infer.backend_
    cfg.quant_config.bits = 8 if gs is not None else 16; cfg.quant_config.group_size = 32 if gs is not None else 0; cfg.quant_config.zero_point = False
    cfg.swiglu_alpha = 1.702; cfg.swiglu_limit = 7.0
    cfg.gate_projs = [[t.data_ptr() for t in g]]; cfg.up_projs = [[t.data_ptr() for t in u]]; cfg.down_projs = [[t.data_ptr() for t in d]]
    if gs is not None:
        cfg.gate_scales = [[t.data_ptr() for t in gs]]; cfg.up_scales = [[t.data_ptr() for t in us]]; cfg.down_scales = [[t.data_ptr() for t in ds]]
    else:
        cfg.gate_scales = [[0] * E]; cfg.up_scales = [[0] * E]; cfg.down_scales = [[0] * E]
    m = cls(cfg); p2l = torch.arange(E, dtype=torch.int64)
    cpu_infer.submit(m.load_weights_task(p2l.data_ptr())); cpu_infer.sync()
    return m, p2l

W = MXFP8SafeTensorLoader(MX).load_experts(f"language_model.model.layers.{L}")
pre = f"language_model.model.layers.{L}.block_sparse_moe.experts"
fh = {}
for p in sorted(glob.glob(BF + "/*.safetensors")):
    h = safe_open(p, framework="pt"); [fh.__setitem__(k, h) for k in h.keys()]
bfw = {n: [fh[f"{pre}.{e}.{n}.weight"].get_tensor(f"{pre}.{e}.{n}.weight").contiguous() for e in range(E)] for n in ("w1", "w3", "w2")}

# sensitivity: moequant's BF16 with ONE 32-value group (expert 0, w1 row 0, cols 0..31) read with exponent+1 (x2)
bfw_pert = {n: [t.clone() for t in v] for n, v in bfw.items()}
bfw_pert["w1"][0][0, :32] = (bfw_pert["w1"][0][0, :32].float() * 2).to(torch.bfloat16)
moes = {}
for name in ("AVX2MXFP8_MOE", "AMXMXFP8_KGroup_MOE"):
    moes[name] = mk(getattr(kt_kernel_ext.moe, name), W["gate"], W["up"], W["down"], W["gate_scale"], W["up_scale"], W["down_scale"])
for name in ("AVX2BF16_MOE", "AMXBF16_MOE"):
    try:
        moes[name] = mk(getattr(kt_kernel_ext.moe, name), bfw["w1"], bfw["w3"], bfw["w2"])
    except Exception as ex:
        print(name, "failed:", ex)

moes["AVX2BF16_MOE_onegroup_x2"] = mk(kt_kernel_ext.moe.AVX2BF16_MOE, bfw_pert["w1"], bfw_pert["w3"], bfw_pert["w2"])
# wrapper path (what kt's serving integration does for --kt-method MXFP8)
ktamx.AMXMoEWrapper._safetensor_loader_instance = None; ktamx.NativeMoEWrapper._native_loader_instance = None
wr = KTMoEWrapper(layer_idx=L, num_experts=E, num_experts_per_tok=K, hidden_size=H, moe_intermediate_size=I,
                  gpu_experts_mask=None, cpuinfer_threads=2, threadpool_count=1, weight_path=MX,
                  chunked_prefill_size=64, method="MXFP8", swiglu_alpha=1.702, swiglu_limit=7.0)
wr.load_weights(torch.arange(E, dtype=torch.int64))
print("wrapper class:", type(wr).__name__, "backend:", type(wr.moe).__name__)
def wfwd(x, ids, w):
    y = torch.zeros_like(x); bsz = torch.tensor([x.shape[0]], dtype=torch.int32)
    wr.cpu_infer.submit(wr.moe.forward_task(bsz.data_ptr(), ids.shape[1], ids.data_ptr(), w.data_ptr(), x.data_ptr(), y.data_ptr(), False))
    wr.cpu_infer.sync(); return y

def cmp(a, b):
    a16, b16 = a.view(torch.int16).int(), b.view(torch.int16).int()
    ulp = (a16 - b16).abs()
    r = ((a.double() - b.double()).abs().mean() / b.double().abs().mean()).item()
    return dict(bitwise=bool(torch.equal(a16, b16)), frac_diff=round((ulp != 0).float().mean().item(), 5), max_ulp=int(ulp.max()), rel=f"{r*100:.4f}%")

gen = torch.Generator().manual_seed(99)
for xs in (0.01, 1.0, 8.0):
    for T in (1, 7, 64):
        ids = torch.stack([torch.randperm(E, generator=gen)[:K] for _ in range(T)]).long().contiguous()
        w = torch.rand((T, K), generator=gen) + 0.05; w = (w / w.sum(-1, keepdim=True)).float().contiguous()
        x = (torch.randn((T, H), generator=gen) * xs).to(torch.bfloat16).contiguous()
        ys = {n: fwd(m[0], x, ids, w) for n, m in moes.items()}
        ys["wrapper"] = wfwd(x, ids, w)
        base = ys["AVX2MXFP8_MOE"]
        print(json.dumps(dict(x=xs, T=T, **{f"{n} vs AVX2MXFP8": cmp(y, base) for n, y in ys.items() if n != "AVX2MXFP8_MOE"})))
