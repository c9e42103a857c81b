"""M3 MXFP8: kt-kernel MXFP8 MoE forward on a moequant-synthesized checkpoint vs torch reference from moequant's BF16 decode."""
import os, sys, json, glob, importlib.util
SITE = "/tmp/ktc-moe/site"
sys.path[:0] = [SITE + "/shims", SITE]
import numpy as np
import ktshim  # noqa
import torch
from safetensors import safe_open
from kt_kernel import kt_kernel_ext
from kt_kernel.utils.loader import MXFP8SafeTensorLoader

MX, BF = "/tmp/m3kt/mx", "/tmp/m3kt/bf16x"
LAYER = int(os.environ.get("LAYER", "1"))
BACKEND = os.environ.get("BACKEND", "AVX2MXFP8_MOE")
THREADS = 2

# kt's own reference (kt-kernel/examples/test_mxfp8_moe_m3.py), imported without running main()
spec = importlib.util.spec_from_file_location("kttest", "/tmp/m3kt/kt_test_mxfp8_moe_m3.py")
kttest = importlib.util.module_from_spec(spec); spec.loader.exec_module(kttest)

def open_dir(d):
    f = {}
    for p in sorted(glob.glob(d + "/*.safetensors")):
        h = safe_open(p, framework="pt")
        for k in h.keys(): f[k] = h
    return f

# E4M3fn LUT (independent of torch float8, absent in torch 1.13)
def e4m3_lut():
    b = np.arange(256); s = np.where(b >> 7, -1.0, 1.0); e = (b >> 3) & 15; m = b & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0)) * s
    v[(e == 15) & (m == 7)] = np.nan
    return torch.tensor(v, dtype=torch.float64)
LUT = e4m3_lut()

def dequant(w_u8, s_u8, mode="ue8m0"):
    w = LUT[w_u8.long()]
    e = s_u8.long().double()
    if mode == "ue8m0": s = 2.0 ** (e - 127)
    elif mode == "e-128": s = 2.0 ** (e - 128)
    elif mode == "e-126": s = 2.0 ** (e - 126)
    elif mode == "raw_byte": s = e
    elif mode == "no_scale": s = torch.ones_like(e)
    elif mode == "group_shift": s = 2.0 ** (torch.roll(e, 1, dims=-1) - 127)  # right bytes, wrong 32-column group
    elif mode == "col_major": s = 2.0 ** (e.reshape(e.shape[1], e.shape[0]).t() - 127)  # [N,K/32] bytes read as [K/32,N]
    s = s.repeat_interleave(32, dim=-1)
    return (w * s).float().to(torch.bfloat16)

def main():
    print("torch", torch.__version__, "kt ext", kt_kernel_ext.__file__)
    loader = MXFP8SafeTensorLoader(MX)
    base = f"language_model.model.layers.{LAYER}"
    W = loader.load_experts(base)
    E = len(W["gate"]); I, H = W["gate"][0].shape
    gs = H // W["gate_scale"][0].shape[1]
    print(f"loader: E={E} gate {tuple(W['gate'][0].shape)} {W['gate'][0].dtype} scale {tuple(W['gate_scale'][0].shape)} {W['gate_scale'][0].dtype} down {tuple(W['down'][0].shape)} gs={gs}")
    # raw file bytes equal to loader output?
    raw = open_dir(MX)
    pre = f"{base}.block_sparse_moe.experts"
    same = all(torch.equal(W[k][e], raw[f"{pre}.{e}.{p}.{suf}"].get_tensor(f"{pre}.{e}.{p}.{suf}").view(torch.uint8))
               for e in range(E) for k, p, suf in [("gate","w1","weight"),("up","w3","weight"),("down","w2","weight"),
                                                    ("gate_scale","w1","weight_scale_inv"),("up_scale","w3","weight_scale_inv"),("down_scale","w2","weight_scale_inv")])
    print("loader tensors == file bytes:", same)
    allsc = torch.cat([W[k][e].flatten() for k in ("gate_scale","up_scale","down_scale") for e in range(E)])
    print(f"scale bytes: min {int(allsc.min())} max {int(allsc.max())} (2^{int(allsc.min())-127}..2^{int(allsc.max())-127}); zero/255 count {(allsc==0).sum().item()}/{(allsc==255).sum().item()}")

    # moequant's decoded BF16 (bf16-safetensors export)
    bfd = open_dir(BF)
    g_mq = torch.stack([bfd[f"{pre}.{e}.w1.weight"].get_tensor(f"{pre}.{e}.w1.weight") for e in range(E)])
    u_mq = torch.stack([bfd[f"{pre}.{e}.w3.weight"].get_tensor(f"{pre}.{e}.w3.weight") for e in range(E)])
    d_mq = torch.stack([bfd[f"{pre}.{e}.w2.weight"].get_tensor(f"{pre}.{e}.w2.weight") for e in range(E)])
    print("bf16x dtype", g_mq.dtype, tuple(g_mq.shape), tuple(d_mq.shape))
    dq = {}
    for mode in ("ue8m0", "e-128", "e-126", "raw_byte", "no_scale", "group_shift", "col_major"):
        dq[mode] = tuple(torch.stack([dequant(W[k][e], W[k + "_scale"][e], mode) for e in range(E)]) for k in ("gate", "up", "down"))
    bit = [torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in zip(dq["ue8m0"], (g_mq, u_mq, d_mq))]
    nd = [int((a.view(torch.int16) != b.view(torch.int16)).sum()) for a, b in zip(dq["ue8m0"], (g_mq, u_mq, d_mq))]
    print(f"moequant bf16 export == independent e4m3*2^(e-127)->bf16 decode, bitwise (gate,up,down): {bit} differing elems {nd}")

    # kt MXFP8 MoE (API exactly as kt's test)
    cls = getattr(kt_kernel_ext.moe, BACKEND)
    cpu_infer = kt_kernel_ext.CPUInfer(THREADS)
    maxlen = 64
    cfg = kt_kernel_ext.moe.MOEConfig(E, 2, H, I, 0)
    cfg.layer_idx = LAYER; cfg.max_len = maxlen; cfg.pool = cpu_infer.backend_
    cfg.quant_config.bits = 8; cfg.quant_config.group_size = gs; cfg.quant_config.zero_point = False
    cfg.swiglu_alpha = 1.702; cfg.swiglu_limit = 7.0
    cfg.gate_projs = [[t.data_ptr() for t in W["gate"]]]; cfg.up_projs = [[t.data_ptr() for t in W["up"]]]
    cfg.down_projs = [[t.data_ptr() for t in W["down"]]]
    cfg.gate_scales = [[t.data_ptr() for t in W["gate_scale"]]]; cfg.up_scales = [[t.data_ptr() for t in W["up_scale"]]]
    cfg.down_scales = [[t.data_ptr() for t in W["down_scale"]]]
    moe = cls(cfg)
    p2l = torch.arange(E, dtype=torch.int64).contiguous()
    cpu_infer.submit(moe.load_weights_task(p2l.data_ptr())); cpu_infer.sync()

    def kt_fwd(x, ids, w):
        y = torch.empty_like(x); bsz = torch.tensor([x.shape[0]], dtype=torch.int32)
        cpu_infer.submit(moe.forward_task(bsz.data_ptr(), ids.shape[1], ids.data_ptr(), w.data_ptr(), x.data_ptr(), y.data_ptr(), False))
        cpu_infer.sync(); return y

    def tf_ref(x, ids, w, g, u, d, limit=7.0, alpha=1.702):
        # transformers-style: gate clamped above only, up both sides
        out = torch.zeros(x.shape[0], H)
        for t in range(x.shape[0]):
            for s in range(ids.shape[1]):
                e = int(ids[t, s]); xf = x[t:t+1].float()
                gg = (xf @ g[e].float().t()).clamp(max=limit); uu = (xf @ u[e].float().t()).clamp(-limit, limit)
                out[t] += float(w[t, s]) * ((gg * torch.sigmoid(gg * alpha) * (uu + 1)) @ d[e].float().t())[0]
        return out.to(torch.bfloat16)

    def ref_bf16_inter(x, ids, w, g, u, d, limit=7.0, alpha=1.702):
        # kt's formula (gate and up clamped both sides) with the activation rounded to BF16 before down (as kt's BufferA is BF16)
        out = torch.zeros(x.shape[0], H)
        for t in range(x.shape[0]):
            for s in range(ids.shape[1]):
                e = int(ids[t, s]); xf = x[t:t+1].float()
                gg = (xf @ g[e].float().t()).clamp(-limit, limit); uu = (xf @ u[e].float().t()).clamp(-limit, limit)
                a = (gg * torch.sigmoid(gg * alpha) * (uu + 1)).to(torch.bfloat16).float()
                out[t] += float(w[t, s]) * (a @ d[e].float().t())[0]
        return out.to(torch.bfloat16)

    def rel(a, b):  # kt's metric (mean |a-b| / mean |b|) and relative L2
        a, b = a.float().double(), b.float().double()
        return ((a - b).abs().mean() / b.abs().mean()).item(), ((a - b).norm() / b.norm()).item()

    res = []
    gen = torch.Generator().manual_seed(1234)
    for xscale in (0.01, 1.0, 8.0):
        for T in (1, 7, 64):
            ids = torch.stack([torch.randperm(E, generator=gen)[:2] for _ in range(T)]).long().contiguous()
            w = torch.rand((T, 2), generator=gen).float() + 0.05; w = (w / w.sum(-1, keepdim=True)).contiguous()
            x = (torch.randn((T, H), generator=gen) * xscale).to(torch.bfloat16).contiguous()
            y = kt_fwd(x, ids, w)
            y2 = kt_fwd(x, ids, w)
            ref = kttest.reference_moe_m3(x, ids, w, g_mq, u_mq, d_mq, alpha=1.702, limit=7.0)
            # clamp activity: fraction of gate pre-activations beyond +-7
            gpre = torch.cat([x.float() @ g_mq[int(ids[t, s])].float().t() for t in range(T) for s in range(2)])
            clamp_frac = ((gpre.abs() > 7).float().mean().item(), (gpre < -7).float().mean().item())
            row = dict(xscale=xscale, T=T, det=torch.equal(y.view(torch.int16), y2.view(torch.int16)),
                       clamp_frac_abs_gt7=clamp_frac[0], clamp_frac_lt_m7=clamp_frac[1],
                       ref_mag=ref.float().abs().mean().item(), kt_vs_ref=rel(y, ref),
                       kt_vs_ref_bf16_act=rel(y, ref_bf16_inter(x, ids, w, g_mq, u_mq, d_mq)),
                       kt_vs_tfref_gate_onesided=rel(y, tf_ref(x, ids, w, g_mq, u_mq, d_mq)))
            for mode in ("e-128", "e-126", "raw_byte", "no_scale", "group_shift", "col_major"):
                g_, u_, d_ = dq[mode]
                row["kt_vs_ref_" + mode] = rel(y, kttest.reference_moe_m3(x, ids, w, g_, u_, d_, alpha=1.702, limit=7.0))
            res.append(row)
            print(json.dumps(row))
    json.dump(dict(backend=BACKEND, layer=LAYER, rows=res), open(f"/tmp/m3kt/res_{BACKEND}_L{LAYER}.json", "w"), indent=1)

if __name__ == "__main__":
    main()
