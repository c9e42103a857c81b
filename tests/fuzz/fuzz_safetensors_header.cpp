// Fuzzes the safetensors reader: any byte string must either be rejected with a
// moequant::Error or yield views that lie inside the buffer and decode without faults.
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>

#include <cstdint>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
    try {
        auto file = moequant::SafetensorsFile::from_bytes(bytes, "fuzz");
        std::vector<float> decoded;
        for (const auto& t : file.tensors()) {
            moequant::TensorView v = file.view(t);
            if (v.size_bytes() != t.size_bytes()) std::abort();
            if (!v.bytes.empty() && (v.data() < bytes.data() || v.data() + v.size_bytes() > bytes.data() + size))
                std::abort();
            if (v.elements() <= 4096) {
                decoded.resize(v.elements());
                try {
                    moequant::decode_to_f32(v, decoded);
                } catch (const moequant::Error&) {
                    // dtypes without a float decoding are refused, which is fine
                }
            }
        }
    } catch (const moequant::Error&) {
    }
    return 0;
}
