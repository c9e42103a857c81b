#!/usr/bin/python3
"""Reference decoder-layer outputs for tests/integration/decoder_forward_test.cpp, written from the
Hugging Face modeling code (Qwen3Moe*/Mixtral* Attention, SparseMoeBlock, RMSNorm) in float32
with torch, on a checkpoint `moequant synth` makes:

    moequant synth --family qwen3_moe --dtype bf16 --out /tmp/qwen3_moe
    /usr/bin/python3 make_reference.py qwen3_moe /tmp/qwen3_moe qwen3_moe.safetensors

Run once by hand with Debian's python3-torch; CI only reads the output file."""
import json
import os
import struct
import sys

import torch

SAMPLES = [[1, 5, 9, 200, 3, 77, 15], [42, 8, 310, 99, 5]]

# What the families differ in here: q/k RMSNorm (Qwen3), the MoE block's names, and whether the
# top-k weights are renormalized (Mixtral always; Qwen3 by norm_topk_prob).
FAMILIES = {
    "qwen3_moe": {"qk_norm": True, "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                  "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "num_experts"},
    "mixtral": {"qk_norm": False, "router": "block_sparse_moe.gate.weight", "expert": "block_sparse_moe.experts.{e}.",
                "projections": ("w1", "w3", "w2"), "experts": "num_local_experts", "always_normalize": True},
    # GLM-4.5 (Glm4MoeAttention / Glm4MoeMoE): q/k/v biases, rotary on the first
    # partial_rotary_factor of each head, DeepSeek's sigmoid router with correction bias,
    # shared experts, dense first layers.
    "glm4_moe": {"qk_norm": False, "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                 "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "n_routed_experts",
                 "sigmoid": True, "bias": True, "shared": "mlp.shared_experts."},
}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = bytearray(data[b:e])
        dtype = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}[info["dtype"]]
        out[name] = torch.frombuffer(raw, dtype=dtype).reshape(info["shape"]).float()
    return out


def load(model_dir):
    weights = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            weights.update(read_safetensors(os.path.join(model_dir, f)))
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f), weights


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def attention(f, c, w, p, x):  # one sample, x [n, hidden]
    hq, hk = c["num_attention_heads"], c["num_key_value_heads"]
    n, d = x.shape[0], c.get("head_dim") or c["hidden_size"] // hq
    def proj(name, heads):
        y = x @ w[p + f"self_attn.{name}.weight"].T
        if f.get("bias"):
            y = y + w[p + f"self_attn.{name}.bias"]
        return y.view(n, heads, d)

    q, k, v = proj("q_proj", hq), proj("k_proj", hk), proj("v_proj", hk)
    if f["qk_norm"]:
        q = rms_norm(q, w[p + "self_attn.q_norm.weight"], c["rms_norm_eps"])
        k = rms_norm(k, w[p + "self_attn.k_norm.weight"], c["rms_norm_eps"])
    r = int(d * c.get("partial_rotary_factor", 1.0))
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
    freqs = torch.arange(n).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    q = torch.cat((q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]), dim=-1)
    k = torch.cat((k[..., :r] * cos + rotate_half(k[..., :r]) * sin, k[..., r:]), dim=-1)
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    k = k.repeat_interleave(hq // hk, dim=0)
    v = v.repeat_interleave(hq // hk, dim=0)
    scores = q @ k.transpose(1, 2) * d**-0.5 + torch.full((n, n), float("-inf")).triu(1)
    out = (torch.softmax(scores, dim=-1, dtype=torch.float32) @ v).transpose(0, 1).reshape(n, hq * d)
    return out @ w[p + "self_attn.o_proj.weight"].T


def moe(f, c, w, p, x):  # Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock
    logits = x @ w[p + f["router"]].T
    k = c["num_experts_per_tok"]
    if f.get("sigmoid"):  # noaux_tc: the bias chooses, the unbiased scores weigh
        scores = logits.sigmoid()
        choice = scores + w[p + "mlp.gate.e_score_correction_bias"]
        groups = c.get("n_group", 1)
        if groups > 1:
            g = choice.view(-1, groups, choice.shape[1] // groups).topk(2, dim=-1)[0].sum(dim=-1)
            keep = torch.zeros_like(g).scatter_(1, torch.topk(g, k=c["topk_group"], dim=-1)[1], 1)
            mask = keep.unsqueeze(-1).expand(-1, groups, choice.shape[1] // groups).reshape(choice.shape)
            choice = choice.masked_fill(~mask.bool(), 0.0)
        experts = torch.topk(choice, k=k, dim=-1)[1]
        weights = scores.gather(1, experts)
        if c.get("norm_topk_prob"):
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        weights = weights * c.get("routed_scaling_factor", 1.0)
    else:
        probs = torch.softmax(logits, dim=1, dtype=torch.float)
        weights, experts = torch.topk(probs, k, dim=-1)
        if f.get("always_normalize") or c.get("norm_topk_prob"):
            weights = weights / weights.sum(dim=-1, keepdim=True)
    y = torch.zeros_like(x)
    gate, up, down = f["projections"]
    for e in range(c[f["experts"]]):
        rows, slot = torch.where(experts == e)
        if rows.numel() == 0:
            continue
        q = p + f["expert"].format(e=e)
        xe = x[rows]
        h = torch.nn.functional.silu(xe @ w[q + gate + ".weight"].T) * (xe @ w[q + up + ".weight"].T)
        y.index_add_(0, rows, (h @ w[q + down + ".weight"].T) * weights[rows, slot, None])
    if f.get("shared"):
        y = y + swiglu(w, p + f["shared"], x)
    return y, experts, weights


def swiglu(w, prefix, x):
    h = torch.nn.functional.silu(x @ w[prefix + "gate_proj.weight"].T) * (x @ w[prefix + "up_proj.weight"].T)
    return h @ w[prefix + "down_proj.weight"].T


def main(family, model_dir, output):
    f = FAMILIES[family]
    c, w = load(model_dir)
    eps = c["rms_norm_eps"]
    out = {"ids": torch.tensor(sum(SAMPLES, []), dtype=torch.int32), "sample_lengths": torch.tensor([len(s) for s in SAMPLES], dtype=torch.int32)}
    x = torch.cat([w["model.embed_tokens.weight"][torch.tensor(s)] for s in SAMPLES])
    for layer in range(min(3, c["num_hidden_layers"])):
        p = f"model.layers.{layer}."
        normed = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        parts, start = [], 0
        for s in SAMPLES:
            parts.append(attention(f, c, w, p, normed[start : start + len(s)]))
            start += len(s)
        h = x + torch.cat(parts)
        mlp_input = rms_norm(h, w[p + "post_attention_layernorm.weight"], eps)
        if layer < c.get("first_k_dense_replace", 0):  # a dense layer
            x = h + swiglu(w, p + "mlp.", mlp_input)
        else:
            y, experts, weights = moe(f, c, w, p, mlp_input)
            x = h + y
            out[f"layer{layer}.experts"] = experts.to(torch.int32)
            out[f"layer{layer}.weights"] = weights
        out[f"layer{layer}.residual"] = h
        out[f"layer{layer}.mlp_input"] = mlp_input
        out[f"layer{layer}.output"] = x
    header, blobs, offset = {}, [], 0
    for name in sorted(out):
        t = out[name].contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "I32" if t.dtype == torch.int32 else "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"generator": "make_reference.py, torch " + torch.__version__, "model": c["model_type"]}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(output, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
