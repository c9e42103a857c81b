// Fuzzes config.json access: any text must be rejected with a moequant::Error or give values
// whose typed accessors either work or throw moequant::Error.
#include <moequant/error.hpp>
#include <moequant/model_config.hpp>

#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        auto config = moequant::ModelConfig::parse(text, "fuzz.json");
        (void)config.model_type();
        (void)config.architectures();
        for (const char* key : {"hidden_size", "num_hidden_layers", "quantization_config.weight_block_size",
                                "text_config", "weight_map"}) {
            try {
                if (auto v = config.find(key)) {
                    (void)v->to_json();
                    if (v->is_array()) (void)v->as_int_array();
                    else if (v->is_number()) (void)v->as_int();
                    for (const auto& k : v->keys()) (void)v->get(k);
                }
            } catch (const moequant::Error&) {
            }
        }
    } catch (const moequant::Error&) {
    }
    return 0;
}
