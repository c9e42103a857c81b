#include "quant_search.hpp"

#include <moequant/dtype_convert.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::ggml_quants {

int nearest_index(int n, const std::int8_t* values, float x) noexcept {
    if (x <= values[0]) return 0;
    if (x >= values[n - 1]) return n - 1;
    int low = 0, high = n - 1;
    while (high - low > 1) {
        const int mid = (low + high) / 2;
        if (x < values[mid]) high = mid;
        else low = mid;
    }
    return x - values[high - 1] < values[high] - x ? high - 1 : high;
}

namespace {

// The value with the largest magnitude (the first on ties) and that magnitude.
struct Extreme {
    float value = 0, magnitude = 0;
};
Extreme signed_extreme(int n, const float* x) noexcept {
    Extreme e;
    for (int i = 0; i < n; ++i) {
        const float a = std::fabs(x[i]);
        if (a > e.magnitude) e = {x[i], a};
    }
    return e;
}

int clamp_level(int l, int low, int high) noexcept { return std::max(low, std::min(high, l)); }

}  // namespace

float symmetric_levels(int n, int nmax, const float* x, std::int8_t* levels, const float* weights) noexcept {
    const Extreme extreme = signed_extreme(n, x);
    if (extreme.magnitude < group_max_eps) {
        std::fill(levels, levels + n, std::int8_t{0});
        return 0.f;
    }
    const float fnmax = static_cast<float>(nmax);
    auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
    // Sums of w*x*l and w*l*l for the levels `inverse` gives (written to `out` when non-null).
    auto try_scale = [&](float inverse, float& sumlx, float& suml2, std::int8_t* out) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(inverse * x[i]), -nmax, nmax - 1);
            if (out) out[i] = static_cast<std::int8_t>(l + nmax);
            const float w = weight(i), fl = static_cast<float>(l);
            sumlx += w * x[i] * fl;
            suml2 += w * fl * fl;
        }
    };
    float sumlx, suml2;
    try_scale(-fnmax / extreme.value, sumlx, suml2, levels);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0) continue;
        const float inverse = -(fnmax + 0.1f * static_cast<float>(step)) / extreme.value;
        try_scale(inverse, sumlx, suml2, nullptr);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i)
                levels[i] = static_cast<std::int8_t>(nmax + clamp_level(nearest_int(inverse * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float symmetric_levels_refined(int n, int nmax, const float* x, std::int8_t* levels) noexcept {
    const Extreme extreme = signed_extreme(n, x);
    if (extreme.magnitude < group_max_eps) {
        std::fill(levels, levels + n, std::int8_t{0});
        return 0.f;
    }
    const float inverse = -static_cast<float>(nmax) / extreme.value;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_level(nearest_int(inverse * x[i]), -nmax, nmax - 1);
        levels[i] = static_cast<std::int8_t>(l);
        const float w = x[i] * x[i], fl = static_cast<float>(l);
        sumlx += w * x[i] * fl;
        suml2 += w * fl * fl;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i], old = static_cast<float>(levels[i]);
            float slx = sumlx - w * x[i] * old;
            if (slx > 0) {
                float sl2 = suml2 - w * old * old;
                const int candidate = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (candidate != levels[i]) {
                    const float fc = static_cast<float>(candidate);
                    slx += w * x[i] * fc;
                    sl2 += w * fc * fc;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        levels[i] = static_cast<std::int8_t>(candidate);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; ++i) levels[i] = static_cast<std::int8_t>(levels[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

namespace {

// The search behind make_qkx2_quants / make_qkx3_quants; they differ only in the weights
// (qkx3: x^2 when null) and in which blocks count as flat.
float offset_levels(int n, int nmax, const float* x, const float* weights, bool squares_when_null, bool flat_when_equal,
                    std::uint8_t* levels, float* negated_min, std::uint8_t* trial, OffsetSearch search) noexcept {
    auto weight = [&](int i) { return weights || !squares_when_null ? weights[i] : x[i] * x[i]; };
    float min = x[0], max = x[0];
    float sum_w = weight(0);
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weight(i);
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (flat_when_equal ? max == min : max <= min) {
        std::fill(levels, levels + n, std::uint8_t{0});
        *negated_min = -min;
        return 0.f;
    }
    const float fnmax = static_cast<float>(nmax);
    float inverse = fnmax / (max - min);
    float scale = 1 / inverse;
    auto error_of = [&](float d) { return search.absolute_error ? std::fabs(d) : d * d; };
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        levels[i] = static_cast<std::uint8_t>(clamp_level(nearest_int(inverse * (x[i] - min)), 0, nmax));
        const float diff = scale * static_cast<float>(levels[i]) + min - x[i];
        best_error += weight(i) * error_of(diff);
    }
    if (search.nstep < 1) {
        *negated_min = -min;
        return scale;
    }
    for (int step = 0; step <= search.nstep; ++step) {
        inverse = (search.rmin + search.rdelta * static_cast<float>(step) + fnmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(inverse * (x[i] - min)), 0, nmax);
            trial[i] = static_cast<std::uint8_t>(l);
            const float w = weight(i), fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float error = 0;
            for (int i = 0; i < n; ++i) {
                const float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
                error += weight(i) * error_of(diff);
            }
            if (error < best_error) {
                std::copy(trial, trial + n, levels);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *negated_min = -min;
    return scale;
}

}  // namespace

float offset_levels_qkx2(int n, int nmax, const float* x, const float* weights, std::uint8_t* levels, float* negated_min,
                         std::uint8_t* scratch, OffsetSearch search) noexcept {
    return offset_levels(n, nmax, x, weights, false, true, levels, negated_min, scratch, search);
}

float offset_levels_qkx3(int n, int nmax, const float* x, const float* weights, std::uint8_t* levels, float* negated_min,
                         std::uint8_t* scratch, OffsetSearch search) noexcept {
    return offset_levels(n, nmax, x, weights, true, false, levels, negated_min, scratch, search);
}

float positive_levels(int n, int nmax, const float* x, std::uint8_t* levels, const float* weights) noexcept {
    float max = 0;
    for (int i = 0; i < n; ++i) max = std::max(max, x[i]);
    if (max < group_max_eps) {
        std::fill(levels, levels + n, std::uint8_t{0});
        return 0.f;
    }
    const float fnmax = static_cast<float>(nmax);
    float inverse = fnmax / max;
    for (int i = 0; i < n; ++i) levels[i] = static_cast<std::uint8_t>(nearest_int(inverse * x[i]));
    const float scale = 1 / inverse;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        const float diff = x[i] - scale * static_cast<float>(levels[i]);
        best_mse += weights[i] * diff * diff;
    }
    for (int step = -4; step <= 4; ++step) {
        if (step == 0) continue;
        const float inverse_step = (0.1f * static_cast<float>(step) + fnmax) / max;
        const float scale_step = 1 / inverse_step;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::min(nmax, nearest_int(inverse_step * x[i]));
            const float diff = x[i] - scale_step * static_cast<float>(l);
            mse += weights[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            inverse = inverse_step;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = std::min(nmax, nearest_int(inverse * x[i]));
        levels[i] = static_cast<std::uint8_t>(l);
        const float fl = static_cast<float>(l);
        sumlx += weights[i] * x[i] * fl;
        suml2 += weights[i] * fl * fl;
    }
    for (int pass = 0; pass < 5; ++pass) {
        int changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = weights[i], old = static_cast<float>(levels[i]);
            float slx = sumlx - w * x[i] * old;
            float sl2 = suml2 - w * old * old;
            if (slx > 0 && sl2 > 0) {
                const int candidate = std::min(nmax, nearest_int(x[i] * sl2 / slx));
                if (candidate != levels[i]) {
                    const float fc = static_cast<float>(candidate);
                    slx += w * x[i] * fc;
                    sl2 += w * fc * fc;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        levels[i] = static_cast<std::uint8_t>(candidate);
                        sumlx = slx;
                        suml2 = sl2;
                        ++changed;
                    }
                }
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

std::uint16_t to_f16(float x) noexcept {
    // ggml writes every NaN as the quiet NaN 0x7e00 with the input's sign; the SDK's conversion
    // keeps payload bits.
    if (std::isnan(x)) return static_cast<std::uint16_t>((std::signbit(x) ? 0x8000u : 0u) | 0x7e00u);
    return f32_to_f16(x);
}
float from_f16(std::uint16_t bits) noexcept { return f16_to_f32(bits); }

}  // namespace moequant::ggml_quants
