#!/usr/bin/python3
"""Reference decoder-layer outputs for tests/integration/decoder_forward_test.cpp, written from the
Hugging Face modeling code of each family (attention, MoE block, norms) in float32
with torch, on a checkpoint `moequant synth` makes:

    moequant synth --family qwen3_moe --dtype bf16 --out /tmp/qwen3_moe
    /usr/bin/python3 make_reference.py qwen3_moe /tmp/qwen3_moe qwen3_moe.safetensors

(and likewise mixtral, glm4_moe, qwen3_next with --dtype bf16; glm4_moe also with --preset small,
GLM-4.7's settings, into glm4_moe_small.safetensors; deepseek_v3, kimi_k2, kimi_k25 and
deepseek_v32 (family key deepseek_v3) and minimax_m2 with --dtype fp8; minimax_m3 with --dtype bf16
(its language model under language_model., samples within its sparse attention's dense window): DeepSeek-V3.2's indexer keeps
every key of samples no longer than index_topk, as these are, so its forward is V3's dense MLA and the
indexer is unread; Kimi-K2.5's language model is Kimi-K2's, read from text_config and the
language_model. tensors, the vision tower unread (kimi_k26, synth's Kimi-K2.6 release, the same
with its YaRN factor 64, into kimi_k26.safetensors; minimax_m27 reuses minimax_m2's file); qwen3_5_moe with --dtype bf16, whose experts synth
stores fused in layout A: Qwen3-Next's layers with separate in_proj_qkv / in_proj_z / in_proj_b /
in_proj_a, read from text_config and the model.language_model. tensors, rope settings from
rope_parameters (text-only positions: the three M-RoPE streams are equal, plain RoPE);
glm_moe_dsa (GLM-5) twice, from --dtype bf16 into
glm_moe_dsa.safetensors and from --dtype fp8 into glm_moe_dsa_fp8.safetensors: V3.2's dense MLA with
GLM's sizes, rope_parameters without scaling, mlp_layer_types, samples within index_topk as well)

Besides the layers, "logits": the final norm and head applied to the last computed layer's output.

A fourth argument runs every matrix product (each `@`: linear layers, experts, Q K^T, P V; the
router's logits stay float32, as the reference routers compute them) in BF16, everything else
staying float32, for moequant's --compute-dtype bf16:
    bf16-operands  operands rounded to BF16, the product in float32 (what moequant computes), into
                   <family>_bf16_operands.safetensors
    bf16           torch's bfloat16 matmul (BF16 operands, result rounded to BF16), into
                   <family>_bf16.safetensors
Only for families whose every product is one of those (not Qwen3-Next's Gated DeltaNet).

Run once by hand with Debian's python3-torch; CI only reads the output file."""
import json
import math
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
    # GLM-4.5 (Glm4MoeAttention / Glm4MoeMoE): q/k/v biases, per-head q/k RMSNorm when the config
    # says use_qk_norm (GLM-4.5/4.6/4.7, not -Air), rotary on the first partial_rotary_factor of each head, DeepSeek's sigmoid router with correction bias,
    # shared experts, dense first layers.
    # DeepSeek-V3 (DeepseekV3Attention / DeepseekV3MoE): MLA, YaRN, group-limited sigmoid router,
    # shared experts, dense first layers; FP8 weights.
    "deepseek_v3": {"mla": True, "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                    "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "n_routed_experts",
                    "sigmoid": True, "shared": "mlp.shared_experts."},
    # Qwen3-Next (Qwen3NextGatedDeltaNet / Qwen3NextAttention / Qwen3NextSparseMoeBlock):
    # zero-centred norms, linear and full attention layers, shared expert with a sigmoid gate.
    "qwen3_next": {"next": True, "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                   "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "num_experts",
                   "shared": "mlp.shared_expert.", "shared_gate": "mlp.shared_expert_gate.weight", "layers": 4},
    # Qwen3.5-MoE (Qwen3_5MoeGatedDeltaNet / Qwen3_5MoeTopKRouter): Qwen3-Next's layers with the
    # linear-attention projections stored apart; the router always renormalizes.
    "qwen3_5_moe": {"next": True, "split": True, "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                    "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "num_experts",
                    "shared": "mlp.shared_expert.", "shared_gate": "mlp.shared_expert_gate.weight", "layers": 4,
                    "always_normalize": True},
    # MiniMax-M2 (model-families-2026.md §3.5): one RMSNorm over all heads' q (and k) outputs,
    # rotary on the first rotary_dim of each head, F32 sigmoid router with the correction bias
    # beside the gate, always renormalized, no shared expert.
    "minimax_m2": {"qk_norm": False, "qk_norm_whole": True, "rotary_dim": True, "router": "block_sparse_moe.gate.weight",
                   "router_bias": "block_sparse_moe.e_score_correction_bias", "expert": "block_sparse_moe.experts.{e}.",
                   "projections": ("w1", "w3", "w2"), "experts": "num_local_experts", "sigmoid": True,
                   "always_normalize": True},
    # MiniMax-M3 (MiniMaxM3VL text model, docs/families.md): Gemma norms (1 + w) everywhere, the
    # per-head q/k norms included; rotary on the first rotary_dim; M2's router scaled by
    # routed_scaling_factor; swigluoai in every MLP; a shared expert; moe_layer_freq's dense layers.
    "minimax_m3": {"qk_norm": True, "rotary_dim": True, "router": "block_sparse_moe.gate.weight",
                   "router_bias": "block_sparse_moe.e_score_correction_bias", "expert": "block_sparse_moe.experts.{e}.",
                   "projections": ("w1", "w3", "w2"), "experts": "num_local_experts", "sigmoid": True,
                   "always_normalize": True, "shared": "block_sparse_moe.shared_experts.", "gemma": True,
                   "activation": "swigluoai"},
    "glm4_moe": {"qk_norm": "use_qk_norm", "router": "mlp.gate.weight", "expert": "mlp.experts.{e}.",
                 "projections": ("gate_proj", "up_proj", "down_proj"), "experts": "n_routed_experts",
                 "sigmoid": True, "bias": True, "shared": "mlp.shared_experts."},
}
# GLM-5 (GlmMoeDsaAttention, DeepseekV3MoE): DeepSeek-V3.2's forward, which is V3's within index_topk.
FAMILIES["glm_moe_dsa"] = FAMILIES["deepseek_v3"]


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
        if info["dtype"] == "F8_E4M3":
            codes = torch.frombuffer(raw, dtype=torch.uint8).long()
            out[name] = E4M3[codes].reshape(info["shape"])
            continue
        dtype = {"BF16": torch.bfloat16, "F32": torch.float32, "F16": torch.float16}[info["dtype"]]
        out[name] = torch.frombuffer(raw, dtype=dtype).reshape(info["shape"]).float()
    return out


def e4m3(code):  # float8_e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return float("nan")
    if exponent == 0:
        return sign * mantissa / 8.0 * 2.0**-6
    return sign * (1 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3 = torch.tensor([e4m3(c) for c in range(256)], dtype=torch.float32)


def dequantize_fp8(weights, block):
    """FP8 weights times their 128x128 weight_scale_inv blocks (float32), then BF16, as the
    checkpoint's BF16 equivalent (model-families.md §4.4)."""
    for name in [n for n in weights if n + "_scale_inv" in weights]:
        w, scale = weights[name], weights.pop(name + "_scale_inv")
        full = scale.repeat_interleave(block[0], 0)[: w.shape[0]].repeat_interleave(block[1], 1)[:, : w.shape[1]]
        weights[name] = (w * full).to(torch.bfloat16).float()


def load(model_dir):
    weights = {}
    for f in sorted(os.listdir(model_dir)):
        if f.endswith(".safetensors"):
            weights.update(read_safetensors(os.path.join(model_dir, f)))
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    top = config
    if "text_config" in config:  # a VLM: the LM's settings in text_config, its tensors under a prefix
        config = dict(config["text_config"], model_type=config["model_type"])
        if config["model_type"] == "qwen3_5_moe":  # model.language_model.{embed_tokens,layers,norm}
            lm = "model.language_model."
            weights = {("model." + n[len(lm) :] if n.startswith(lm) else n): t for n, t in weights.items()}
        else:  # Kimi-K2.5: language_model.{model.*,lm_head}
            lm = "language_model."
            weights = {n[len(lm) :]: t for n, t in weights.items() if n.startswith(lm)}
    split_fused_experts(weights, config["moe_intermediate_size"] if "moe_intermediate_size" in config else 0)
    q = top.get("quantization_config") or config.get("quantization_config")
    if q:
        dequantize_fp8(weights, q["weight_block_size"])
    return config, weights


def split_fused_experts(weights, inter):
    """Layout A (model-families.md §2.5): gate_up_proj [E, 2I, H] holds each expert's gate rows
    [0, I) then its up rows; down_proj [E, H, I]. Stored here under per-expert names."""
    for name in [n for n in weights if n.endswith("mlp.experts.gate_up_proj")]:
        base = name[: -len("gate_up_proj")]
        gate_up, down = weights.pop(name), weights.pop(base + "down_proj")
        assert gate_up.shape[1] == 2 * inter and down.shape[2] == inter, name
        for e in range(gate_up.shape[0]):
            weights[f"{base}{e}.gate_proj.weight"] = gate_up[e, :inter]
            weights[f"{base}{e}.up_proj.weight"] = gate_up[e, inter:]
            weights[f"{base}{e}.down_proj.weight"] = down[e]


def rope(c):  # (theta, partial_rotary_factor): top-level keys, else rope_parameters (transformers v5)
    r = c.get("rope_parameters") or {}
    return c.get("rope_theta", r.get("rope_theta")), c.get("partial_rotary_factor", r.get("partial_rotary_factor", 1.0))


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rms_norm_zero_centred(x, w, eps):  # Qwen3NextRMSNorm: x_hat * (1 + w)
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)


def l2norm(x, eps=1e-6):
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def gated_deltanet(c, w, p, x, split=False):  # Qwen3NextGatedDeltaNet with the recurrent torch rule, one sample
    n = x.shape[0]
    nk, nv, dk, dv = c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"], c["linear_value_head_dim"]
    r = nv // nk
    a_ = p + "linear_attn."
    if split:  # Qwen3_5MoeGatedDeltaNet: q | k | v contiguous in in_proj_qkv; z, b, a apart
        mixed = x @ w[a_ + "in_proj_qkv.weight"].T  # [n, conv_dim]
        z = (x @ w[a_ + "in_proj_z.weight"].T).view(n, nv, dv)
        b, a = x @ w[a_ + "in_proj_b.weight"].T, x @ w[a_ + "in_proj_a.weight"].T
    else:
        qkvz = (x @ w[a_ + "in_proj_qkvz.weight"].T).view(n, nk, 2 * dk + 2 * r * dv)
        ba = (x @ w[a_ + "in_proj_ba.weight"].T).view(n, nk, 2 * r)
        q, k, v, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], dim=2)
        b, a = torch.split(ba, [r, r], dim=2)
        v, z = v.reshape(n, nv, dv), z.reshape(n, nv, dv)
        b, a = b.reshape(n, nv), a.reshape(n, nv)
        mixed = torch.cat((q.reshape(n, -1), k.reshape(n, -1), v.reshape(n, -1)), dim=-1)  # [n, conv_dim]
    kernel = c["linear_conv_kernel_dim"]
    conv = torch.nn.functional.conv1d(mixed.T[None], w[a_ + "conv1d.weight"], padding=kernel - 1, groups=mixed.shape[1])
    mixed = torch.nn.functional.silu(conv[0, :, :n]).T
    q, k, v = torch.split(mixed, [nk * dk, nk * dk, nv * dv], dim=-1)
    q, k, v = q.reshape(n, nk, dk), k.reshape(n, nk, dk), v.reshape(n, nv, dv)
    beta = b.sigmoid()
    g = -w[a_ + "A_log"].float().exp() * torch.nn.functional.softplus(a.float() + w[a_ + "dt_bias"])
    q, k = q.repeat_interleave(r, dim=1), k.repeat_interleave(r, dim=1)
    q, k = l2norm(q) * dk**-0.5, l2norm(k)
    state = torch.zeros(nv, dk, dv)
    out = torch.zeros(n, nv, dv)
    for i in range(n):  # torch_recurrent_gated_delta_rule
        state = state * g[i].exp()[:, None, None]
        kv_mem = (state * k[i][:, :, None]).sum(dim=-2)
        delta = (v[i] - kv_mem) * beta[i][:, None]
        state = state + k[i][:, :, None] * delta[:, None, :]
        out[i] = (state * q[i][:, :, None]).sum(dim=-2)
    # Qwen3NextRMSNormGated: norm * weight * silu(z)
    normed = w[a_ + "norm.weight"] * (out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"]))
    normed = normed * torch.nn.functional.silu(z)
    return normed.reshape(n, nv * dv) @ w[a_ + "out_proj.weight"].T


def gated_attention(c, w, p, x):  # Qwen3NextAttention, one sample
    n, hq, hk, d = x.shape[0], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps = c["rms_norm_eps"]
    a = p + "self_attn."
    q, gate = torch.chunk((x @ w[a + "q_proj.weight"].T).view(n, hq, 2 * d), 2, dim=-1)
    gate = gate.reshape(n, hq * d)
    q = rms_norm_zero_centred(q, w[a + "q_norm.weight"], eps)
    k = rms_norm_zero_centred((x @ w[a + "k_proj.weight"].T).view(n, hk, d), w[a + "k_norm.weight"], eps)
    v = (x @ w[a + "v_proj.weight"].T).view(n, hk, d)
    theta, partial = rope(c)
    rd = int(d * partial)
    inv_freq = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.int64).float() / rd))
    freqs = torch.arange(n).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    q = torch.cat((q[..., :rd] * cos + rotate_half(q[..., :rd]) * sin, q[..., rd:]), dim=-1)
    k = torch.cat((k[..., :rd] * cos + rotate_half(k[..., :rd]) * sin, k[..., rd:]), dim=-1)
    q, k, v = q.transpose(0, 1), k.transpose(0, 1).repeat_interleave(hq // hk, dim=0), v.transpose(0, 1).repeat_interleave(hq // hk, dim=0)
    scores = q @ k.transpose(1, 2) * d**-0.5 + torch.full((n, n), float("-inf")).triu(1)
    out = (torch.softmax(scores, dim=-1, dtype=torch.float32) @ v).transpose(0, 1).reshape(n, hq * d)
    return (out * gate.sigmoid()) @ w[a + "o_proj.weight"].T


def rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


def attention(f, c, w, p, x):  # one sample, x [n, hidden]
    hq, hk = c["num_attention_heads"], c["num_key_value_heads"]
    n, d = x.shape[0], c.get("head_dim") or c["hidden_size"] // hq
    def proj(name, heads):
        y = x @ w[p + f"self_attn.{name}.weight"].T
        if f.get("bias"):
            y = y + w[p + f"self_attn.{name}.bias"]
        if f.get("qk_norm_whole") and name in ("q_proj", "k_proj"):  # over heads * head_dim, then split
            y = rms_norm(y, w[p + f"self_attn.{name[0]}_norm.weight"], c["rms_norm_eps"])
        return y.view(n, heads, d)

    q, k, v = proj("q_proj", hq), proj("k_proj", hk), proj("v_proj", hk)
    if f["qk_norm"] is True or (f["qk_norm"] == "use_qk_norm" and c.get("use_qk_norm")):
        qk_norm = rms_norm_zero_centred if f.get("gemma") else rms_norm
        q = qk_norm(q, w[p + "self_attn.q_norm.weight"], c["rms_norm_eps"])
        k = qk_norm(k, w[p + "self_attn.k_norm.weight"], c["rms_norm_eps"])
    r = c["rotary_dim"] if f.get("rotary_dim") else int(d * c.get("partial_rotary_factor", 1.0))
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


def yarn(c, dim):  # transformers' _compute_yarn_parameters; returns inv_freq and the cos/sin factor
    base, rs = c.get("rope_theta", 10000.0), c["rope_scaling"]
    factor = rs["factor"]

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    mscale, mscale_all = rs.get("mscale"), rs.get("mscale_all_dim")
    attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if mscale and mscale_all else get_mscale(factor)

    def correction_dim(rotations):
        return (dim * math.log(rs["original_max_position_embeddings"] / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(rs.get("beta_fast", 32)), correction_dim(rs.get("beta_slow", 1))
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


def rope_scaling(c):  # rope_scaling, or transformers 5's rope_parameters unless its type is "default"
    rs = c.get("rope_scaling") or c.get("rope_parameters")
    return rs if rs and rs.get("rope_type", rs.get("type")) != "default" else None


def rope_theta(c):
    return c.get("rope_theta") or (c.get("rope_parameters") or {}).get("rope_theta", 10000.0)


def mla(c, w, p, x):  # DeepseekV3Attention, one sample
    n, heads = x.shape[0], c["num_attention_heads"]
    nope, rope, vd, eps = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["rms_norm_eps"]
    a = p + "self_attn."
    q = rms_norm(x @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], eps) @ w[a + "q_b_proj.weight"].T
    q = q.view(n, heads, nope + rope).transpose(0, 1)
    q_pass, q_rot = q[..., :nope], q[..., nope:]
    ckv = x @ w[a + "kv_a_proj_with_mqa.weight"].T
    k_pass, k_rot = ckv[:, : c["kv_lora_rank"]], ckv[:, c["kv_lora_rank"] :]
    kv = (rms_norm(k_pass, w[a + "kv_a_layernorm.weight"], eps) @ w[a + "kv_b_proj.weight"].T).view(n, heads, nope + vd).transpose(0, 1)
    k_pass, value = kv[..., :nope], kv[..., nope:]
    k_rot = k_rot.view(1, n, rope)
    if rope_scaling(c):
        inv_freq, attention_factor = yarn(dict(c, rope_scaling=rope_scaling(c), rope_theta=rope_theta(c)), rope)
    else:  # the default rotary initialisation
        inv_freq, attention_factor = 1.0 / (rope_theta(c) ** (torch.arange(0, rope, 2).float() / rope)), 1.0
    freqs = torch.arange(n).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * attention_factor, emb.sin() * attention_factor

    def interleave(t):  # apply_rotary_pos_emb_interleave: de-interleave the pairs, then rotate_half
        h, s_, d = t.shape
        t = t.view(h, s_, d // 2, 2).transpose(3, 2).reshape(h, s_, d)
        return t * cos + rotate_half(t) * sin

    q_rot, k_rot = interleave(q_rot), interleave(k_rot).expand(heads, n, rope)
    query, key = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
    scale = (nope + rope) ** -0.5
    ms = (rope_scaling(c) or {}).get("mscale_all_dim", 0)
    if ms:
        m = 0.1 * ms * math.log(rope_scaling(c)["factor"]) + 1.0
        scale = scale * m * m
    scores = query @ key.transpose(1, 2) * scale + torch.full((n, n), float("-inf")).triu(1)
    out = (torch.softmax(scores, dim=-1, dtype=torch.float32) @ value).transpose(0, 1).reshape(n, heads * vd)
    return out @ w[a + "o_proj.weight"].T


def moe(f, c, w, p, x):  # Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock
    logits = torch.matmul(x, w[p + f["router"]].T)  # float32 in every product mode, as the routers compute it
    k = c["num_experts_per_tok"]
    if f.get("sigmoid"):  # noaux_tc: the bias chooses, the unbiased scores weigh
        scores = logits.sigmoid()
        choice = scores + w[p + f.get("router_bias", "mlp.gate.e_score_correction_bias")]
        groups = c.get("n_group", 1)
        if groups > 1:
            g = choice.view(-1, groups, choice.shape[1] // groups).topk(2, dim=-1)[0].sum(dim=-1)
            keep = torch.zeros_like(g).scatter_(1, torch.topk(g, k=c["topk_group"], dim=-1)[1], 1)
            mask = keep.unsqueeze(-1).expand(-1, groups, choice.shape[1] // groups).reshape(choice.shape)
            choice = choice.masked_fill(~mask.bool(), 0.0)
        experts = torch.topk(choice, k=k, dim=-1)[1]
        weights = scores.gather(1, experts)
        if f.get("always_normalize") or c.get("norm_topk_prob"):
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
        h = act(f, c, xe @ w[q + gate + ".weight"].T, xe @ w[q + up + ".weight"].T)
        y.index_add_(0, rows, (h @ w[q + down + ".weight"].T) * weights[rows, slot, None])
    if f.get("shared"):
        shared = swiglu(w, p + f["shared"], x, f, c)
        if f.get("shared_gate"):
            shared = (x @ w[p + f["shared_gate"]].T).sigmoid() * shared
        y = y + shared
    return y, experts, weights


def act(f, c, gate, up):  # silu(gate) * up, or MiniMax-M3's swigluoai
    if f.get("activation") != "swigluoai":
        return torch.nn.functional.silu(gate) * up
    limit, alpha = c["swiglu_limit"], c["swiglu_alpha"]
    gate, up = gate.clamp(max=limit), up.clamp(-limit, limit)
    return (up + 1) * (gate * torch.sigmoid(gate * alpha))


def swiglu(w, prefix, x, f=None, c=None):
    h = act(f or {}, c, x @ w[prefix + "gate_proj.weight"].T, x @ w[prefix + "up_proj.weight"].T)
    return h @ w[prefix + "down_proj.weight"].T


def bf16_products(mode):
    """Every `a @ b` of the functions above in BF16 (the module's docstring)."""
    product = torch.Tensor.__matmul__
    if mode == "bf16-operands":
        torch.Tensor.__matmul__ = lambda a, b: product(a.bfloat16().float(), b.bfloat16().float())
    elif mode == "bf16":
        torch.Tensor.__matmul__ = lambda a, b: product(a.bfloat16(), b.bfloat16()).float()
    else:
        raise SystemExit(f"unknown product mode {mode}")


def main(family, model_dir, output):
    f = FAMILIES[family]
    c, w = load(model_dir)
    eps = c["rms_norm_eps"]
    out = {"ids": torch.tensor(sum(SAMPLES, []), dtype=torch.int32), "sample_lengths": torch.tensor([len(s) for s in SAMPLES], dtype=torch.int32)}
    x = torch.cat([w["model.embed_tokens.weight"][torch.tensor(s)] for s in SAMPLES])
    norm = rms_norm_zero_centred if f.get("next") or f.get("gemma") else rms_norm
    for layer in range(min(f.get("layers", 3), c["num_hidden_layers"])):
        p = f"model.layers.{layer}."
        normed = norm(x, w[p + "input_layernorm.weight"], eps)
        parts, start = [], 0
        for s in SAMPLES:
            mix = mla if f.get("mla") else lambda c_, w_, p_, x_: attention(f, c_, w_, p_, x_)
            if f.get("next"):
                types = c.get("layer_types") or ["full_attention" if (i + 1) % c["full_attention_interval"] == 0 else
                                                 "linear_attention" for i in range(c["num_hidden_layers"])]
                mix = gated_attention if types[layer] == "full_attention" else \
                    lambda c_, w_, p_, x_: gated_deltanet(c_, w_, p_, x_, split=f.get("split", False))
            parts.append(mix(c, w, p, normed[start : start + len(s)]))
            start += len(s)
        h = x + torch.cat(parts)
        mlp_input = norm(h, w[p + "post_attention_layernorm.weight"], eps)
        types = c.get("mlp_layer_types")  # GLM-5: the list decides; elsewhere first_k_dense_replace
        dense = types[layer] == "dense" if types else layer < c.get("first_k_dense_replace", 0)
        if isinstance(c.get("moe_layer_freq"), list):  # MiniMax-M3: 0 dense, 1 MoE
            dense = c["moe_layer_freq"][layer] == 0
        if dense:
            x = h + swiglu(w, p + "mlp.", mlp_input, f, c)
        else:
            y, experts, weights = moe(f, c, w, p, mlp_input)
            x = h + y
            out[f"layer{layer}.experts"] = experts.to(torch.int32)
            out[f"layer{layer}.weights"] = weights
        out[f"layer{layer}.residual"] = h
        out[f"layer{layer}.mlp_input"] = mlp_input
        out[f"layer{layer}.output"] = x
    # The model's output on the last computed layer's output, as if it were the last layer: an
    # independent check of the final norm and the head (lm_head, or the embeddings when tied).
    head = w.get("lm_head.weight")
    if head is None and c.get("tie_word_embeddings", False):
        head = w["model.embed_tokens.weight"]
    out["logits"] = norm(x, w["model.norm.weight"], eps) @ head.T
    header, blobs, offset = {}, [], 0
    for name in sorted(out):
        t = out[name].contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "I32" if t.dtype == torch.int32 else "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"generator": "make_reference.py, torch " + torch.__version__, "model": c["model_type"],
                              "products": PRODUCTS}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(output, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


PRODUCTS = "float32"

if __name__ == "__main__":
    if len(sys.argv) > 4:
        PRODUCTS = sys.argv[4]
        bf16_products(PRODUCTS)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
