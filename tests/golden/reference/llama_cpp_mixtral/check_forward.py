"""An independent numpy forward of a Hugging Face Mixtral checkpoint (BF16 safetensors; rotate_half
RoPE on q/k rows as stored, top-k renormalized softmax router) on the tokens llama-perplexity
evaluated, against the log-probs it saved with --kl-divergence-base: the same chunks (BOS first),
the same scored positions (the second half of each). Also the forward llama.cpp would compute on
q/k rows that were not permuted (its interleaved pairs on the Hugging Face order): the GGUF's
log-probs must match the first and not the second.
usage: python3 check_forward.py CHECKPOINT_DIR LOGITS_FILE      (numpy; BOS id 1)
"""
import json, struct, glob, sys, numpy as np
src, klfile = sys.argv[1], sys.argv[2]
def load(path):
    b = open(path, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k == '__metadata__': continue
        s, e = v['data_offsets']; raw = np.frombuffer(b[8 + n + s:8 + n + e], dtype=np.uint16)
        out[k] = (raw.astype(np.uint32) << 16).view(np.float32).reshape(v['shape']).astype(np.float64)
    return out
W = {}
for f in glob.glob(src + '/*.safetensors'): W.update(load(f))
cfg = json.load(open(src + '/config.json'))
H, KV, D = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['hidden_size'] // cfg['num_attention_heads']
E, topk, eps, theta = cfg['num_local_experts'], cfg['num_experts_per_tok'], cfg['rms_norm_eps'], cfg['rope_theta']
b = open(klfile, 'rb').read()
assert b[:8] == b'_logits_'
n_ctx, n_vocab, n_chunk = struct.unpack('<iii', b[8:20])
tokens = np.frombuffer(b[20:20 + 4 * n_ctx * n_chunk], dtype=np.int32).reshape(n_chunk, n_ctx)
at = 20 + 4 * n_ctx * n_chunk; nv = 2 * ((n_vocab + 1) // 2) + 4; first = n_ctx // 2
def rms(x, w): return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
def rope(x, pos, interleaved):  # x [T, heads, D]
    inv = 1.0 / theta ** (np.arange(0, D, 2) / D); f = pos[:, None] * inv[None, :]
    c, s = np.cos(f)[:, None, :], np.sin(f)[:, None, :]
    if interleaved:  # llama.cpp's pairs (2i, 2i+1): what it computes on rows as stored
        a, b_ = x[..., 0::2], x[..., 1::2]; out = np.empty_like(x)
        out[..., 0::2] = a * c - b_ * s; out[..., 1::2] = a * s + b_ * c; return out
    a, b_ = x[..., :D // 2], x[..., D // 2:]  # Hugging Face's rotate_half
    return np.concatenate([a * c - b_ * s, b_ * c + a * s], -1)
def forward(ids, interleaved):
    T = len(ids); pos = np.arange(T, dtype=np.float64); x = W['model.embed_tokens.weight'][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for L in range(cfg['num_hidden_layers']):
        p = f'model.layers.{L}.'
        h = rms(x, W[p + 'input_layernorm.weight'])
        q = rope((h @ W[p + 'self_attn.q_proj.weight'].T).reshape(T, H, D), pos, interleaved)
        k = rope((h @ W[p + 'self_attn.k_proj.weight'].T).reshape(T, KV, D), pos, interleaved)
        v = (h @ W[p + 'self_attn.v_proj.weight'].T).reshape(T, KV, D)
        k, v = np.repeat(k, H // KV, 1), np.repeat(v, H // KV, 1)
        a = np.einsum('thd,shd->hts', q, k) / np.sqrt(D) + mask
        a = np.exp(a - a.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
        o = np.einsum('hts,shd->thd', a, v).reshape(T, H * D)
        x = x + o @ W[p + 'self_attn.o_proj.weight'].T
        h = rms(x, W[p + 'post_attention_layernorm.weight'])
        r = h @ W[p + 'block_sparse_moe.gate.weight'].T
        r = np.exp(r - r.max(-1, keepdims=True)); r /= r.sum(-1, keepdims=True)
        out = np.zeros_like(x)
        for t in range(T):
            sel = np.argsort(-r[t])[:topk]; wts = r[t, sel] / r[t, sel].sum()
            for e, w in zip(sel, wts):
                ep = p + f'block_sparse_moe.experts.{e}.'
                g = h[t] @ W[ep + 'w1.weight'].T; u = h[t] @ W[ep + 'w3.weight'].T
                out[t] += w * ((g / (1 + np.exp(-g)) * u) @ W[ep + 'w2.weight'].T)
        x = x + out
    logits = rms(x, W['model.norm.weight']) @ W['lm_head.weight'].T
    return logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
bos = 1
res = {False: [], True: []}; got = []; nll = {False: 0.0, True: 0.0}; count = 0
for c in range(n_chunk):
    ids = tokens[c].copy(); ids[0] = bos
    for i in range(n_ctx - 1 - first):
        d = np.frombuffer(b[at:at + 8], dtype=np.float32); q = np.frombuffer(b[at + 8:at + 2 * nv], dtype=np.uint16)[:n_vocab]
        got.append(np.where(q > 0, d[1] + d[0] * q, np.nan)); at += 2 * nv
    for mode in (False, True):
        lp = forward(ids, mode)[first:n_ctx - 1]
        res[mode].append(lp)
        nll[mode] -= lp[np.arange(len(lp)), tokens[c][first + 1:]].sum()
    count += n_ctx - 1 - first
got = np.array(got)  # NaN where llama.cpp stored "below its 16-nat window"
for mode, name in ((False, 'HF rotate_half (correct)'), (True, 'interleaved on unpermuted rows (no permutation)')):
    ref = np.concatenate(res[mode]); ok = ~np.isnan(got)
    p = np.exp(ref); kl = (p * (ref - np.where(ok, got, ref))).sum(-1)
    print(f'{name}: max |log-prob diff| {np.nanmax(np.abs(got - ref)):.4f}, mean KL {kl.mean():.2e}, PPL {np.exp(nll[mode] / count):.4f}')
print(f'{count} tokens in {n_chunk} chunks of {n_ctx}; compare the PPL with llama-perplexity\'s Final estimate')
