#include "encoded_checkpoint.hpp"

#include <moequant/safetensors_writer.hpp>

#include <map>
#include <mutex>

namespace moequant::test {

const Registry& encoding_registry(const std::vector<std::string>& ids) {
    static std::mutex mutex;
    // Never freed (checkpoints point into the registries), and kept reachable for the leak checker.
    static auto* loaded = new std::map<std::vector<std::string>, Registry*>;
    std::lock_guard lock(mutex);
    Registry*& r = (*loaded)[ids];
    if (!r) {
        r = new Registry;
        for (const auto& id : ids)
            r->load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-encoding-" + id + ".so"), PluginOrigin::explicit_file);
    }
    return *r;
}

Checkpoint write_encoded_checkpoint(const TempDir& dir, const std::vector<StoredTensor>& tensors, const std::string& config,
                                    const std::vector<std::string>& ids) {
    std::vector<TensorSpec> specs;
    for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
    SafetensorsWriter writer(dir / "model.safetensors", specs);
    for (const auto& t : tensors) writer.write(t.name, std::as_bytes(std::span<const std::uint8_t>(t.bytes)));
    writer.finish();
    write_text(dir / "config.json", config);
    Checkpoint c = Checkpoint::open(dir.path());
    attach_encodings(c, encoding_registry(ids));
    return c;
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

}  // namespace moequant::test
