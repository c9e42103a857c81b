// Throughput of the bulk dtype conversions and of FP8 block dequantization on every ISA this
// CPU has, as a ratio to memcpy moving the same number of bytes in the same run (the memory
// bandwidth these kernels are bound by). Not part of the test budget.
//
// Traffic = bytes read + bytes written; "x memcpy" = memcpy time for the same traffic divided
// by the kernel's time (1.0 = as fast as a plain copy). Each figure is the best of several runs.
#include <moequant/cpu_isa.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace moequant;

namespace {

constexpr int repetitions = 5;
constexpr std::size_t elements = std::size_t{16} << 20;  // the F32 side is 64 MiB

double best_seconds(const std::function<void()>& run) {
    double best = 1e30;
    for (int r = 0; r < repetitions; ++r) {
        const auto start = std::chrono::steady_clock::now();
        run();
        const auto stop = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double>(stop - start).count());
    }
    return best;
}

// memcpy moving `traffic` bytes (copying half of them), measured once per size.
double memcpy_seconds(std::size_t traffic) {
    static std::map<std::size_t, double> measured;
    if (auto it = measured.find(traffic); it != measured.end()) return it->second;
    std::vector<std::byte> from(traffic / 2, std::byte{1}), to(traffic / 2, std::byte{0});
    const double s = best_seconds([&] { std::memcpy(to.data(), from.data(), from.size()); });
    measured[traffic] = s;
    return s;
}

void report(const std::string& what, const std::string& isa, std::size_t traffic, double seconds) {
    const double reference = memcpy_seconds(traffic);
    std::printf("%-24s %-8s %9.1f %9.2f %8.2f %9.2f\n", what.c_str(), isa.c_str(),
                static_cast<double>(traffic) / (1 << 20), seconds * 1e3, static_cast<double>(traffic) / seconds / 1e9,
                reference / seconds);
}

}  // namespace

int main() {
    std::mt19937 rng(42);
    // Sources: ordinary values (finite F32 in a model-like range, every 16-bit and 8-bit code).
    std::vector<float> f32(elements);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (auto& v : f32) v = normal(rng);
    std::vector<std::uint16_t> u16(elements);
    for (auto& v : u16) v = static_cast<std::uint16_t>(rng());
    std::vector<std::uint8_t> u8(elements);
    for (auto& v : u8) v = static_cast<std::uint8_t>(rng());
    std::vector<float> f32_out(elements, 0.0f);
    std::vector<std::uint16_t> u16_out(elements, 0);

    // DeepSeek-style expert weight: [7168, 2048] F8_E4M3, 128x128 blocks, F32 scales.
    const std::int64_t rows = 7168, cols = 2048;
    const BlockSize block{128, 128};
    std::vector<std::byte> weight_bytes(static_cast<std::size_t>(rows * cols));
    for (auto& b : weight_bytes) b = static_cast<std::byte>(rng() & 0x7E);  // no NaN codes
    std::vector<float> scales(static_cast<std::size_t>((rows / 128) * (cols / 128)));
    for (auto& s : scales) s = std::uniform_real_distribution<float>(1e-4f, 1e-2f)(rng);
    const TensorView weight{DType::F8_E4M3, {rows, cols}, weight_bytes};
    const TensorView scale{DType::F32, {rows / 128, cols / 128},
                           std::span<const std::byte>(reinterpret_cast<const std::byte*>(scales.data()),
                                                      scales.size() * sizeof(float))};
    std::vector<std::uint16_t> dequant_out(weight_bytes.size());

    std::printf("moequant convert_bench: %zu elements per conversion, best of %d; detected ISA %s, %zu threads\n",
                elements, repetitions, std::string(isa_name(detected_isa())).c_str(), max_threads());
    std::printf("%-24s %-8s %9s %9s %8s %9s\n", "operation", "isa", "MiB", "ms", "GB/s", "x memcpy");
    report("memcpy", "-", 2 * elements * 4, memcpy_seconds(2 * elements * 4));

    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        const std::string name(isa_name(isa));
        report("bf16 -> f32", name, elements * 6,
               best_seconds([&] { convert_bf16_to_f32(u16.data(), f32_out.data(), elements); }));
        report("f32 -> bf16", name, elements * 6,
               best_seconds([&] { convert_f32_to_bf16(f32.data(), u16_out.data(), elements); }));
        report("f16 -> f32", name, elements * 6,
               best_seconds([&] { convert_f16_to_f32(u16.data(), f32_out.data(), elements); }));
        report("f32 -> f16", name, elements * 6,
               best_seconds([&] { convert_f32_to_f16(f32.data(), u16_out.data(), elements); }));
        report("e4m3 -> f32", name, elements * 5,
               best_seconds([&] { convert_f8_e4m3_to_f32(u8.data(), f32_out.data(), elements); }));
        report("fp8 block dequant (1t)", name, weight_bytes.size() * 3, best_seconds([&] {
                   dequantize_fp8_block_rows(weight, scale, block, 0, rows, dequant_out);
               }));
    }
    set_isa_limit(detected_isa());
    report("fp8 dequant (all, +alloc)", std::string(isa_name(detected_isa())), weight_bytes.size() * 3,
           best_seconds([&] { dequantize_fp8_block(weight, scale, block); }));
    return 0;
}
