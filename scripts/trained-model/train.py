#!/usr/bin/python3
"""Trains a small Mixtral (Hugging Face's MixtralForCausalLM, exactly) on the tokenized corpus, on the CPU.

    /usr/bin/python3 train.py --data DIR --out MODEL_DIR [--minutes 40]

DIR holds train.u16 / heldout.u16 (tokenize_corpus.mjs) and heldout.txt (prepare_corpus.py). The
model is written as a Hugging Face checkpoint: model.safetensors (BF16), config.json, the Llama-2 /
Mistral tokenizer files (from tests/data/tokenizers/llama2), heldout.jsonl (the held-out paragraphs,
`moequant eval --dataset`'s format) and training.json (corpus, steps, losses, the validation
perplexity of the BF16 weights as written). Debian's python3-torch only (scripts/install-deps.sh
--train); no transformers: the forward below is MixtralForCausalLM's, written out.
"""
import argparse
import gzip
import json
import math
import pathlib
import shutil
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F

repo = pathlib.Path(__file__).resolve().parents[2]


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def rms_norm(x, weight, eps):  # MixtralRMSNorm: in float32, the weight applied after casting back
    dtype = x.dtype
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Mixtral(torch.nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        p = torch.nn.Parameter
        H, hd = c.hidden_size, c.head_dim
        self.embed = p(torch.randn(c.vocab_size, H) * 0.02)
        self.layers = torch.nn.ModuleList()
        for _ in range(c.num_hidden_layers):
            layer = torch.nn.Module()
            layer.input_norm = p(torch.ones(H))
            layer.q = p(torch.randn(c.num_attention_heads * hd, H) * 0.02)
            layer.k = p(torch.randn(c.num_key_value_heads * hd, H) * 0.02)
            layer.v = p(torch.randn(c.num_key_value_heads * hd, H) * 0.02)
            layer.o = p(torch.randn(H, c.num_attention_heads * hd) * 0.02 / math.sqrt(2 * c.num_hidden_layers))
            layer.post_norm = p(torch.ones(H))
            layer.gate = p(torch.randn(c.num_local_experts, H) * 0.02)
            E, I = c.num_local_experts, c.intermediate_size
            layer.w1 = p(torch.randn(E, I, H) * 0.02)
            layer.w3 = p(torch.randn(E, I, H) * 0.02)
            layer.w2 = p(torch.randn(E, H, I) * 0.02 / math.sqrt(2 * c.num_hidden_layers))
            self.layers.append(layer)
        self.norm = p(torch.ones(H))
        inv_freq = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def attention(self, layer, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q = F.linear(x, layer.q).view(B, T, c.num_attention_heads, c.head_dim).transpose(1, 2)
        k = F.linear(x, layer.k).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        v = F.linear(x, layer.v).view(B, T, c.num_key_value_heads, c.head_dim).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        groups = c.num_attention_heads // c.num_key_value_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = (q @ k.transpose(2, 3)) / math.sqrt(c.head_dim)
        mask = torch.full((T, T), float("-inf")).triu(1)
        probs = torch.softmax((scores + mask).float(), dim=-1).to(q.dtype)
        out = (probs @ v).transpose(1, 2).reshape(B, T, -1)
        return F.linear(out, layer.o)

    def moe(self, layer, x):  # MixtralSparseMoeBlock: softmax over all experts, top-k, renormalized
        c = self.c
        B, T, H = x.shape
        flat = x.reshape(-1, H)
        logits = F.linear(flat, layer.gate)
        weights = torch.softmax(logits, dim=1, dtype=torch.float)
        top, chosen = torch.topk(weights, c.num_experts_per_tok, dim=-1)
        top = (top / top.sum(dim=-1, keepdim=True)).to(flat.dtype)
        out = torch.zeros_like(flat)
        for e in range(c.num_local_experts):
            rows, slot = torch.where(chosen == e)
            if rows.numel() == 0:
                continue
            h = flat[rows]
            y = F.linear(F.silu(F.linear(h, layer.w1[e])) * F.linear(h, layer.w3[e]), layer.w2[e])
            out.index_add_(0, rows, y * top[rows, slot, None])
        # Switch-style load balancing (MixtralForCausalLM's load_balancing_loss_func, one layer).
        mask = F.one_hot(chosen, c.num_local_experts).float().mean(dim=(0, 1))
        balance = (mask * weights.mean(dim=0)).sum() * c.num_local_experts
        return out.view(B, T, H), balance

    def forward(self, ids, positions=None):
        """Logits of every position, or of `positions` only (the training loss's sample of them)."""
        c = self.c
        T = ids.shape[1]
        x = F.embedding(ids, self.embed)
        freqs = torch.outer(torch.arange(T).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, None].to(x.dtype), emb.sin()[None, None].to(x.dtype)
        balance = 0.0
        for layer in self.layers:
            x = x + self.attention(layer, rms_norm(x, layer.input_norm, c.rms_norm_eps), cos, sin)
            y, b = self.moe(layer, rms_norm(x, layer.post_norm, c.rms_norm_eps))
            x = x + y
            balance = balance + b
        x = rms_norm(x, self.norm, c.rms_norm_eps)
        if positions is not None:
            x = x[:, positions]
        return F.linear(x, self.embed), balance / c.num_hidden_layers  # tie_word_embeddings

    def state(self):
        """The weights under MixtralForCausalLM's names ([out, in] each)."""
        out = {"model.embed_tokens.weight": self.embed, "model.norm.weight": self.norm}
        for i, layer in enumerate(self.layers):
            pre = f"model.layers.{i}."
            out.update({pre + "input_layernorm.weight": layer.input_norm, pre + "post_attention_layernorm.weight": layer.post_norm,
                        pre + "self_attn.q_proj.weight": layer.q, pre + "self_attn.k_proj.weight": layer.k,
                        pre + "self_attn.v_proj.weight": layer.v, pre + "self_attn.o_proj.weight": layer.o,
                        pre + "block_sparse_moe.gate.weight": layer.gate})
            for e in range(self.c.num_local_experts):
                for name, w in (("w1", layer.w1), ("w2", layer.w2), ("w3", layer.w3)):
                    out[f"{pre}block_sparse_moe.experts.{e}.{name}.weight"] = w[e]
        return out


def read_safetensors(path: pathlib.Path) -> dict:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        words = np.frombuffer(raw[8 + n + begin: 8 + n + end], dtype=np.int16).copy()
        out[name] = torch.from_numpy(words).view(torch.bfloat16).float().reshape(info["shape"])
    return out


def write_safetensors(path: pathlib.Path, tensors: dict):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


def rows(ids: np.ndarray, count: int, length: int):
    """The first `count` paragraphs of a token stream (each BOS + its ids), without the BOS and cut
    to `length` tokens: the rows `moequant eval --dataset heldout.jsonl --max_sequence_length length`
    scores (it tokenizes a dataset row without special tokens, as llm-compressor does)."""
    starts = np.flatnonzero(ids == 1).tolist() + [len(ids)]
    out = [ids[a + 1:b][:length].astype(np.int64) for a, b in zip(starts, starts[1:])]
    return [torch.from_numpy(r) for r in out if len(r) >= 2][:count]


@torch.no_grad()
def perplexity(model, held):
    """exp of the mean negative log-likelihood of every next token of every row, as eval counts it."""
    total, count = 0.0, 0
    for r in held:
        logits, _ = model(r[None, :-1])
        total += F.cross_entropy(logits.float()[0], r[1:], reduction="sum").item()
        count += len(r) - 1
    return math.exp(total / count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=40)
    ap.add_argument("--min-steps", type=int, default=100)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--heldout-rows", type=int, default=256)
    ap.add_argument("--loss-fraction", type=int, default=4, help="the loss of one position in this many")
    ap.add_argument("--evaluate", action="store_true",
                    help="only score the written model (OUT/model.safetensors) on the first --heldout-rows rows and record it in OUT/training.json")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data, out = pathlib.Path(args.data), pathlib.Path(args.out)
    c = Config(vocab_size=32000, hidden_size=256, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               intermediate_size=256, num_local_experts=8, num_experts_per_tok=2, rms_norm_eps=1e-5, rope_theta=10000.0,
               router_aux_loss_coef=0.02)
    if args.evaluate:
        out = pathlib.Path(args.out)
        model = Mixtral(c)
        with torch.no_grad():
            weights = read_safetensors(out / "model.safetensors")
            for name, w in model.state().items():
                w.copy_(weights[name])
        held = rows(np.fromfile(data / "heldout.u16", dtype=np.uint16), args.heldout_rows, args.seq)
        ppl = perplexity(model, held)
        report = json.loads((out / "training.json").read_text())
        report["validation"].setdefault("subsets", {})[str(len(held))] = {"rows": len(held), "perplexity_bf16": ppl}
        (out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
        print(f"validation perplexity of the first {len(held)} rows (BF16 weights) {ppl:.6f}")
        return
    train = np.fromfile(data / "train.u16", dtype=np.uint16)
    held = rows(np.fromfile(data / "heldout.u16", dtype=np.uint16), args.heldout_rows, args.seq)
    model = Mixtral(c)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(args.seed)

    def batch():
        starts = rng.integers(0, len(train) - args.seq - 1, size=args.batch)
        return torch.stack([torch.from_numpy(train[s: s + args.seq + 1].astype(np.int64)) for s in starts])

    def step(lr):
        for g in opt.param_groups:
            g["lr"] = lr
        b = batch()
        # The loss of a random quarter of the positions (the same for the whole batch): an unbiased
        # estimate of the full loss whose 32000-way softmax costs a quarter (it dominated a step).
        positions = torch.from_numpy(np.sort(rng.choice(args.seq, size=args.seq // args.loss_fraction, replace=False)))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits, balance = model(b[:, :-1], positions)
        loss = F.cross_entropy(logits.float().reshape(-1, c.vocab_size), b[:, 1:][:, positions].reshape(-1))
        (loss + c.router_aux_loss_coef * balance).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    # The schedule's length from the speed of the first steps: warm-up, then cosine to a tenth.
    start = time.time()
    probe = [step(args.lr * (i + 1) / 100) for i in range(5)]
    per_step = (time.time() - start) / 5
    steps = max(args.min_steps, int(args.minutes * 60 / per_step))
    warmup = min(100, steps // 10)
    log = [{"step": i + 1, "loss": l} for i, l in enumerate(probe)]
    for i in range(5, steps):
        lr = args.lr * (i + 1) / warmup if i < warmup else args.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (i - warmup) / (steps - warmup))))
        l = step(lr)
        if (i + 1) % 50 == 0 or i + 1 == steps:
            log.append({"step": i + 1, "loss": l, "seconds": round(time.time() - start, 1)})
            print(f"step {i + 1}/{steps} loss {l:.3f} {time.time() - start:.0f}s", flush=True)

    # Written in BF16: the validation perplexity is that of the weights as written.
    with torch.no_grad():
        for w in model.parameters():
            w.copy_(w.to(torch.bfloat16).float())
    val_ppl = perplexity(model, held)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", model.state())
    config = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
              "intermediate_size": c.intermediate_size, "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
              "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim, "hidden_act": "silu", "max_position_embeddings": 4096,
              "rms_norm_eps": c.rms_norm_eps, "rope_theta": c.rope_theta, "num_local_experts": c.num_local_experts,
              "num_experts_per_tok": c.num_experts_per_tok, "router_aux_loss_coef": c.router_aux_loss_coef, "output_router_logits": False,
              "sliding_window": None, "tie_word_embeddings": True, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
              "torch_dtype": "bfloat16", "use_cache": True}
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tokenizers = repo / "tests/data/tokenizers/llama2"
    (out / "tokenizer.json").write_bytes(gzip.decompress((tokenizers / "tokenizer.json.gz").read_bytes()))
    shutil.copy(tokenizers / "tokenizer_config.json", out / "tokenizer_config.json")
    paragraphs = [p for p in (data / "heldout.txt").read_text(encoding="utf-8").split("\n\n") if p.strip()][: len(held)]
    (out / "heldout.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in paragraphs), encoding="utf-8")
    report = {"corpus": {"train_tokens": int(len(train)), "heldout_rows": len(held), "heldout_scored_tokens": int(sum(len(h) - 1 for h in held))},
              "steps": steps, "batch": args.batch, "sequence": args.seq, "tokens_seen": steps * args.batch * args.seq,
              "loss_positions": f"1 in {args.loss_fraction}", "lr": args.lr, "seed": args.seed, "seconds": round(time.time() - start), "torch": torch.__version__,
              "validation": {"rows": len(held), "max_tokens_per_row": args.seq, "perplexity_bf16": val_ppl,
                             "moequant_eval": f"moequant eval --model_id DIR --dataset DIR/heldout.jsonl --num_calibration_samples {len(held)} --max_sequence_length {args.seq}"},
              "log": log}
    (out / "training.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"validation perplexity (BF16 weights) {val_ppl:.3f}")


if __name__ == "__main__":
    main()
