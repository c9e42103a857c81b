// Building blocks of a decoder layer's forward pass for calibration, in float32 on
// row-major [tokens, width] activations, following the Hugging Face modeling code the families
// run in: RMSNorm (plain or zero-centred weight), rotary embeddings (rotate-half or interleaved
// pairs, on all or the first dims of each head), causal grouped-query attention over several
// independent samples, SwiGLU. Family adapters compose them; the reference outputs they are
// tested against come from torch (tests/data/layer_ops).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/gated_activation.hpp>
#include <moequant/router.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace moequant {

// y = x / sqrt(mean(x^2) + eps) * w  (or * (1 + w) with zero_centred, Qwen3-Next), per row of
// `dim` values; `x` and `y` may be the same buffer.
MOEQUANT_API void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const float* weight, float eps,
                           bool zero_centred, float* y);

enum class RopeStyle : std::uint8_t {
    rotate_half,  // (x1, x2) halves of the rotated dims: [x1 cos - x2 sin, x2 cos + x1 sin] (Llama, Qwen, GLM)
    interleaved,  // pairs (x[2i], x[2i+1]) rotated (DeepSeek's MLA reference, rope_interleave)
};

// inv_freq[i] = 1 / base^(2i / rotary_dim), i < rotary_dim / 2, as float32.
MOEQUANT_API std::vector<float> rope_inverse_frequencies(double base, std::int64_t rotary_dim);

// YaRN's inverse frequencies (the Hugging Face rope "yarn" initialisation): frequencies below
// the beta_fast..beta_slow correction range keep their extrapolated value, those above it are
// divided by `factor`, with a linear ramp between; `original_max_positions` is
// original_max_position_embeddings; `truncate` floors/ceils the range (rope_scaling.truncate).
MOEQUANT_API std::vector<float> yarn_inverse_frequencies(double base, std::int64_t rotary_dim, double factor,
                                                         double original_max_positions, double beta_fast, double beta_slow,
                                                         bool truncate = true);
// YaRN's attention magnitude: 0.1 * mscale * ln(scale) + 1 for scale > 1, else 1.
MOEQUANT_API double yarn_mscale(double scale, double mscale);

// Rotates the first `rotary_dim` of every head's `head_dim` values in x [tokens, heads, head_dim]
// by angle position * inv_freq; positions restart at 0 with each sample of `sample_lengths`.
MOEQUANT_API void apply_rope(float* x, std::int64_t heads, std::int64_t head_dim, std::int64_t rotary_dim,
                             std::span<const std::int64_t> sample_lengths, std::span<const float> inv_freq,
                             RopeStyle style);

// Causal softmax attention per sample: q [tokens, q_heads, qk_dim], k [tokens, kv_heads, qk_dim],
// v [tokens, kv_heads, v_dim] -> out [tokens, q_heads, v_dim]; query head h reads kv head
// h / (q_heads / kv_heads). Scores scaled by `scale`, softmax in float32, no token sees another
// sample. Parallel over samples and heads.
MOEQUANT_API void causal_attention(const float* q, const float* k, const float* v, std::int64_t q_heads,
                                   std::int64_t kv_heads, std::int64_t qk_dim, std::int64_t v_dim,
                                   std::span<const std::int64_t> sample_lengths, float scale, float* out);

// gate <- silu(gate) * up, element-wise over n values.
MOEQUANT_API void swiglu(float* gate, const float* up, std::int64_t n);


// A weight as float32: plain floats as they are; an encoded weight (FP8, INT4, ...) decoded
// to BF16 by its encoding and widened — the values every other consumer of the checkpoint
// sees (source_encoding.hpp). Error(input) naming the weight when it is missing or of another
// shape than `shape` (when given).
MOEQUANT_API std::vector<float> load_f32(const Checkpoint& checkpoint, const std::string& name, const Shape& shape = {});

// y [rows, out] = x [rows, in] W^T (+ bias), W row-major [out, in].
MOEQUANT_API std::vector<float> linear(const std::vector<float>& x, std::int64_t rows, const std::vector<float>& weight,
                                       std::int64_t out, std::int64_t in, const std::vector<float>* bias = nullptr);

// linear() into caller memory: y [rows, out] = x [rows, in] W^T, W row-major [out, in], no
// bias. Every value of y is written, so y may be unwritten memory: a Tensor::uninitialized's,
// whose blocks of 16 MiB or more come in huge pages, where a fresh std::vector would be
// zero-filled and faulted in 4 KiB pages on every call (hundreds of MB a batch for MLA's
// projections).
MOEQUANT_API void linear_into(const float* x, std::int64_t rows, const float* weight, std::int64_t out, std::int64_t in,
                              float* y);

// down(act(gate x, up x)) for x [rows, hidden]; the weights F32 [inter, hidden] and [hidden,
// inter]; act is silu(g) * u unless `activation` says otherwise.
MOEQUANT_API std::vector<float> swiglu_mlp(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden,
                                           const std::vector<float>& gate, const std::vector<float>& up,
                                           const std::vector<float>& down, std::int64_t intermediate,
                                           const GatedActivation& activation = {});

// An expert's gate, up and down as the checkpoint or the caller holds them ([inter, hidden],
// [inter, hidden], [hidden, inter]): BF16, F32, or another float dtype decode_to_f32 reads.
// BF16 matrices are multiplied in place by BF16 products and widened block by block for FP32
// ones (the blocks of rows the product is split into): no float32 copy is kept.
struct ExpertWeights {
    Tensor gate, up, down;
    std::int64_t intermediate = 0;
};

// swiglu_mlp with an expert's matrices as ExpertWeights.
MOEQUANT_API std::vector<float> swiglu_mlp(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden,
                                           const ExpertWeights& weights, const GatedActivation& activation = {});

// A MoE block's routed part: logits = x W_router^T (F32), route_tokens (spec), and for each
// token the weighted sum of its experts' gated-MLP outputs (`activation`), added into y [rows, hidden].
// `expert(e)` gives expert e's gate, up, down. Experts run in parallel. Returns the routing.
MOEQUANT_API Routing add_routed_experts(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden,
                                        const RouterSpec& spec, const std::vector<float>& router_weight,
                                        const std::vector<float>& router_bias, std::int64_t experts,
                                        const std::function<ExpertWeights(std::int64_t)>& expert, std::vector<float>& y,
                                        const GatedActivation& activation = {});

// The same with each expert as float32 vectors (F32, [inter, hidden], [inter, hidden], [hidden, inter]).
struct ExpertWeightsF32 {
    std::vector<float> gate, up, down;
    std::int64_t intermediate = 0;
};
MOEQUANT_API Routing add_routed_experts(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden,
                                        const RouterSpec& spec, const std::vector<float>& router_weight,
                                        const std::vector<float>& router_bias, std::int64_t experts,
                                        const std::function<ExpertWeightsF32(std::int64_t)>& expert, std::vector<float>& y,
                                        const GatedActivation& activation = {});

}  // namespace moequant
