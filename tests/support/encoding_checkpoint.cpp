#include "encoding_checkpoint.hpp"

#include <moequant/engine/plugin_registry.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/safetensors_writer.hpp>

#include <boost/test/unit_test.hpp>

#include <span>

namespace moequant::test {

const Registry& encoding_plugins() {
    static Registry* registry = [] {
        auto* r = new Registry;  // never unloaded: weights keep pointers to its encodings
        for (const char* id : {"float", "fp8", "ct_pack", "mxfp4", "mxfp8", "autogptq", "awq"})  // a missing one is only a rejection
            r->load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-encoding-" + std::string(id) + ".so"),
                         PluginOrigin::explicit_file);
        return r;
    }();
    return *registry;
}

Checkpoint write_checkpoint(const TempDir& dir, const std::vector<StoredTensor>& tensors, const std::string& config) {
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
    SafetensorsWriter writer(dir / "model.safetensors", specs);
    for (const auto& t : tensors) writer.write(t.name, std::as_bytes(std::span<const std::uint8_t>(t.bytes)));
    writer.finish();
    write_text(dir / "config.json", config);
    Checkpoint c = Checkpoint::open(dir.path());
    attach_encodings(c, encoding_plugins());
    return c;
}

std::vector<StoredTensor> with_replaced(const std::vector<StoredTensor>& tensors, const std::string& name,
                                        const StoredTensor& replacement) {
    std::vector<StoredTensor> out;
    for (const auto& t : tensors)
        if (t.name != name) out.push_back(t);
    if (!replacement.name.empty()) out.push_back(replacement);
    return out;
}

std::vector<std::uint16_t> bf16_values(const Tensor& t) {
    std::vector<std::uint16_t> out(t.elements());
    std::memcpy(out.data(), t.data(), out.size() * 2);
    return out;
}

std::vector<float> f32_values(const Tensor& t) {
    std::vector<float> out(t.elements());
    std::memcpy(out.data(), t.data(), out.size() * 4);
    return out;
}

void check_window_against(const Tensor& full, const Checkpoint& c, const EncodedWeight& w, const DecodeWindow& window,
                          DecodeTarget target) {
    const std::int64_t k = w.shape.back();
    const std::size_t size = decode_target_bytes(target), width = static_cast<std::size_t>(window.cols());
    std::vector<std::byte> part(static_cast<std::size_t>(window.rows()) * width * size);
    decode_weight(c, w, window, target, part);
    std::size_t i = 0;
    for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i)
        BOOST_TEST(std::memcmp(part.data() + i * width * size, full.data() + static_cast<std::size_t>(r * k + window.col_begin) * size,
                               width * size) == 0,
                   w.name << " matrix " << window.matrix << " row " << r << " columns [" << window.col_begin << ","
                          << window.col_end << ")");
}

}  // namespace moequant::test
