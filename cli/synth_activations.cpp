#include "synth_activations.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/safetensors_writer.hpp>
#include <moequant/splitmix64.hpp>

#include <cmath>
#include <cstring>
#include <vector>

namespace moequant::cli {

void write_synthetic_activations(const std::filesystem::path& file, const ModelPlan& plan, std::int64_t samples,
                                 std::int64_t tokens, std::uint64_t seed) {
    const std::int64_t hidden = plan.hidden_size, rows = samples * tokens;
    std::vector<TensorSpec> specs;
    for (const auto& layer : plan.moe_layers)
        specs.push_back({"layers." + std::to_string(layer.layer) + ".moe_input", DType::BF16, {rows, hidden}});
    specs.push_back({"sample_lengths", DType::I64, {samples}});
    SafetensorsWriter writer(file, specs);
    std::vector<std::uint16_t> values(static_cast<std::size_t>(rows * hidden));
    for (const auto& layer : plan.moe_layers) {
        SplitMix64 draws(seed * 1000003 + static_cast<std::uint64_t>(layer.layer));
        std::vector<double> scale(hidden), offset(hidden);
        for (std::int64_t c = 0; c < hidden; ++c) {
            scale[c] = std::ldexp(draws.uniform<24>() < 0.02 ? 16.0 : 1.0, static_cast<int>(std::floor(draws.uniform<24>() * 5)) - 2);
            offset[c] = 0.25 * draws.irwin_hall<4, 24>();
        }
        for (std::int64_t i = 0; i < rows * hidden; ++i)
            values[i] = f32_to_bf16(static_cast<float>((draws.irwin_hall<4, 24>() + offset[i % hidden]) * scale[i % hidden]));
        writer.write("layers." + std::to_string(layer.layer) + ".moe_input", std::as_bytes(std::span(values)));
    }
    std::vector<std::int64_t> lengths(static_cast<std::size_t>(samples), tokens);
    writer.write("sample_lengths", std::as_bytes(std::span(lengths)));
    writer.finish();
}

}  // namespace moequant::cli
