// The GGUF K-quant and Q8_0 row codecs (plugins/ggml_quants) on one thread, with and without an
// importance matrix, under every ISA this CPU has (moequant/cpu_isa.hpp): GB/s of BF16 input
// (2 bytes a value) and the speed-up over the scalar path measured in the same run. Also checks
// that every ISA writes the scalar path's bytes.
// Q4_K without an importance matrix is also judged against the machine: the floor its byte-exact
// search allows on one thread of this CPU, from oneDNN's FP32 GEMM rate measured in the same run
// (issue 38: why Q4_K_M cannot convert in AMX INT4's time, docs/gguf-quants.md).
#include "bench_timing.hpp"
#include "ggml_types.hpp"
#include "onednn_rates.hpp"

#include <moequant/cpu_isa.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace moequant;

namespace {

// Float operations per value that ggml's Q4_K search (quantize_row_q4_K_ref, make_qkx2_quants
// with nstep 20) cannot do without, one sub-block of 32 values per SIMD lane:
//   weights sqrt(mean x^2) + |x|: x*x, +, |x|, +                                    4
//   min, max, sum_w +, sum_x + w*x                                                  5
//   the first levels and their error: -min, *iscale, round, *scale, +min, -x,
//     ^2, *w, +                                                                     9
//   each of its 21 trial scales: -min, *iscale, round (levels); w*l, +, *l, +,
//     *x, + (sums, each left to right); *scale, +min, -x, ^2, *w, + (error)          21 x 15
// = 333. Every one depends on bits the previous trial chose (the minimum moves when a trial
// wins), so none can be shared between trials, and the sums' order is fixed by the bytes.
constexpr double q4_k_operations_per_value = 4 + 5 + 9 + 21 * 15;

}  // namespace

int main(int argc, char** argv) {
    // Arguments: rows of 4096 (default 64), optionally one type name ("q4_K") and one ISA name
    // ("avx512", for perf stat; no ratio then) to time alone.
    const std::int64_t cols = 4096, rows = argc > 1 ? std::atoll(argv[1]) : 64;
    const std::string only = argc > 2 ? argv[2] : "";
    const std::string only_isa = argc > 3 ? argv[3] : "";
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<float> x(static_cast<std::size_t>(rows * cols)), importance(static_cast<std::size_t>(cols));
    for (float& v : x) v = normal(rng);
    for (float& v : importance) v = std::abs(normal(rng)) * 50.f;
    int mismatches = 0;
    double q4_k_plain_values_per_s = 0;
    for (const char* name : {"q8_0", "q4_K", "q5_K", "q6_K"}) {
        if (!only.empty() && only != name) continue;
        const auto* type = ggml_quants::ggml_type_named(name);
        for (bool with_importance : {false, true}) {
            const std::int64_t row_bytes = type->row_bytes(cols);
            std::vector<std::uint8_t> scalar_out(static_cast<std::size_t>(rows * row_bytes)), out(scalar_out.size());
            double scalar_s = 0;
            for (Isa isa : available_isas()) {
                if (!only_isa.empty() && only_isa != isa_name(isa)) continue;
                set_isa_limit(isa);
                std::vector<std::uint8_t>& dst = isa == Isa::scalar ? scalar_out : out;
                const double s = bench::best_seconds(3, [&] {
                    for (std::int64_t r = 0; r < rows; ++r)
                        type->quantize(x.data() + r * cols, dst.data() + r * row_bytes, cols,
                                       with_importance ? importance.data() : nullptr);
                });
                const bool differ = isa != Isa::scalar && scalar_s > 0 && dst != scalar_out;
                if (isa == Isa::scalar) scalar_s = s;
                if (isa == detected_isa() && !with_importance && std::string(name) == "q4_K")
                    q4_k_plain_values_per_s = static_cast<double>(rows * cols) / s;
                if (differ) ++mismatches;
                std::printf("%-5s %-8s %-7s %7.3f GB/s", name, with_importance ? "imatrix" : "plain",
                            std::string(isa_name(isa)).c_str(), 2.0 * static_cast<double>(rows * cols) / s / 1e9);
                if (scalar_s > 0) std::printf("  x%.1f vs scalar%s", scalar_s / s, differ ? "  BYTES DIFFER" : "");
                std::printf("\n");
            }
        }
    }
    set_isa_limit(detected_isa());
    if (q4_k_plain_values_per_s > 0) {
        // A core issues at most two vector multiplies (its FMA pipes) and two vector adds a
        // cycle (Zen 4/5, Golden Cove): twice the multiply-adds oneDNN's sgemm reaches on one
        // thread, counted per lane, is the operations a second the search could have at best.
        const bench::OnednnRates rates = bench::onednn_rates(2048, 1, 3);
        const double floor_values_per_s = 2 * rates.f32 / q4_k_operations_per_value;
        std::printf("q4_K plain, %s: %.3f GB/s = %.2f of its floor on this core, %.3f GB/s (%.0f operations a value at twice "
                    "oneDNN's one-thread FP32 GEMM rate, %.1f G multiply-adds/s)\n",
                    std::string(isa_name(detected_isa())).c_str(), 2 * q4_k_plain_values_per_s / 1e9,
                    q4_k_plain_values_per_s / floor_values_per_s, 2 * floor_values_per_s / 1e9, q4_k_operations_per_value,
                    rates.f32 / 1e9);
    }
    return mismatches ? 1 : 0;
}
