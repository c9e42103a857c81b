// The weight-only integer schemes of the GPU path (gptq-compressed-tensors.md §2): W4A16 and
// W8A16, symmetric, group 128 (or one scale per row with strategy "channel"), and GPTQ's
// column ordering and dampening. Parsed once from the job's options (Quantizer::configure).
#pragma once

#include <moequant/options.hpp>

#include <cstdint>
#include <string>

namespace moequant::gptq {

// GPTQ's column ordering: none, `static` (alias `weight`: descending diag(H), groups stay the
// original contiguous columns) or `group` (alias `dynamic`: groups follow the new order and
// the checkpoint carries weight_g_idx).
enum class ActOrder { none, static_order, group };

// The codes a scheme may write. `full` is two's complement's whole range (-8..7, -128..127), as
// llm-compressor writes them. `symmetric` leaves out the lowest code (-7..7, -127..127): kt-kernel's
// integer kernels multiply the lowest code with the wrong sign (docs/kt-arithmetic.md), so a
// checkpoint its CPU experts also read (gptq --for kt-rawint4) and the calibrated AMX codes keep
// to it, with the scale chosen so that the group's absmax maps to the top code.
enum class CodeRange { full, symmetric };

struct Scheme {
    int bits = 4;                     // 4 or 8
    std::int64_t group_size = 128;    // 0: one scale per row (strategy "channel")
    ActOrder actorder = ActOrder::static_order;
    double dampening_frac = 0.1;      // the reference script's --dampening_frac default
    bool uses_calibration = true;     // GPTQ; false for RTN (which never reorders)
    CodeRange code_range = CodeRange::full;

    int qmax() const noexcept { return (1 << (bits - 1)) - 1; }
    int qmin() const noexcept { return code_range == CodeRange::full ? -qmax() - 1 : -qmax(); }
    // What the observer divides the absmax by: bit_range / 2 of §3.1, 7.5 (int4) or 127.5
    // (int8); with symmetric codes the top code itself, 7 or 127.
    float scale_divisor() const noexcept {
        return code_range == CodeRange::full ? static_cast<float>((1 << bits) - 1) / 2.0f : static_cast<float>(qmax());
    }
    // Columns per scale group of a row with `cols` columns.
    std::int64_t group_columns(std::int64_t cols) const noexcept { return group_size ? group_size : cols; }
    // Scale groups of such a row: ceil(cols / group_size), the last one shorter when the group
    // size does not divide cols (compressed-tensors' strategy_cdiv shape; docs/cli.md, gptq).
    std::int64_t groups(std::int64_t cols) const noexcept { return group_size ? (cols + group_size - 1) / group_size : 1; }
    // "W4A16" / "W8A16".
    std::string name() const { return bits == 4 ? "W4A16" : "W8A16"; }
    // The strategy string of quantization_config: "group" or "channel".
    std::string strategy() const { return group_size ? "group" : "channel"; }
};

// Options: quant_type W4A16|W8A16 (default W4A16), strategy group|channel (default group),
// group_size (strategy group; default 128: the gptq command always writes 128, verify passes
// what an output's quantization_config records),
// actorder static|weight|group|dynamic|none (GPTQ only; default static), dampening_frac
// (0 < f < 1, default 0.1), code_range full|symmetric (default full). Throws Error(usage)
// naming the option.
Scheme parse_scheme(const Options& options, bool gptq);

}  // namespace moequant::gptq
