#include <moequant/error.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>

namespace moequant {

void rms_norm(const float* x, std::int64_t rows, std::int64_t dim, const float* weight, float eps, bool zero_centred,
              float* y) {
    parallel_for(0, static_cast<std::size_t>(rows), 64, [&](std::size_t first, std::size_t last) {
        for (std::size_t r = first; r < last; ++r) {
            const float* in = x + r * dim;
            float* out = y + r * dim;
            float sum = 0;
            for (std::int64_t i = 0; i < dim; ++i) sum += in[i] * in[i];
            const float inv = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
            for (std::int64_t i = 0; i < dim; ++i) out[i] = in[i] * inv * (zero_centred ? 1.0f + weight[i] : weight[i]);
        }
    });
}

std::vector<float> rope_inverse_frequencies(double base, std::int64_t rotary_dim) {
    std::vector<float> inv(static_cast<std::size_t>(rotary_dim / 2));
    for (std::size_t i = 0; i < inv.size(); ++i)  // float32 pow, as torch's base ** (arange(0, d, 2).float() / d)
        inv[i] = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    return inv;
}

void apply_rope(float* x, std::int64_t heads, std::int64_t head_dim, std::int64_t rotary_dim,
                std::span<const std::int64_t> sample_lengths, std::span<const float> inv_freq, RopeStyle style) {
    if (rotary_dim > head_dim || rotary_dim % 2 != 0 || static_cast<std::int64_t>(inv_freq.size()) != rotary_dim / 2)
        throw Error(ErrorKind::internal, "rotary dims do not fit the head");
    std::vector<std::int64_t> position;
    for (std::int64_t n : sample_lengths)
        for (std::int64_t p = 0; p < n; ++p) position.push_back(p);
    const std::int64_t half = rotary_dim / 2;
    parallel_for(0, position.size(), 32, [&](std::size_t first, std::size_t last) {
        std::vector<float> cos(static_cast<std::size_t>(half)), sin(cos.size());
        for (std::size_t t = first; t < last; ++t) {
            for (std::int64_t i = 0; i < half; ++i) {
                const float angle = static_cast<float>(position[t]) * inv_freq[i];  // float32, as torch
                cos[i] = std::cos(angle);
                sin[i] = std::sin(angle);
            }
            for (std::int64_t h = 0; h < heads; ++h) {
                float* v = x + (t * heads + h) * head_dim;
                for (std::int64_t i = 0; i < half; ++i) {
                    float& a = style == RopeStyle::rotate_half ? v[i] : v[2 * i];
                    float& b = style == RopeStyle::rotate_half ? v[i + half] : v[2 * i + 1];
                    const float x1 = a, x2 = b;
                    a = x1 * cos[i] - x2 * sin[i];
                    b = x2 * cos[i] + x1 * sin[i];
                }
            }
        }
    });
}

void causal_attention(const float* q, const float* k, const float* v, std::int64_t q_heads, std::int64_t kv_heads,
                      std::int64_t qk_dim, std::int64_t v_dim, std::span<const std::int64_t> sample_lengths, float scale,
                      float* out) {
    if (kv_heads <= 0 || q_heads % kv_heads != 0) throw Error(ErrorKind::internal, "query heads must be a multiple of kv heads");
    const std::int64_t group = q_heads / kv_heads;
    std::vector<std::int64_t> starts;
    std::int64_t at = 0;
    for (std::int64_t n : sample_lengths) {
        starts.push_back(at);
        at += n;
    }
    const std::size_t tasks = sample_lengths.size() * static_cast<std::size_t>(q_heads);
    parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
        std::vector<float> scores;
        for (std::size_t task = first; task < last; ++task) {
            const std::size_t s = task / static_cast<std::size_t>(q_heads);
            const std::int64_t h = static_cast<std::int64_t>(task % static_cast<std::size_t>(q_heads)), kvh = h / group;
            const std::int64_t begin = starts[s], n = sample_lengths[s];
            scores.resize(static_cast<std::size_t>(n));
            for (std::int64_t i = 0; i < n; ++i) {
                const float* qi = q + ((begin + i) * q_heads + h) * qk_dim;
                float peak = -INFINITY;
                for (std::int64_t j = 0; j <= i; ++j) {
                    const float* kj = k + ((begin + j) * kv_heads + kvh) * qk_dim;
                    float dot = 0;
                    for (std::int64_t d = 0; d < qk_dim; ++d) dot += qi[d] * kj[d];
                    scores[j] = dot * scale;
                    peak = std::max(peak, scores[j]);
                }
                float sum = 0;
                for (std::int64_t j = 0; j <= i; ++j) sum += (scores[j] = std::exp(scores[j] - peak));
                float* o = out + ((begin + i) * q_heads + h) * v_dim;
                std::fill(o, o + v_dim, 0.0f);
                for (std::int64_t j = 0; j <= i; ++j) {
                    const float w = scores[j] / sum;
                    const float* vj = v + ((begin + j) * kv_heads + kvh) * v_dim;
                    for (std::int64_t d = 0; d < v_dim; ++d) o[d] += w * vj[d];
                }
            }
        }
    });
}

void swiglu(float* gate, const float* up, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace moequant
