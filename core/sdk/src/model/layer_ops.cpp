#include "numeric/onednn_products.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/layer_ops.hpp>
#include <moequant/parallel.hpp>
#include <moequant/vector_exp.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstring>

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

namespace {

// The rotary dimension comes from config.json and sizes a table: real heads have a few hundred
// dimensions, so a config claiming far more (or fewer than none) is refused before allocating.
std::size_t rotary_table_size(std::int64_t rotary_dim) {
    constexpr std::int64_t most = 1 << 16;
    if (rotary_dim < 0 || rotary_dim > most)
        throw_input_error("the rotary dimension " + std::to_string(rotary_dim) + " is outside 0.." + std::to_string(most),
                          {.code = "InvalidConfig"});
    return static_cast<std::size_t>(rotary_dim / 2);
}

}  // namespace

std::vector<float> rope_inverse_frequencies(double base, std::int64_t rotary_dim) {
    std::vector<float> inv(rotary_table_size(rotary_dim));
    for (std::size_t i = 0; i < inv.size(); ++i)  // float32 pow, as torch's base ** (arange(0, d, 2).float() / d)
        inv[i] = 1.0f / std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    return inv;
}

std::vector<float> yarn_inverse_frequencies(double base, std::int64_t rotary_dim, double factor, double original_max_positions,
                                            double beta_fast, double beta_slow, bool truncate) {
    const double dim = static_cast<double>(rotary_dim);
    auto correction_dim = [&](double rotations) {
        return dim * std::log(original_max_positions / (rotations * 2 * M_PI)) / (2 * std::log(base));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // no division by zero in the ramp
    std::vector<float> inv(rotary_table_size(rotary_dim));
    for (std::size_t i = 0; i < inv.size(); ++i) {
        // float32 as torch: pos_freqs = base ** (arange(0, dim, 2).float() / dim)
        const float pos = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
        const float extrapolation = 1.0f / pos, interpolation = 1.0f / (static_cast<float>(factor) * pos);
        const float ramp = std::clamp((static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low), 0.0f, 1.0f);
        const float keep = 1.0f - ramp;  // the extrapolation factor
        inv[i] = interpolation * (1.0f - keep) + extrapolation * keep;
    }
    return inv;
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

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

namespace {

// The largest of n values, as `peak = std::max(peak, v)` from -infinity finds it (NaNs
// skipped), in 16 independent lanes that vectorize: a max is the same value in any order (only
// the sign of a zero peak may differ, which changes no v - peak's exp).
float row_peak(const float* v, std::int64_t n) {
    constexpr int lanes = 16;
    float lane[lanes];
    std::fill(lane, lane + lanes, -INFINITY);
    std::int64_t j = 0;
    for (; j + lanes <= n; j += lanes)
        for (int l = 0; l < lanes; ++l) lane[l] = std::max(lane[l], v[j + l]);
    float peak = -INFINITY;
    for (; j < n; ++j) peak = std::max(peak, v[j]);
    for (float l : lane) peak = std::max(peak, l);
    return peak;
}

// Rows [r0, r0 + rows) of a causal score block [rows, keys]: scaled, softmax over keys 0..query
// in float32, the masked keys 0. The bytes of the plain scalar loop: the scale, the max, the
// subtraction and the division are exact element by element, exp gives std::exp's bits
// (exp_values), and the sum keeps its order, one key after the other.
void causal_softmax(float* scores, std::int64_t rows, std::int64_t keys, std::int64_t r0, float scale) {
    for (std::int64_t i = 0; i < rows; ++i) {
        float* row = scores + i * keys;
        const std::int64_t seen = r0 + i + 1;  // causal: keys 0..r0 + i
        for (std::int64_t j = 0; j < seen; ++j) row[j] *= scale;
        const float peak = row_peak(row, seen);
        for (std::int64_t j = 0; j < seen; ++j) row[j] -= peak;
        exp_values(row, row, static_cast<std::size_t>(seen));
        float sum = 0;
        for (std::int64_t j = 0; j < seen; ++j) sum += row[j];
        for (std::int64_t j = 0; j < seen; ++j) row[j] /= sum;
        std::fill(row + seen, row + keys, 0.0f);
    }
}

// `rows` rows of `width` floats `stride` apart as dense BF16.
void gather_bf16(const float* src, std::int64_t rows, std::int64_t width, std::int64_t stride, std::uint16_t* dst) {
    for (std::int64_t r = 0; r < rows; ++r) convert_f32_to_bf16(src + r * stride, dst + r * width, static_cast<std::size_t>(width));
}

// causal_attention with compute_dtype() bf16: Q K^T and P V as BF16 products with FP32
// accumulation (the softmax stays FP32; P is rounded to BF16 for the second product, as torch
// does in bfloat16). One (sample, head) per task, as the FP32 path.
void bf16_attention(const float* q, const float* k, const float* v, std::int64_t q_heads, std::int64_t kv_heads,
                    std::int64_t qk_dim, std::int64_t v_dim, std::span<const std::int64_t> sample_lengths,
                    const std::vector<std::int64_t>& starts, float scale, std::int64_t query_block, float* out) {
    const std::int64_t group = q_heads / kv_heads;
    const std::size_t tasks = sample_lengths.size() * static_cast<std::size_t>(q_heads);
    parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
        std::vector<std::uint16_t> qh, kh, vh, p;
        std::vector<float> scores, o;
        for (std::size_t task = first; task < last; ++task) {
            const std::size_t s = task / static_cast<std::size_t>(q_heads);
            const std::int64_t h = static_cast<std::int64_t>(task % static_cast<std::size_t>(q_heads)), kvh = h / group;
            const std::int64_t begin = starts[s], n = sample_lengths[s];
            if (n == 0) continue;
            qh.resize(static_cast<std::size_t>(n * qk_dim));
            kh.resize(qh.size());
            vh.resize(static_cast<std::size_t>(n * v_dim));
            gather_bf16(q + (begin * q_heads + h) * qk_dim, n, qk_dim, q_heads * qk_dim, qh.data());
            gather_bf16(k + (begin * kv_heads + kvh) * qk_dim, n, qk_dim, kv_heads * qk_dim, kh.data());
            gather_bf16(v + (begin * kv_heads + kvh) * v_dim, n, v_dim, kv_heads * v_dim, vh.data());
            for (std::int64_t r0 = 0; r0 < n; r0 += query_block) {
                const std::int64_t rows = std::min(query_block, n - r0), keys = r0 + rows;
                scores.resize(static_cast<std::size_t>(rows * keys));
                detail::bf16_product(qh.data() + r0 * qk_dim, kh.data(), true, scores.data(), rows, keys, qk_dim);
                causal_softmax(scores.data(), rows, keys, r0, scale);
                p.resize(scores.size());
                convert_f32_to_bf16(scores.data(), p.data(), scores.size());
                o.resize(static_cast<std::size_t>(rows * v_dim));
                detail::bf16_product(p.data(), vh.data(), false, o.data(), rows, v_dim, keys);
                for (std::int64_t i = 0; i < rows; ++i)
                    std::copy_n(o.data() + i * v_dim, v_dim, out + ((begin + r0 + i) * q_heads + h) * v_dim);
            }
        }
    });
}

}  // namespace

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
    // One (sample, head) per task: scores = Q K^T as a GEMM over the head's strided rows, the
    // causal mask, a float32 row softmax, then P V.
    using Rows = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Strided = Eigen::Map<const Rows, 0, Eigen::OuterStride<>>;
    using StridedOut = Eigen::Map<Rows, 0, Eigen::OuterStride<>>;
    constexpr std::int64_t query_block = 256;
    const std::size_t tasks = sample_lengths.size() * static_cast<std::size_t>(q_heads);
    if (compute_dtype() == ComputeDtype::bf16) {
        bf16_attention(q, k, v, q_heads, kv_heads, qk_dim, v_dim, sample_lengths, starts, scale, query_block, out);
        return;
    }
    parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
        Rows scores;
        for (std::size_t task = first; task < last; ++task) {
            const std::size_t s = task / static_cast<std::size_t>(q_heads);
            const std::int64_t h = static_cast<std::int64_t>(task % static_cast<std::size_t>(q_heads)), kvh = h / group;
            const std::int64_t begin = starts[s], n = sample_lengths[s];
            if (n == 0) continue;
            const Strided qh(q + (begin * q_heads + h) * qk_dim, n, qk_dim, Eigen::OuterStride<>(q_heads * qk_dim));
            const Strided kh(k + (begin * kv_heads + kvh) * qk_dim, n, qk_dim, Eigen::OuterStride<>(kv_heads * qk_dim));
            const Strided vh(v + (begin * kv_heads + kvh) * v_dim, n, v_dim, Eigen::OuterStride<>(kv_heads * v_dim));
            StridedOut oh(out + (begin * q_heads + h) * v_dim, n, v_dim, Eigen::OuterStride<>(q_heads * v_dim));
            // Blocks of queries: a block sees the keys up to its last query only, so memory is
            // block x n and the masked half of the products is mostly skipped.
            for (std::int64_t r0 = 0; r0 < n; r0 += query_block) {
                const std::int64_t rows = std::min(query_block, n - r0), keys = r0 + rows;
                scores.resize(rows, keys);
                scores.noalias() = qh.middleRows(r0, rows) * kh.topRows(keys).transpose();
                causal_softmax(scores.data(), rows, keys, r0, scale);
                oh.middleRows(r0, rows).noalias() = scores * vh.topRows(keys);
            }
        }
    });
}

void swiglu(float* gate, const float* up, std::int64_t n) { apply_gated_activation({}, gate, up, n); }

}  // namespace moequant

// ---- weights and products ----

namespace moequant {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace

std::vector<float> load_f32(const Checkpoint& checkpoint, const std::string& name, const Shape& shape) {
    const EncodedWeight* w = checkpoint.find_weight(name);
    if (!w) throw Error(ErrorKind::input, "the checkpoint has no such tensor", {.tensor = name, .code = "MissingTensor"});
    if (!shape.empty() && w->shape != shape)
        throw Error(ErrorKind::input, "has shape " + shape_to_string(w->shape) + ", the config implies " + shape_to_string(shape),
                    {.tensor = name, .code = "ShapeMismatch"});
    std::vector<float> out(static_cast<std::size_t>(shape_elements(w->shape).value_or(0)));
    if (w->shape.size() < 2) {  // vectors (norms, biases) are plain floats: no window to decode
        decode_to_f32(checkpoint.view(w->primary()), out);
        return out;
    }
    // Plain floats keep their stored values; encoded weights go through BF16, as every other
    // consumer sees them.
    const bool plain = w->input_type == "bf16" || w->input_type == "fp16" || w->input_type == "fp32";
    const std::int64_t matrices = w->shape.size() == 3 ? w->shape[0] : 1;
    const std::size_t per_matrix = out.size() / static_cast<std::size_t>(std::max<std::int64_t>(1, matrices));
    for (std::int64_t m = 0; m < matrices; ++m) {
        float* dst = out.data() + static_cast<std::size_t>(m) * per_matrix;
        if (plain) {
            const Tensor f32 = decode_matrix(checkpoint, *w, m, DecodeTarget::f32);
            std::memcpy(dst, f32.data(), per_matrix * sizeof(float));
        } else {
            const Tensor bf16 = decode_matrix(checkpoint, *w, m);
            convert_bf16_to_f32(bf16.data(), dst, per_matrix);
        }
    }
    return out;
}

namespace {

// linear() with compute_dtype() bf16: x and W rounded once to BF16, FP32 accumulation. W is
// either float32 values (rounded block by block) or BF16 bits used in place: the same products.
// Fixed blocks of output columns, one product each, so the bytes do not depend on the thread
// count.
void bf16_linear(const float* x, std::int64_t rows, const float* weight, const std::uint16_t* weight_bf16, std::int64_t out,
                 std::int64_t in, float* y) {
    constexpr std::int64_t block = 256;
    Tensor narrowed = Tensor::uninitialized(DType::BF16, {rows, in});  // every value written below
    std::uint16_t* const xb = narrowed.data_as<std::uint16_t>();
    parallel_for(0, static_cast<std::size_t>(rows), 64, [&](std::size_t first, std::size_t last) {
        convert_f32_to_bf16(x + first * in, xb + first * in, (last - first) * static_cast<std::size_t>(in));
    });
    const std::size_t blocks = static_cast<std::size_t>((out + block - 1) / block);
    parallel_for(0, blocks, 1, [&](std::size_t first, std::size_t last) {
        std::vector<std::uint16_t> wb;
        std::vector<float> part;
        for (std::size_t b = first; b < last; ++b) {
            const std::int64_t c0 = static_cast<std::int64_t>(b) * block, n = std::min(block, out - c0);
            const std::uint16_t* w = weight_bf16 ? weight_bf16 + c0 * in : nullptr;
            if (!w) {
                wb.resize(static_cast<std::size_t>(n * in));
                convert_f32_to_bf16(weight + c0 * in, wb.data(), wb.size());
                w = wb.data();
            }
            part.resize(static_cast<std::size_t>(rows * n));
            detail::bf16_product(xb, w, true, part.data(), rows, n, in);
            for (std::int64_t r = 0; r < rows; ++r) std::copy_n(part.data() + r * n, n, y + r * out + c0);
        }
    });
}

// linear() with FP32 products, whatever the compute dtype (the routers' logits).
void f32_linear(const float* x, std::int64_t rows, const float* weight, std::int64_t out, std::int64_t in, float* y) {
    const Eigen::Map<const RowMajor> xm(x, rows, in), wm(weight, out, in);
    Eigen::Map<RowMajor> ym(y, rows, out);
    // The BLAS is serial: blocks of output columns run in parallel, each packing only its slice of
    // W. The blocks are fixed, not per thread, so the bytes do not depend on the thread count.
    constexpr std::size_t block = 1024;
    parallel_for(0, static_cast<std::size_t>(out), block, [&](std::size_t first, std::size_t last) {
        const auto n = static_cast<Eigen::Index>(last - first);
        ym.middleCols(first, n).noalias() = xm * wm.middleRows(first, n).transpose();
    });
}

// f32_linear with W as BF16 bits: each block of W's rows f32_linear splits it into (up to 1024
// rows; the whole matrix when one thread runs the product) is widened into a buffer of its own,
// not zeroed. A block of 16 MiB or more (DeepSeek-V3's 1024 x 7168 rows: 29 MB) is a large
// Tensor, mapped in huge pages and unmapped again each call (large_block.hpp); smaller ones come
// back from the heap. The same blocks and products as for float32 W, so the same bytes.
void f32_linear(const float* x, std::int64_t rows, const std::uint16_t* weight, std::int64_t out, std::int64_t in, float* y) {
    const Eigen::Map<const RowMajor> xm(x, rows, in);
    Eigen::Map<RowMajor> ym(y, rows, out);
    constexpr std::size_t block = 1024;
    parallel_for(0, static_cast<std::size_t>(out), block, [&](std::size_t first, std::size_t last) {
        const auto n = static_cast<std::int64_t>(last - first);
        Tensor widened = Tensor::uninitialized(DType::F32, {n, in});
        convert_bf16_to_f32(weight + first * in, widened.data_as<float>(), static_cast<std::size_t>(n * in));
        const Eigen::Map<const RowMajor> wm(widened.data_as<float>(), n, in);
        ym.middleCols(first, n).noalias() = xm * wm.transpose();
    });
}

void add_bias(std::vector<float>& y, std::int64_t rows, std::int64_t out, const std::vector<float>* bias) {
    if (bias)
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < out; ++c) y[r * out + c] += (*bias)[c];
}

// An activation [rows, width] every value of which its producer writes: unzeroed, and in huge
// pages of its own from 16 MiB (tensor.cpp), where a std::vector's would be zero-filled and
// faulted in 4 KiB pages on every call.
Tensor activations(std::int64_t rows, std::int64_t width) { return Tensor::uninitialized(DType::F32, {rows, width}); }

// y [rows, out] = x W^T for an expert's W [out, in] as the caller holds it: BF16 multiplied in
// place by BF16 products, widened block by block for FP32 ones; F32 as it is; other dtypes
// decoded to F32.
void expert_linear(const float* x, std::int64_t rows, const Tensor& weight, std::int64_t out, std::int64_t in, float* y) {
    if (weight.shape() != Shape{out, in})
        throw Error(ErrorKind::internal, "an expert matrix of shape " + shape_to_string(weight.shape()) + " where [" +
                                             std::to_string(out) + ", " + std::to_string(in) + "] was expected");
    const bool bf16 = compute_dtype() == ComputeDtype::bf16;
    if (weight.dtype() == DType::BF16) {
        if (bf16)
            bf16_linear(x, rows, nullptr, weight.data_as<std::uint16_t>(), out, in, y);
        else
            f32_linear(x, rows, weight.data_as<std::uint16_t>(), out, in, y);
        return;
    }
    Tensor widened;
    const float* w = weight.data_as<float>();
    if (weight.dtype() != DType::F32) {
        widened = Tensor::uninitialized(DType::F32, {out, in});
        decode_to_f32(weight.view(), std::span<float>(widened.data_as<float>(), static_cast<std::size_t>(out * in)));
        w = widened.data_as<float>();
    }
    if (bf16)
        bf16_linear(x, rows, w, nullptr, out, in, y);
    else
        f32_linear(x, rows, w, out, in, y);
}

// A gated MLP's down(act(gate x, up x)) for x [rows, hidden] into y [rows, hidden], with
// `product(x, rows, w, out, in, y)` running each of the three products.
template <class Weight, class Product>
void gated_mlp(const float* x, std::int64_t rows, std::int64_t hidden, const Weight& gate, const Weight& up, const Weight& down,
               std::int64_t intermediate, const GatedActivation& activation, const Product& product, float* y) {
    Tensor g = activations(rows, intermediate), u = activations(rows, intermediate);
    product(x, rows, gate, intermediate, hidden, g.data_as<float>());
    product(x, rows, up, intermediate, hidden, u.data_as<float>());
    apply_gated_activation(activation, g.data_as<float>(), u.data_as<float>(), rows * intermediate);
    product(g.data_as<float>(), rows, down, hidden, intermediate, y);
}

void float_product(const float* x, std::int64_t rows, const std::vector<float>& w, std::int64_t out, std::int64_t in, float* y) {
    linear_into(x, rows, w.data(), out, in, y);
}

void expert_product(const float* x, std::int64_t rows, const Tensor& w, std::int64_t out, std::int64_t in, float* y) {
    expert_linear(x, rows, w, out, in, y);
}

// The routed part of a MoE block (add_routed_experts), `run(e, in, n, out)` writing expert e's
// outputs for its n tokens' rows `in` to out [n, hidden].
template <class RunExpert>
Routing route_and_add(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden, const RouterSpec& spec,
                      const std::vector<float>& router_weight, const std::vector<float>& router_bias, std::int64_t experts,
                      std::vector<float>& y, const RunExpert& run) {
    // The router in FP32 whatever the compute dtype: the reference's routers compute their logits
    // in float32, and the engine routes the recorded tokens the same way (expert_tokens).
    std::vector<float> logits(static_cast<std::size_t>(rows * experts));
    f32_linear(x.data(), rows, router_weight.data(), experts, hidden, logits.data());
    Routing routing = route_tokens(spec, logits.data(), rows, experts, router_bias.empty() ? nullptr : router_bias.data());
    // Tokens (and their weights) per expert.
    std::vector<std::vector<std::pair<std::int64_t, float>>> assigned(static_cast<std::size_t>(experts));
    for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t k = 0; k < routing.top_k; ++k)
            assigned[routing.experts[t * routing.top_k + k]].emplace_back(t, routing.weights[t * routing.top_k + k]);
    std::vector<Tensor> outputs(static_cast<std::size_t>(experts));
    parallel_for(0, static_cast<std::size_t>(experts), 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t e = first; e < last; ++e) {
            if (assigned[e].empty()) continue;
            const auto n = static_cast<std::int64_t>(assigned[e].size());
            Tensor in = activations(n, hidden);
            for (std::int64_t i = 0; i < n; ++i)
                std::copy_n(x.data() + assigned[e][i].first * hidden, hidden, in.data_as<float>() + i * hidden);
            outputs[e] = activations(n, hidden);
            run(static_cast<std::int64_t>(e), in.data_as<float>(), n, outputs[e].data_as<float>());
        }
    });
    // Summed per token in rank order (best expert first), as the reference's loop adds them.
    std::vector<std::size_t> next(static_cast<std::size_t>(experts), 0);
    for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t k = 0; k < routing.top_k; ++k) {
            const std::int32_t e = routing.experts[t * routing.top_k + k];
            const std::size_t i = next[e]++;
            const float w = routing.weights[t * routing.top_k + k];
            const float* o = outputs[e].data_as<float>() + i * hidden;
            for (std::int64_t d = 0; d < hidden; ++d) y[t * hidden + d] += w * o[d];
        }
    return routing;
}

}  // namespace

void linear_into(const float* x, std::int64_t rows, const float* weight, std::int64_t out, std::int64_t in, float* y) {
    if (compute_dtype() == ComputeDtype::bf16)
        bf16_linear(x, rows, weight, nullptr, out, in, y);
    else
        f32_linear(x, rows, weight, out, in, y);
}

std::vector<float> linear(const std::vector<float>& x, std::int64_t rows, const std::vector<float>& weight, std::int64_t out,
                          std::int64_t in, const std::vector<float>* bias) {
    std::vector<float> y(static_cast<std::size_t>(rows * out));
    linear_into(x.data(), rows, weight.data(), out, in, y.data());
    add_bias(y, rows, out, bias);
    return y;
}

std::vector<float> swiglu_mlp(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden, const std::vector<float>& gate,
                              const std::vector<float>& up, const std::vector<float>& down, std::int64_t intermediate,
                              const GatedActivation& activation) {
    std::vector<float> y(static_cast<std::size_t>(rows * hidden));
    gated_mlp(x.data(), rows, hidden, gate, up, down, intermediate, activation, float_product, y.data());
    return y;
}

std::vector<float> swiglu_mlp(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden, const ExpertWeights& w,
                              const GatedActivation& activation) {
    std::vector<float> y(static_cast<std::size_t>(rows * hidden));
    gated_mlp(x.data(), rows, hidden, w.gate, w.up, w.down, w.intermediate, activation, expert_product, y.data());
    return y;
}

Routing add_routed_experts(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden, const RouterSpec& spec,
                           const std::vector<float>& router_weight, const std::vector<float>& router_bias,
                           std::int64_t experts, const std::function<ExpertWeights(std::int64_t)>& expert,
                           std::vector<float>& y, const GatedActivation& activation) {
    return route_and_add(x, rows, hidden, spec, router_weight, router_bias, experts, y,
                         [&](std::int64_t e, const float* in, std::int64_t n, float* out) {
                             const ExpertWeights w = expert(e);
                             gated_mlp(in, n, hidden, w.gate, w.up, w.down, w.intermediate, activation, expert_product, out);
                         });
}

Routing add_routed_experts(const std::vector<float>& x, std::int64_t rows, std::int64_t hidden, const RouterSpec& spec,
                           const std::vector<float>& router_weight, const std::vector<float>& router_bias,
                           std::int64_t experts, const std::function<ExpertWeightsF32(std::int64_t)>& expert,
                           std::vector<float>& y, const GatedActivation& activation) {
    return route_and_add(x, rows, hidden, spec, router_weight, router_bias, experts, y,
                         [&](std::int64_t e, const float* in, std::int64_t n, float* out) {
                             const ExpertWeightsF32 w = expert(e);
                             gated_mlp(in, n, hidden, w.gate, w.up, w.down, w.intermediate, activation, float_product, out);
                         });
}

}  // namespace moequant
