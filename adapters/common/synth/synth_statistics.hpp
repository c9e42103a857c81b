// Values of the shape trained checkpoints have, for `synth --statistics trained`. A model of
// independent random weights feeds every linear layer nearly isotropic, uncorrelated inputs,
// which is the worst case for calibration (GPTQ's error feedback works through the inputs'
// correlations; with a diagonal Hessian it is round-to-nearest). Trained models are far from
// that: their token embeddings occupy a narrow, low-dimensional cone (anisotropy) and their
// RMSNorm gains vary by an order of magnitude across channels. Both are modelled here; the
// linear weights stay independent draws. Like synth_random.hpp, only exactly specified IEEE
// operations, so the bytes are the same everywhere.
#pragma once

#include "synth_random.hpp"

#include <cstdint>
#include <vector>

namespace moequant::adapters {

// [rows, cols] embeddings scale * (z_i A / sqrt(r) + 0.3 e_i): rank r = max(1, cols / 8) shared
// directions A (standard normal, r x cols) with per-row standard normal weights z_i, plus
// isotropic noise e_i. Drawn from `random` in the order A, then per row z_i and e_i.
std::vector<float> low_rank_embeddings(SynthRandom& random, std::int64_t rows, std::int64_t cols, double scale);

// One RMSNorm gain 0.05 + (0.7 + 0.4 n)^2 for standard normal n: positive, right-skewed,
// median about 0.54, a few channels several times larger and some near 0.05.
double trained_norm_gain(SynthRandom& random) noexcept;

}  // namespace moequant::adapters
