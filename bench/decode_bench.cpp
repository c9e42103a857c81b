// Decoding an expert-sized weight through each source-encoding plugin (Checkpoint::weight() +
// decode_matrix(), all threads), as a ratio to the SDK's FP8 block kernel called directly on
// the same weight in the same run — the path convert took before encodings were plugins — and
// to copying BF16 (the float encoding). Not part of the test budget.
//
// Usage: moequant_decode_bench [rows cols]   (default 2048 7168, a DeepSeek-V3 gate projection)
#include <moequant/checkpoint.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/safetensors_writer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace moequant;
namespace fs = std::filesystem;

namespace {

constexpr int repetitions = 7;

double best_seconds(const std::function<void()>& run) {
    double best = 1e30;
    for (int r = 0; r < repetitions; ++r) {
        const auto start = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
}

struct Stored {
    std::string name;
    DType dtype;
    Shape shape;
    std::vector<std::uint8_t> bytes;
};

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint32_t seed, std::uint8_t mask = 0xFF) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> out(n);
    for (auto& b : out) b = static_cast<std::uint8_t>(rng() & mask);
    return out;
}

template <class T>
std::vector<std::uint8_t> filled(std::size_t n, T value) {
    std::vector<std::uint8_t> out(n * sizeof(T));
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t n = argc > 2 ? std::atoll(argv[1]) : 2048, k = argc > 2 ? std::atoll(argv[2]) : 7168;
    const auto elements = static_cast<std::size_t>(n * k);
    const fs::path dir = fs::temp_directory_path() / ("moequant-decode-bench-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string ct_config = R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true,
        "strategy": "group", "group_size": 32, "dynamic": false}}}, "weight_block_size": [128, 128]}})";
    std::vector<Stored> tensors{
        {"bf16.weight", DType::BF16, {n, k}, random_bytes(elements * 2, 1, 0x3F)},
        {"block.weight", DType::F8_E4M3, {n, k}, random_bytes(elements, 2, 0x7E)},
        {"block.weight_scale_inv", DType::F32, {(n + 127) / 128, (k + 127) / 128},
         filled<float>(static_cast<std::size_t>(((n + 127) / 128) * ((k + 127) / 128)), 0.013f)},
        {"channel.weight", DType::F8_E4M3, {n, k}, random_bytes(elements, 3, 0x7E)},
        {"channel.weight_scale", DType::BF16, {n, 1}, filled<std::uint16_t>(static_cast<std::size_t>(n), 0x3C50)},
        {"int4.weight_packed", DType::I32, {n, k / 8}, random_bytes(elements / 2, 4)},
        {"int4.weight_scale", DType::BF16, {n, k / 32}, filled<std::uint16_t>(elements / 32, 0x3C50)},
    };
    {
        std::vector<TensorSpec> specs;
        for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
        SafetensorsWriter writer(dir / "model.safetensors", specs);
        for (const auto& t : tensors) writer.write(t.name, std::as_bytes(std::span<const std::uint8_t>(t.bytes)));
        writer.finish();
        std::FILE* f = std::fopen((dir / "config.json").c_str(), "w");
        std::fputs(ct_config.c_str(), f);
        std::fclose(f);
    }
    Registry registry;
    registry.discover({});
    Checkpoint c = Checkpoint::open(dir);
    attach_encodings(c, registry);

    // One untimed pass over everything first: mapping the source pages and the allocator's
    // first large blocks would otherwise be charged to whichever is measured first.
    const std::vector<const char*> names{"bf16.weight", "block.weight", "channel.weight", "int4.weight"};
    dequantize_fp8_block(c.view("block.weight"), c.view("block.weight_scale_inv"), {128, 128});
    for (const char* name : names) decode_matrix(c, c.weight(name));

    // The reference: the FP8 block kernel on the mapped tensors, no encoding in between.
    const double direct = best_seconds([&] { dequantize_fp8_block(c.view("block.weight"), c.view("block.weight_scale_inv"), {128, 128}); });
    std::printf("weight [%lld, %lld]; reference: FP8 block kernel called directly %.2f ms\n", static_cast<long long>(n),
                static_cast<long long>(k), direct * 1e3);
    std::printf("%-34s %10s %12s %14s\n", "encoding", "ms", "GB/s out", "x direct FP8");
    for (const char* name : names) {
        const EncodedWeight& w = c.weight(name);
        const double s = best_seconds([&] { decode_matrix(c, w); });
        std::printf("%-34s %10.2f %12.2f %14.2f\n", (w.encoding + ": " + w.summary).substr(0, 34).c_str(), s * 1e3,
                    static_cast<double>(elements) * 2 / s / 1e9, direct / s);
    }
    fs::remove_all(dir);
    return 0;
}
