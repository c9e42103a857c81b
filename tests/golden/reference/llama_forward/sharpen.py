#!/usr/bin/python3
"""Sharpen the attention of a synthesized BF16 checkpoint, in place: multiply what q and k are made
of by S, so every attention score (q . k) grows by S^2 and the softmax is far from uniform.

    /usr/bin/python3 sharpen.py MODEL_DIR FAMILY S [LAYERS]     (LAYERS e.g. "0" or "1,2": only those)

`moequant synth` draws iid weights of std 0.02 and RMSNorm gains near 1, so q . k / sqrt(d) is ~0.1
and attention is close to uniform: a wrong rotary, head order or q/k layout changes the logits only
a little. Rewriting the checkpoint itself (both the converter and the reference read the new values)
makes the forward comparison depend strongly on positions and keys. Per family (FAMILIES of
tests/data/decoder_forward/make_reference.py):
  q/k RMSNorm (Qwen3, Qwen3-Next/3.5 full attention, MiniMax-M2/M3): the norm's gain x S
      (zero-centred norms, stored as w with gain 1 + w: w' = S (1 + w) - 1)
  MLA (DeepSeek): q_b_proj and kv_b_proj x S (the no-rope and value parts; the rope part of q)
  otherwise (GLM-4.5 without use_qk_norm, Mixtral): q_proj, k_proj weights and biases x S
Only BF16 tensors are rewritten (each value rounded to nearest even BF16); the file's layout is kept.
Qwen3-Next's linear-attention layers l2-normalize q and k: nothing there to sharpen.
"""
import json
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "data", "decoder_forward"))
import make_reference as ref  # noqa: E402


def to_bf16(x):
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def rule(family, config):
    f = ref.FAMILIES[family]
    c = config.get("text_config", config)
    if f.get("mla"):
        return ("self_attn.q_b_proj.weight", "self_attn.kv_b_proj.weight"), False
    if f.get("next") or f.get("qk_norm") is True or f.get("qk_norm_whole") or (f.get("qk_norm") == "use_qk_norm" and c.get("use_qk_norm")):
        return ("self_attn.q_norm.weight", "self_attn.k_norm.weight"), bool(f.get("next") or f.get("gemma"))
    return ("self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.bias"), False


def main(model_dir, family, s, layers=None):
    config = json.load(open(os.path.join(model_dir, "config.json")))
    suffixes, zero_centred = rule(family, config)
    if layers is not None:
        suffixes = tuple(f"layers.{L}.{x}" for L in layers for x in suffixes)
    changed = 0
    for name in sorted(os.listdir(model_dir)):
        if not name.endswith(".safetensors"):
            continue
        path = os.path.join(model_dir, name)
        with open(path, "r+b") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
            for t, info in header.items():
                if t == "__metadata__" or not t.endswith(suffixes) or ".mtp." in t or t.startswith("mtp."):
                    continue
                if info["dtype"] != "BF16":
                    raise SystemExit(f"{t}: {info['dtype']}, sharpen.py rewrites BF16 only")
                b, e = info["data_offsets"]
                fh.seek(8 + n + b)
                v = (np.frombuffer(fh.read(e - b), dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
                v = s * (1.0 + v) - 1.0 if zero_centred else s * v
                fh.seek(8 + n + b)
                fh.write(to_bf16(v).tobytes())
                changed += 1
    if not changed:
        raise SystemExit(f"{model_dir}: no tensor ending in {suffixes}")
    print(f"sharpened {changed} tensors ({', '.join(suffixes)}) x {s}{' (zero-centred gains)' if zero_centred else ''}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]),
         [int(x) for x in sys.argv[4].split(",")] if len(sys.argv) > 4 else None)
