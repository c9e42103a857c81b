"""kt-kernel's MOE_INT8 (AOCL int8 GEMM, Int8_KERNEL_MOE) forward on moequant's merged MOE_INT8 output.

Loads moequant's merged output through kt's GeneralMoEWrapper (weight_path = merged folder -> SafeTensorLoader,
load_merged_weight), runs moe.forward_task (as BaseMoEWrapper.submit_forward) for several token counts, and compares
  (a) FP32 reference MoE with the source BF16 experts,
  (b) FP32 reference MoE with moequant's dequantized codes q*d (q decoded from the AOCL-reordered .weight blobs,
      d the .scale tensors; q also checked == kt's rule round(w/d), d == amax*(1/127.f)),
  (c) kt's online-quantized MOE_INT8: load_weights_from_tensors on the BF16 writes kt's .kt tree (kt frees its TP
      parts after saving, so a forward on that wrapper segfaults); that tree is loaded with load_weights
      (weight_path = tree, kt's file path) and its forward must be bit-identical to the one on moequant's merged.
A kt-kernel build with its MoE kernels and AOCL-BLAS is needed (README.md: "kt's own forward").
Usage: KTC_SITE=<kt site> PYTHONPATH=<site>:<site>/shims MOEQUANT_SHARED_DIR=<shared> \
       python3 check_forward.py --src SRC --merged MQ_MERGED [--work DIR] [--qlens 1,7,64]
"""
import argparse, os, sys, shutil
sys.path.insert(0, os.path.join(os.environ.get("MOEQUANT_SHARED_DIR", "../shared"), "tools", "kt-client"))
import ktc_common as C  # noqa: E402  (imports ktshim before kt_kernel)
import numpy as np  # noqa: E402
import torch  # noqa: E402


def reset():
    C.reset_kt_singletons()
    from kt_kernel.utils.moe_kernel import GeneralMoEWrapper
    GeneralMoEWrapper._safetensor_loader_instance = None


def wrapper(m, L, path, max_len=256):
    reset()
    from kt_kernel import KTMoEWrapper
    return KTMoEWrapper(layer_idx=L, num_experts=m.E, num_experts_per_tok=m.K, hidden_size=m.H,
                        moe_intermediate_size=m.I, gpu_experts_mask=None, cpuinfer_threads=C.THREADS,
                        threadpool_count=C.TP, weight_path=path, chunked_prefill_size=max_len, method="MOE_INT8")


def q_round(w, d):
    """kt: static_cast<int8_t>(std::round(f / d)) in fp32 (round half away from zero)."""
    r = w.float() / d.float().unsqueeze(-1)
    return (torch.sign(r) * torch.floor(r.abs() + 0.5)).clamp(-128, 127)


def dequant_from_merged(mm, m, L, proj, src_bf16):
    """[E, rows, cols] fp32 q*d, using moequant's per-row scales (numa parts concatenated as kt splits them)."""
    out, hist_ok, nblob = [], 0, 0
    for e in range(m.E):
        parts, nu = [], 0
        while mm.has(f"blk.{L}.ffn_{proj}_exps.{e}.numa.{nu}.scale"):
            parts.append(nu); nu += 1
        w = src_bf16[e].float()  # gate/up [I,H], down [H,I]
        if proj in ("gate", "up"):
            chunks = w.chunk(len(parts), 0)   # intermediate split over numa (rows)
        else:
            chunks = w.chunk(len(parts), 1)   # down: intermediate split over columns (k)
        deq = []
        for nu, wc in zip(parts, chunks):
            d = mm.raw(f"blk.{L}.ffn_{proj}_exps.{e}.numa.{nu}.scale").float()
            blob = mm.raw(f"blk.{L}.ffn_{proj}_exps.{e}.numa.{nu}.weight").view(torch.int8).numpy()
            q = q_round(wc, d)
            # per-row d must equal kt's amax/127 of this BF16 row
            # kt's build computes amax * (1/127.f) (fast-math reciprocal), not amax / 127: check exactly that
            assert torch.equal(d, wc.abs().amax(1) * torch.tensor(1 / 127, dtype=torch.float32)), "scale != amax/127"
            # x86 build (PLAIN=false): the blob is nth AOCL-reordered blocks of N_BLOCK rows (up/gate 32, down 64),
            # each = codes laid out [k/4][nb][4] + nb int32 (= 128 * row sum of codes, s8s8 compensation).
            # Decode the file's codes, check them against q (kt's rule on the BF16) and the extras.
            n, k = q.shape
            nb = 32 if proj in ("gate", "up") else 64
            nth = n // nb
            R = blob.size // nth
            okb = blob.size == nth * R and R == nb * k + 4 * nb
            qf = np.empty((n, k), dtype=np.int8)
            for i in range(nth):
                blk = blob[i * R: i * R + nb * k]
                qf[i * nb:(i + 1) * nb] = blk.reshape(k // 4, nb, 4).transpose(1, 0, 2).reshape(nb, k)
                ex = blob[i * R + nb * k: (i + 1) * R].copy().view(np.int32)
                okb = okb and np.array_equal(ex, 128 * qf[i * nb:(i + 1) * nb].astype(np.int32).sum(1))
            okb = okb and np.array_equal(qf.astype(np.float32), q.numpy())
            hist_ok += int(okb); nblob += 1
            q = torch.from_numpy(qf.astype(np.float32))  # the file's own codes
            deq.append(q * d.unsqueeze(-1))
        out.append(torch.cat(deq, 0 if proj in ("gate", "up") else 1))
    return torch.stack(out), hist_ok, nblob


def qrows(a):
    """kt BufferA::from_mat: per-row symmetric int8, d = amax/127; returns dequantized fp32."""
    d = a.abs().amax(1) * torch.tensor(1 / 127, dtype=torch.float32)
    return q_round(a, d) * d.unsqueeze(-1)


def emu_kt(x, ids, w, gate, up, down, tp):
    """kt MOE_INT8 numerics emulated in fp32/fp64: int8 x per token, dequantized weights, silu(g)*u per TP part,
    int8 of that per token per TP part (each TP part holds I/tp), down partials summed over parts."""
    x = x.float()
    xq = qrows(x).double()
    out = torch.zeros(x.shape[0], down.shape[1], dtype=torch.float64)
    I = gate.shape[1]
    for e in ids.unique().tolist():
        rows, slot = (ids == e).nonzero(as_tuple=True)
        for p in range(tp):
            sl = slice(p * I // tp, (p + 1) * I // tp)
            h = (torch.nn.functional.silu(xq[rows] @ gate[e][sl].double().t()) * (xq[rows] @ up[e][sl].double().t()))
            hq = qrows(h.float()).double()
            out.index_add_(0, rows, (hq @ down[e][:, sl].double().t()) * w[rows, slot].double().unsqueeze(1))
    return out.float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--merged", required=True)
    ap.add_argument("--work", default="kt-moe-int8-forward")
    ap.add_argument("--qlens", default="1,7,64")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    print("kt commit", C.kt_commit(), "| threads", C.THREADS, "tp", C.TP)
    m = C.Model(a.src)
    mm = C.Model.__new__(C.Model)  # merged folder: only its tensor map is needed
    mm.files = {}
    import glob
    from safetensors import safe_open
    for f in sorted(glob.glob(os.path.join(a.merged, "*.safetensors"))):
        h = safe_open(f, framework="pt")
        for k in h.keys():
            mm.files[k] = h
    layers = m.moe_layers()
    print(f"H={m.H} I={m.I} E={m.E} K={m.K} layers={layers}")
    qlens = [int(t) for t in a.qlens.split(",")]
    gen = torch.Generator().manual_seed(a.seed)
    fails = 0
    for L in layers:
        g, u, d = m.experts_bf16(L)
        # kt online quantization of the same BF16 (writes a .kt tree into its own folder)
        ktdir = os.path.join(a.work, f"kt-online.L{L}")
        shutil.rmtree(ktdir, ignore_errors=True); os.makedirs(ktdir)
        wq = wrapper(m, L, ktdir)
        wq.load_weights_from_tensors(g, u, d, C.identity_map(m))
        del wq  # tps cleared after save: not usable for forward
        wk = wrapper(m, L, ktdir)
        assert not wk.load_merged_weight
        wk.load_weights(C.identity_map(m))
        # kt inference path on moequant's merged safetensors
        wm = wrapper(m, L, a.merged)
        assert wm.__class__.__name__ == "GeneralMoEWrapper" and wm.load_merged_weight, "not the merged MOE_INT8 path"
        wm.load_weights(C.identity_map(m))
        dq = {}
        hok = hn = 0
        for p, src in (("gate", g), ("up", u), ("down", d)):
            dq[p], h1, h2 = dequant_from_merged(mm, m, L, p, src)
            hok += h1; hn += h2
        print(f" L{L}: file codes decoded (AOCL [k/4][nb][4] blocks) == kt rule round(w/d), extras == 128*rowsum: {hok}/{hn}")
        fails += hok != hn
        gf, uf, df = g.float(), u.float(), d.float()
        for T in qlens:
            for trial in range(3):
                x = torch.randn(T, m.H, generator=gen).to(torch.bfloat16)
                if trial == 0:
                    ids, w = m.route(L, x.float())  # source router
                else:  # random distinct expert ids, random positive weights
                    ids = torch.stack([torch.randperm(m.E, generator=gen)[: m.K] for _ in range(T)]).long()
                    w = torch.rand(T, m.K, generator=gen) + 0.1
                    w = (w / w.sum(-1, keepdim=True)).float()
                ym = C.kt_forward(wm, x, ids, w)
                yk = C.kt_forward(wk, x, ids, w)
                ym2 = C.kt_forward(wm, x, ids, w)
                same = torch.equal(ym.view(torch.int16), yk.view(torch.int16))
                det = torch.equal(ym.view(torch.int16), ym2.view(torch.int16))
                fin = bool(torch.isfinite(ym.float()).all())
                ra = C.ref_moe(x, ids, w, gf, uf, df)
                rb = C.ref_moe(x, ids, w, dq["gate"], dq["up"], dq["down"])
                ea, eb = C.relerr(ym.float(), ra), C.relerr(ym.float(), rb)
                eq = C.relerr(rb, ra)  # weight-quantization error alone
                ec = C.relerr(ym.float(), emu_kt(x, ids, w, dq["gate"], dq["up"], dq["down"], C.TP))
                ok = same and det and fin and eb < 0.03 and ec < 0.005
                fails += not ok
                print(f"  L{L} T={T:3d} {'router' if trial == 0 else 'random'}: relerr(kt,ref_bf16)={ea:.5f} "
                      f"relerr(kt,ref_deq)={eb:.5f} relerr(kt,emu_int8_act)={ec:.5f} [ref_deq vs ref_bf16 {eq:.5f}] kt-merged==kt-online {same} "
                      f"deterministic {det} finite {fin} -> {'PASS' if ok else 'FAIL'}", flush=True)
        del wk, wm
    print("RESULT check_moe_int8_forward:", "PASS" if fails == 0 else f"FAIL ({fails})")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
