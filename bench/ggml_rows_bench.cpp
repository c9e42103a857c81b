// The GGUF K-quant and Q8_0 row codecs (plugins/ggml_quants) on one thread, with and without an
// importance matrix, under every ISA this CPU has (moequant/cpu_isa.hpp): GB/s of BF16 input
// (2 bytes a value) and the speed-up over the scalar path measured in the same run. Also checks
// that every ISA writes the scalar path's bytes.
#include "bench_timing.hpp"
#include "ggml_types.hpp"

#include <moequant/cpu_isa.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace moequant;

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
                if (differ) ++mismatches;
                std::printf("%-5s %-8s %-7s %7.3f GB/s", name, with_importance ? "imatrix" : "plain",
                            std::string(isa_name(isa)).c_str(), 2.0 * static_cast<double>(rows * cols) / s / 1e9);
                if (scalar_s > 0) std::printf("  x%.1f vs scalar%s", scalar_s / s, differ ? "  BYTES DIFFER" : "");
                std::printf("\n");
            }
        }
    }
    set_isa_limit(detected_isa());
    return mismatches ? 1 : 0;
}
