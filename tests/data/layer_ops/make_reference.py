#!/usr/bin/python3
"""Reference outputs for tests/unit/layer_ops_test.cpp, written from the Hugging Face modeling
code of the families (RMSNorm of Llama/Qwen3 and Qwen3-Next's zero-centred one, rotate-half
rotary embeddings with partial rotation, DeepSeek's interleaved complex-pair rotation, eager
causal grouped-query attention, SwiGLU), in float32 with torch. Run once by hand with Debian's
python3-torch (/usr/bin/python3 make_reference.py); it writes layer_ops.safetensors beside it.
CI only reads the file."""
import json
import math
import struct

import torch

torch.manual_seed(1234)
out = {}


def rms_norm(x, w, eps, zero_centred):
    variance = x.pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    return h * (1.0 + w) if zero_centred else w * h


x = torch.randn(7, 64)
w = 1.0 + 0.1 * torch.randn(64)
w0 = 0.1 * torch.randn(64)
out["norm.x"], out["norm.w"], out["norm.w0"] = x, w, w0
out["norm.plain"] = rms_norm(x, w, 1e-6, False)
out["norm.zero_centred"] = rms_norm(x, w0, 1e-6, True)

lengths = [7, 5]
tokens = sum(lengths)
positions = torch.cat([torch.arange(n) for n in lengths]).float()


def inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope_half(x, base, rotary_dim):  # x [tokens, heads, head_dim]
    freqs = positions[:, None] * inv_freq(base, rotary_dim)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    return torch.cat((rot * cos + rotate_half(rot) * sin, rest), dim=-1)


def rope_interleaved(x, base):  # DeepSeek-V3 inference/model.py apply_rotary_emb
    dim = x.shape[-1]
    freqs = torch.outer(positions, inv_freq(base, dim))
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)[:, None, :]
    xc = torch.view_as_complex(x.float().view(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2)


q = torch.randn(tokens, 4, 32)
out["rope.x"] = q
out["rope.half_full"] = rope_half(q, 10000.0, 32)
out["rope.half_partial"] = rope_half(q, 1e6, 16)
out["rope.interleaved"] = rope_interleaved(q, 10000.0)

k = torch.randn(tokens, 2, 32)
v = torch.randn(tokens, 2, 24)
out["attn.q"], out["attn.k"], out["attn.v"] = q, k, v
scale = 32 ** -0.5
parts = []
start = 0
for n in lengths:  # eager attention per sample: repeat_kv, causal mask, float32 softmax
    qs = q[start : start + n].transpose(0, 1)  # [heads, n, d]
    ks = k[start : start + n].transpose(0, 1).repeat_interleave(2, dim=0)
    vs = v[start : start + n].transpose(0, 1).repeat_interleave(2, dim=0)
    scores = torch.matmul(qs, ks.transpose(1, 2)) * scale
    mask = torch.full((n, n), float("-inf")).triu(1)
    probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32)
    parts.append(torch.matmul(probs, vs).transpose(0, 1))
    start += n
out["attn.out"] = torch.cat(parts, dim=0)

g = torch.randn(9, 16)
u = torch.randn(9, 16)
out["swiglu.gate"], out["swiglu.up"] = g, u
out["swiglu.out"] = torch.nn.functional.silu(g) * u

header, blobs, offset = {}, [], 0
for name in sorted(out):
    data = out[name].contiguous().numpy().astype("<f4").tobytes()
    header[name] = {"dtype": "F32", "shape": list(out[name].shape), "data_offsets": [offset, offset + len(data)]}
    blobs.append(data)
    offset += len(data)
header["__metadata__"] = {"generator": "make_reference.py, torch " + torch.__version__}
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * ((8 - len(text) % 8) % 8)
with open("layer_ops.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
print("wrote", len(out), "tensors")
