#!/usr/bin/python3
"""The torch side of bench/compare_with_torch.sh: the same work as moequant's benches, timed on
this machine in the same run, written as JSON for the C++ benches to print ratios against.

1. GPTQ of one 2048 x 7168 weight (out x in) with 4096 calibration tokens in two samples of
   2048, W4A16 group 128, actorder static, dampening 0.1, as llm-compressor computes it
   (shared/spec/gptq-compressed-tensors.md §4.1-4.2): the Hessian (per sample, A = sqrt(2) x^T
   in float32, H += A A^T, then H / samples) and quantize_weight (dead columns, dampening, the
   Cholesky chain and the column loop), with tests/data/gptq_groups/make_reference.py's
   implementation of §4.2, which reproduces every golden byte.
2. One DeepSeek-V3-shaped decoder layer (hidden 7168, MLA with 128 heads, q_lora 1536, kv_lora
   512, YaRN; top-8 sigmoid routing over E experts of 2048 x 7168, one shared expert) on T
   tokens, with tests/data/decoder_forward/make_reference.py's mla() and moe() (the Hugging Face
   formulas): in float32, and with every matrix product in torch's bfloat16 (operands and
   results BF16; the rest float32), the attention half and the MLP half timed apart.

Usage: /usr/bin/python3 bench/torch_reference.py OUT.json [--threads N] [--tokens T] [--experts E]
"""
import argparse
import importlib.util
import json
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load_script(path, name):
    """A test-data generator of this repository, imported (its main() does not run)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "..", path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gptq_reference = load_script("tests/data/gptq_groups/make_reference.py", "gptq_reference")
forward_reference = load_script("tests/data/decoder_forward/make_reference.py", "forward_reference")

H, HEADS, Q_LORA, KV_LORA, NOPE, ROPE, V_HEAD, INTER, TOP_K = 7168, 128, 1536, 512, 128, 64, 128, 2048, 8


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def gptq(rows=2048, cols=7168, samples=2, tokens_per_sample=2048):
    torch.manual_seed(0)
    w = (torch.randn(rows, cols) * 0.02).to(torch.bfloat16)
    xs = [torch.randn(tokens_per_sample, cols).to(torch.bfloat16) for _ in range(samples)]

    def hessian():  # llm-compressor's accumulate_hessian, then H / num_samples
        h = torch.zeros(cols, cols)
        for x in xs:
            a = math.sqrt(2) * x.float().t()
            h += a.matmul(a.t())
        return h / samples

    t_hessian, h = seconds(hessian)
    s = gptq_reference.scales_of(w, 4, 128)
    t_quantize, _ = seconds(lambda: gptq_reference.gptq_weight(w, h, s, 4, 128, "static", 0.1))
    return {"hessian_s": t_hessian, "quantize_s": t_quantize, "rows": rows, "cols": cols, "tokens": samples * tokens_per_sample}


def layer_weights(experts):
    torch.manual_seed(1)
    p = "model.layers.0."
    shapes = {
        "self_attn.q_a_proj.weight": (Q_LORA, H), "self_attn.q_a_layernorm.weight": (Q_LORA,),
        "self_attn.q_b_proj.weight": (HEADS * (NOPE + ROPE), Q_LORA),
        "self_attn.kv_a_proj_with_mqa.weight": (KV_LORA + ROPE, H), "self_attn.kv_a_layernorm.weight": (KV_LORA,),
        "self_attn.kv_b_proj.weight": (HEADS * (NOPE + V_HEAD), KV_LORA), "self_attn.o_proj.weight": (H, HEADS * V_HEAD),
        "mlp.gate.weight": (experts, H), "input_layernorm.weight": (H,), "post_attention_layernorm.weight": (H,),
    }
    for e in range(experts):
        shapes.update({f"mlp.experts.{e}.gate_proj.weight": (INTER, H), f"mlp.experts.{e}.up_proj.weight": (INTER, H),
                       f"mlp.experts.{e}.down_proj.weight": (H, INTER)})
    shapes.update({"mlp.shared_experts.gate_proj.weight": (INTER, H), "mlp.shared_experts.up_proj.weight": (INTER, H),
                   "mlp.shared_experts.down_proj.weight": (H, INTER)})
    w = {}
    for name, shape in shapes.items():
        w[p + name] = torch.ones(shape) if len(shape) == 1 else (torch.randn(shape) / math.sqrt(shape[1])).bfloat16().float()
    w[p + "mlp.gate.e_score_correction_bias"] = torch.zeros(experts)
    return w


def forward(tokens, experts):
    c = {"num_attention_heads": HEADS, "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": V_HEAD,
         "kv_lora_rank": KV_LORA, "rms_norm_eps": 1e-6, "rope_theta": 10000,
         "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0,
                          "original_max_position_embeddings": 4096},
         "num_experts_per_tok": TOP_K, "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
         "n_routed_experts": experts}
    f = forward_reference.FAMILIES["deepseek_v3"]
    w = layer_weights(experts)
    p = "model.layers.0."
    x = torch.randn(tokens, H).bfloat16().float()
    product = torch.Tensor.__matmul__
    out = {}
    for mode in ("f32", "bf16"):
        if mode == "bf16":
            torch.Tensor.__matmul__ = lambda a, b: product(a.bfloat16(), b.bfloat16()).float()
        normed = forward_reference.rms_norm(x, w[p + "input_layernorm.weight"], 1e-6)
        t_attention, attended = seconds(lambda: forward_reference.mla(c, w, p, normed))
        h = x + attended
        mlp_input = forward_reference.rms_norm(h, w[p + "post_attention_layernorm.weight"], 1e-6)
        t_mlp, _ = seconds(lambda: forward_reference.moe(f, c, w, p, mlp_input))
        out[mode] = {"attention_s": t_attention, "mlp_s": t_mlp}
        torch.Tensor.__matmul__ = product
    out["tokens"], out["experts"] = tokens, experts
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--experts", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    result = {"torch": torch.__version__, "threads": args.threads, "gptq": gptq(), "forward": forward(args.tokens, args.experts)}
    with open(args.output, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
