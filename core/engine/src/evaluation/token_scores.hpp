// One predicted token scored under two models' logits (eval): each model's negative
// log-likelihood of the actual next token, KL(source || quantized) of the two next-token
// distributions, and whether their top-1 tokens agree. In double precision.
#pragma once

#include <cstdint>
#include <span>

namespace moequant::detail {

struct TokenScore {
    double nll_source = 0, nll_quantized = 0;
    double kl = 0;  // >= 0; exactly 0 for equal logits
    bool top1_agrees = false;
};

TokenScore score_token(std::span<const float> source, std::span<const float> quantized, std::int32_t next);

}  // namespace moequant::detail
