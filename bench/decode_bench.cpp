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
#include <moequant/parallel.hpp>
#include <moequant/safetensors_writer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// A one-file checkpoint with a config.json, the registry's encodings attached.
Checkpoint write_checkpoint(const fs::path& dir, const std::string& config, const Registry& registry,
                            const std::vector<struct Stored>& tensors);

template <class T>
std::vector<std::uint8_t> filled(std::size_t n, T value) {
    std::vector<std::uint8_t> out(n * sizeof(T));
    for (std::size_t i = 0; i < n; ++i) std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
    return out;
}

Checkpoint write_checkpoint(const fs::path& dir, const std::string& config, const Registry& registry,
                            const std::vector<Stored>& tensors) {
    fs::create_directories(dir);
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
    SafetensorsWriter writer(dir / "model.safetensors", specs);
    for (const auto& t : tensors) writer.write(t.name, std::as_bytes(std::span<const std::uint8_t>(t.bytes)));
    writer.finish();
    std::ofstream(dir / "config.json") << config;
    Checkpoint c = Checkpoint::open(dir);
    attach_encodings(c, registry);
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t n = argc > 2 ? std::atoll(argv[1]) : 2048, k = argc > 2 ? std::atoll(argv[2]) : 7168;
    const auto elements = static_cast<std::size_t>(n * k);
    const fs::path root = fs::temp_directory_path() / ("moequant-decode-bench-" + std::to_string(::getpid()));
    const std::int64_t groups_128 = (k + 127) / 128;
    const std::string ct_config = R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true,
        "strategy": "group", "group_size": 32, "dynamic": false}}}, "weight_block_size": [128, 128]}})";
    const std::string gptq_config = R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
        "desc_act": false, "sym": true, "checkpoint_format": "gptq"}})";
    Registry registry;
    registry.discover({});
    // Two checkpoints, since a config announces one quantization method.
    Checkpoint c = write_checkpoint(root / "a", ct_config, registry, {
        {"bf16.weight", DType::BF16, {n, k}, random_bytes(elements * 2, 1, 0x3F)},
        {"block.weight", DType::F8_E4M3, {n, k}, random_bytes(elements, 2, 0x7E)},
        {"block.weight_scale_inv", DType::F32, {(n + 127) / 128, groups_128},
         filled<float>(static_cast<std::size_t>(((n + 127) / 128) * groups_128), 0.013f)},
        {"channel.weight", DType::F8_E4M3, {n, k}, random_bytes(elements, 3, 0x7E)},
        {"channel.weight_scale", DType::BF16, {n, 1}, filled<std::uint16_t>(static_cast<std::size_t>(n), 0x3C50)},
        {"int4.weight_packed", DType::I32, {n, k / 8}, random_bytes(elements / 2, 4)},
        {"int4.weight_scale", DType::BF16, {n, k / 32}, filled<std::uint16_t>(elements / 32, 0x3C50)},
        {"mx.weight", DType::I8, {n, k / 2}, random_bytes(elements / 2, 5)},
        {"mx.scale", DType::F8_E8M0, {n, k / 32}, filled<std::uint8_t>(elements / 32, 120)},
    });
    std::vector<std::uint8_t> g_idx(static_cast<std::size_t>(k) * 4);
    for (std::int64_t i = 0; i < k; ++i) {
        const auto g = static_cast<std::int32_t>(i / 128);
        std::memcpy(g_idx.data() + i * 4, &g, 4);
    }
    Checkpoint g = write_checkpoint(root / "b", gptq_config, registry, {
        {"g.qweight", DType::I32, {k / 8, n}, random_bytes(elements / 2, 6)},
        {"g.qzeros", DType::I32, {groups_128, n / 8}, filled<std::uint32_t>(static_cast<std::size_t>(groups_128 * n / 8), 0x77777777u)},
        {"g.scales", DType::F16, {groups_128, n}, filled<std::uint16_t>(static_cast<std::size_t>(groups_128 * n), 0x2000)},
        {"g.g_idx", DType::I32, {k}, g_idx},
    });

    // Everything writes into one preallocated buffer, so the figures are decode work, not page
    // faults; one untimed pass first maps the source pages.
    std::vector<std::uint16_t> out(elements);
    const std::vector<const char*> names{"bf16.weight", "block.weight", "channel.weight", "int4.weight", "mx.weight"};
    const TensorView weight = c.view("block.weight"), scale = c.view("block.weight_scale_inv");
    // The reference: the FP8 block kernel on the mapped tensors in the same row chunks over all
    // threads, no encoding in between (what convert ran before encodings were plugins).
    auto direct_run = [&] {
        const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 18) / static_cast<std::size_t>(k));
        parallel_for(0, static_cast<std::size_t>(n), grain, [&](std::size_t begin, std::size_t end) {
            dequantize_fp8_block_rows(weight, scale, {128, 128}, static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end),
                                      std::span(out.data() + begin * static_cast<std::size_t>(k), (end - begin) * static_cast<std::size_t>(k)));
        });
    };
    auto decode_run = [&](const Checkpoint& from, const EncodedWeight& w) {
        decode_weight(from, w, {.row_end = n, .col_end = k}, DecodeTarget::bf16, std::as_writable_bytes(std::span(out)));
    };
    std::vector<std::pair<const Checkpoint*, const EncodedWeight*>> weights;
    for (const char* name : names) weights.emplace_back(&c, &c.weight(name));
    weights.emplace_back(&g, &g.weight("g.weight"));
    direct_run();
    for (const auto& [from, w] : weights) decode_run(*from, *w);
    const double direct = best_seconds(direct_run);
    std::printf("weight [%lld, %lld]; reference: FP8 block kernel called directly %.2f ms\n", static_cast<long long>(n),
                static_cast<long long>(k), direct * 1e3);
    std::printf("%-34s %10s %12s %14s\n", "encoding", "ms", "GB/s out", "x direct FP8");
    for (const auto& [from, wp] : weights) {
        const EncodedWeight& w = *wp;
        const double s = best_seconds([&] { decode_run(*from, w); });
        std::printf("%-34s %10.2f %12.2f %14.2f\n", (w.encoding + ": " + w.summary).substr(0, 34).c_str(), s * 1e3,
                    static_cast<double>(elements) * 2 / s / 1e9, direct / s);
    }
    fs::remove_all(root);
    return 0;
}
