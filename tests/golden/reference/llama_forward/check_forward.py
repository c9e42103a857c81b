#!/usr/bin/python3
"""llama.cpp's forward on moequant's GGUF against the Hugging Face model's, on the same tokens.

    /usr/bin/python3 check_forward.py MODEL_DIR FAMILY LOGITS_FILE [--gguf MODEL.gguf] [--bos ID]

LOGITS_FILE is what `llama-perplexity --kl-divergence-base LOGITS_FILE` saved on the GGUF that
`moequant convert` made from MODEL_DIR (format: tools/perplexity/perplexity.cpp, perplexity()):
"_logits_", int32 n_ctx, n_vocab, n_chunk, the n_chunk * n_ctx tokens, then for each chunk and each
scored position i in [n_ctx/2, n_ctx - 1) nv = 2*((n_vocab+1)/2) + 4 uint16: two floats (scale,
min_log_prob), then per vocabulary entry q = round((logit - min_logit) / scale), 0 where the logit is
at or below min_logit = max(min, max - 16); the log-prob is min_log_prob + scale * q.

The reference is the full model (embeddings, every decoder layer, final norm, head) assembled from
the per-family torch functions of tests/data/decoder_forward/make_reference.py (imported, not
copied), float32, on each chunk as llama-perplexity evaluated it: the chunk's tokens from position 0,
the first replaced by BOS when the vocabulary adds one (tokenizer.ggml.add_bos_token in --gguf, else
llama.cpp's default for the synthesized BPE vocabularies: false; --bos forces an id).

Printed per family: max |delta log-prob| over the scored positions (entries llama.cpp stored inside
its 16-nat window), mean KL(reference || llama.cpp), top-1 agreement, both perplexities; then the same
for a negative control: the reference with one plausible conversion mistake (NEGATIVE below), whose
KL must be far larger. Exit status 1 when the correct reference does not match (KL above --max-kl)
or the negative control is not at least --min-ratio times further away.
"""
import argparse
import contextlib
import copy
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "data", "decoder_forward"))
import make_reference as ref  # noqa: E402


def read_logits(path):
    b = open(path, "rb").read()
    if b[:8] != b"_logits_":
        raise SystemExit(f"{path}: not a llama-perplexity --kl-divergence-base file")
    n_ctx, n_vocab, n_chunk = struct.unpack("<iii", b[8:20])
    at = 20 + 4 * n_ctx * n_chunk
    tokens = np.frombuffer(b[20:at], dtype=np.int32).reshape(n_chunk, n_ctx)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    scored = n_ctx - 1 - first
    need = at + n_chunk * scored * nv * 2
    if len(b) != need:
        raise SystemExit(f"{path}: {len(b)} bytes, expected {need} (incomplete: llama-perplexity exited early?)")
    raw = np.frombuffer(b[at:need], dtype=np.uint16).reshape(n_chunk, scored, nv)
    head = raw[..., :4].copy().view(np.float32)  # [chunk, pos, 2]: scale, min_log_prob
    q = raw[..., 4 : 4 + n_vocab].astype(np.float64)
    logp = head[..., 1:2].astype(np.float64) + head[..., 0:1].astype(np.float64) * q
    stored = q > 0  # q == 0: at or below the window's floor, the true value <= min_log_prob
    return dict(n_ctx=n_ctx, n_vocab=n_vocab, n_chunk=n_chunk, tokens=tokens, first=first, logp=logp, stored=stored)


def gguf_add_bos(path):
    """tokenizer.ggml.add_bos_token and bos_token_id of a GGUF, read with llama.cpp's gguf-py."""
    for p in (os.environ.get("GGUF_PY"), "/tmp/lc-new/llama.cpp-d32676d77426/gguf-py"):
        if p and os.path.isdir(p):
            sys.path.insert(0, p)
    import gguf

    r = gguf.GGUFReader(path)
    f = r.fields.get("tokenizer.ggml.add_bos_token")
    add = bool(f.contents()) if f is not None else None
    b = r.fields.get("tokenizer.ggml.bos_token_id")
    pre = r.fields.get("tokenizer.ggml.pre")
    return add, (int(b.contents()) if b is not None else None), (pre.contents() if pre is not None else None)


def model_logits(f, c, w, ids):
    """One sequence through the whole model: make_reference.main()'s layer loop over every layer."""
    eps = c["rms_norm_eps"]
    norm = ref.rms_norm_zero_centred if f.get("next") or f.get("gemma") else ref.rms_norm
    x = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        normed = norm(x, w[p + "input_layernorm.weight"], eps)
        if f.get("mla"):
            mixed = ref.mla(c, w, p, normed)
        elif f.get("next"):
            types = c.get("layer_types") or ["full_attention" if (i + 1) % c["full_attention_interval"] == 0 else
                                             "linear_attention" for i in range(c["num_hidden_layers"])]
            if types[layer] == "full_attention":
                mixed = ref.gated_attention(c, w, p, normed)
            else:
                mixed = ref.gated_deltanet(c, w, p, normed, split=f.get("split", False))
        else:
            mixed = ref.attention(f, c, w, p, normed)
        h = x + mixed
        mlp_input = norm(h, w[p + "post_attention_layernorm.weight"], eps)
        types = c.get("mlp_layer_types")
        dense = types[layer] == "dense" if types else layer < c.get("first_k_dense_replace", 0)
        if isinstance(c.get("moe_layer_freq"), list):
            dense = c["moe_layer_freq"][layer] == 0
        if dense:
            x = h + ref.swiglu(w, p + "mlp.", mlp_input, f, c)
        else:
            x = h + ref.moe(f, c, w, p, mlp_input)[0]
    head = w.get("lm_head.weight")
    if head is None and c.get("tie_word_embeddings", False):
        head = w["model.embed_tokens.weight"]
    return norm(x, w["model.norm.weight"], eps) @ head.T


# ---- negative controls: the reference with one plausible conversion mistake ----------------------

@contextlib.contextmanager
def nothing():
    yield


def neg_qkvz_contiguous(f, c, w):
    """Qwen3-Next: in_proj_qkvz read as [q | k | v | z] contiguous instead of per key-head groups
    [q_g k_g v_g z_g] (the split llama.cpp's converter undoes)."""
    nk, nv, dk, dv = c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"]
    r = nv // nk
    w = dict(w)
    for name in [n for n in w if n.endswith("linear_attn.in_proj_qkvz.weight")]:
        t = w[name]
        q, k, v, z = torch.split(t, [nk * dk, nk * dk, nv * dv, nv * dv])
        groups = []
        for g in range(nk):
            groups += [q[g * dk:(g + 1) * dk], k[g * dk:(g + 1) * dk], v[g * r * dv:(g + 1) * r * dv], z[g * r * dv:(g + 1) * r * dv]]
        w[name] = torch.cat(groups)
    return f, c, w, nothing()


@contextlib.contextmanager
def tiled_key_heads():
    original = torch.Tensor.repeat_interleave

    def tiled(self, repeats, dim=None, **kw):  # [n, heads, d] along dim 1: k-head (j mod nk) for value head j
        if dim == 1 and self.dim() == 3 and isinstance(repeats, int):
            return self.repeat(1, repeats, 1)
        return original(self, repeats, dim=dim, **kw)

    torch.Tensor.repeat_interleave = tiled
    try:
        yield
    finally:
        torch.Tensor.repeat_interleave = original


def neg_value_heads_tiled(f, c, w):
    """Qwen3.5: value heads kept in the checkpoint's grouped order (value head j of key head j // r)
    where llama.cpp's ggml_repeat tiles (j mod nk): the reorder of v/z/b/a/A_log/dt_bias/conv/out_proj
    left out, i.e. the reference with the key heads tiled."""
    return f, c, w, tiled_key_heads()


def neg_silu(f, c, w):
    """MiniMax-M3: silu(gate) * up instead of swigluoai (clamped gate/up, (up + 1) * gate * sigmoid(1.702 gate))."""
    f = {k: v for k, v in f.items() if k != "activation"}
    return f, c, w, nothing()


def neg_full_rotary(f, c, w):
    """Rotary over the whole head instead of the first rotary_dim / partial_rotary_factor."""
    c = dict(c)
    d = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    c["rotary_dim"] = d
    c["partial_rotary_factor"] = 1.0
    return f, c, w, nothing()


def neg_topk_norm(f, c, w):
    """Qwen3-MoE: the top-k router weights not renormalized (norm_topk_prob dropped)."""
    c = dict(c, norm_topk_prob=not c.get("norm_topk_prob", False))
    return f, c, w, nothing()


def neg_mla_rope_rows(f, c, w):
    """DeepSeek MLA: Llama's q/k rotary row permutation applied to the rope rows of q_b_proj and
    kv_a_proj_with_mqa (pairs (2i, 2i+1) moved to (i, i + d/2)), which DeepSeek's interleaved rope
    must not get."""
    nope, rope, heads = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["num_attention_heads"]
    perm = torch.cat((torch.arange(0, rope, 2), torch.arange(1, rope, 2)))
    w = dict(w)
    for name in [n for n in w if n.endswith("self_attn.q_b_proj.weight")]:
        t = w[name].view(heads, nope + rope, -1).clone()
        t[:, nope:] = t[:, nope:][:, perm]
        w[name] = t.view(heads * (nope + rope), -1)
    for name in [n for n in w if n.endswith("self_attn.kv_a_proj_with_mqa.weight")]:
        t = w[name].clone()
        lora = c["kv_lora_rank"]
        t[lora:] = t[lora:][perm]
        w[name] = t
    return f, c, w, nothing()


NEGATIVE = {
    "qwen3_next": neg_qkvz_contiguous,
    "qwen3_5_moe": neg_value_heads_tiled,
    "minimax_m3": neg_silu,
    "minimax_m2": neg_full_rotary,
    "glm4_moe": neg_full_rotary,
    "deepseek_v3": neg_mla_rope_rows,
    "glm_moe_dsa": neg_mla_rope_rows,
    "qwen3_moe": neg_topk_norm,
    "mixtral": neg_full_rotary,  # no partial rotary there: placeholder, see README
}


def compare(base, ref_logits):
    """ref_logits [chunk, pos, vocab] float64 log-probs against llama.cpp's stored ones."""
    got, stored = base["logp"], base["stored"]
    # KL against llama.cpp's distribution as stored: unstored entries (below the 16-nat window) at the
    # window's floor, an upper bound of theirs, then renormalized (the uint16 rounding leaves the
    # stored log-probs summing to 1 only within ~1e-4)
    got_n = got - np.log(np.exp(got).sum(-1, keepdims=True))
    p = np.exp(ref_logits)
    kl = (p * (ref_logits - got_n)).sum(-1)
    delta = np.abs(got - ref_logits)[stored]
    top_ref, top_got = ref_logits.argmax(-1), got.argmax(-1)
    tok = base["tokens"][:, base["first"] + 1:]
    nll_ref = -np.take_along_axis(ref_logits, tok[..., None], -1).mean()
    nll_got = -np.take_along_axis(got, tok[..., None], -1).mean()
    return dict(max_delta=float(delta.max()), mean_kl=float(kl.mean()), top1=float((top_ref == top_got).mean()),
                ppl_ref=float(np.exp(nll_ref)), ppl_llama=float(np.exp(nll_got)))


def run(f, c, w, base, bos, ctx):
    out = []
    with ctx, torch.no_grad():
        for chunk in range(base["n_chunk"]):
            ids = base["tokens"][chunk].copy()
            if bos is not None:
                ids[0] = bos
            logits = model_logits(f, c, w, ids.tolist()).double()
            lp = torch.log_softmax(logits, -1).numpy()
            out.append(lp[base["first"]:base["n_ctx"] - 1])
    return np.stack(out)


def ggml_l2norm(x, eps=1e-6):
    """ggml_l2_norm as llama.cpp's gated delta-net uses it: x / max(||x||, eps). Hugging Face's l2norm
    is x * rsqrt(sum(x^2) + eps): the two differ by about eps / (2 sum(x^2)) relative, which only
    matters for tiny q/k heads (synth's: sum(x^2) ~ 1e-3, a 4e-4 difference, KL ~1e-7)."""
    return x / torch.clamp(torch.sqrt((x * x).sum(dim=-1, keepdim=True)), min=eps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("family")
    ap.add_argument("logits_file")
    ap.add_argument("--gguf", help="the GGUF llama-perplexity ran: whether its vocabulary adds BOS")
    ap.add_argument("--bos", type=int, help="force BOS id at each chunk's position 0")
    ap.add_argument("--max-kl", type=float, default=1e-6)
    ap.add_argument("--min-ratio", type=float, default=100.0)
    ap.add_argument("--no-negative", action="store_true")
    ap.add_argument("--hf-l2norm", action="store_true",
                    help="keep Hugging Face's l2norm in the gated delta-net (default: ggml's, as llama.cpp computes it)")
    a = ap.parse_args()
    if not a.hf_l2norm:
        ref.l2norm = ggml_l2norm
    torch.set_num_threads(1)
    base = read_logits(a.logits_file)
    bos, why = a.bos, "--bos"
    if bos is None:
        if a.gguf:
            add, bos_id, pre = ref_bos = gguf_add_bos(a.gguf)
            if add is None:
                # llama-vocab.cpp: BPE vocabularies default to add_bos = false except a few pre-tokenizers
                add = pre in ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                              "lfm2", "tekken", "chameleon")
            bos, why = (bos_id if add else None), f"gguf add_bos={add} pre={pre}"
        else:
            why = "no --gguf: no BOS"
    f = ref.FAMILIES[a.family]
    c, w = ref.load(a.model_dir)
    if c.get("vocab_size") != base["n_vocab"]:
        print(f"note: config vocab_size {c.get('vocab_size')}, llama.cpp n_vocab {base['n_vocab']}")
    ok = run(f, c, w, base, bos, nothing())
    good = compare(base, ok[..., : base["n_vocab"]])
    n_scored = base["n_chunk"] * (base["n_ctx"] - 1 - base["first"])
    print(f"{a.family}: {base['n_chunk']} chunks x {base['n_ctx']} tokens ({n_scored} scored), BOS {bos} ({why})")
    print(f"  reference      : max |d log-prob| {good['max_delta']:.3e}  mean KL {good['mean_kl']:.3e}  "
          f"top-1 {100 * good['top1']:.2f}%  PPL ref {good['ppl_ref']:.4f} llama.cpp {good['ppl_llama']:.4f}")
    status = 0 if good["mean_kl"] <= a.max_kl else 1
    neg = None
    if not a.no_negative and a.family in NEGATIVE:
        mistake = NEGATIVE[a.family]
        nf, nc, nw, ctx = mistake(copy.deepcopy(f), c, w)
        bad = run(nf, nc, nw, base, bos, ctx)
        neg = compare(base, bad[..., : base["n_vocab"]])
        print(f"  negative control ({mistake.__doc__.split(':')[0].split('(')[0].strip()}: {mistake.__name__}): "
              f"max |d| {neg['max_delta']:.3e}  mean KL {neg['mean_kl']:.3e}  top-1 {100 * neg['top1']:.2f}%")
        if not neg["mean_kl"] >= a.min_ratio * max(good["mean_kl"], 1e-12):
            status = 1
    print("RESULT {} {} {} {:.3e} {:.3e} {:.4f} {}".format(
        a.family, base["n_chunk"], base["n_ctx"], good["max_delta"], good["mean_kl"], good["top1"],
        f"{neg['mean_kl']:.3e}" if neg else "-"))
    print("  " + ("MATCH" if status == 0 else "MISMATCH (or insensitive control)"))
    return status


if __name__ == "__main__":
    sys.exit(main())
