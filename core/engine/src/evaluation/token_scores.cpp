#include "evaluation/token_scores.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace moequant::detail {

namespace {

// log-softmax with the max subtracted first (logits of real models reach the hundreds).
std::vector<double> log_softmax(std::span<const float> z) {
    const double top = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (float v : z) sum += std::exp(v - top);
    const double log_sum = top + std::log(sum);
    std::vector<double> out(z.size());
    for (std::size_t i = 0; i < z.size(); ++i) out[i] = z[i] - log_sum;
    return out;
}

}  // namespace

TokenScore score_token(std::span<const float> source, std::span<const float> quantized, std::int32_t next) {
    const std::vector<double> ls = log_softmax(source), lq = log_softmax(quantized);
    TokenScore s;
    s.nll_source = -ls[static_cast<std::size_t>(next)];
    s.nll_quantized = -lq[static_cast<std::size_t>(next)];
    double kl = 0;
    for (std::size_t i = 0; i < ls.size(); ++i) kl += std::exp(ls[i]) * (ls[i] - lq[i]);
    s.kl = std::max(0.0, kl);  // rounding can leave a tiny negative sum
    s.top1_agrees = std::max_element(source.begin(), source.end()) - source.begin() ==
                    std::max_element(quantized.begin(), quantized.end()) - quantized.begin();
    return s;
}

}  // namespace moequant::detail
