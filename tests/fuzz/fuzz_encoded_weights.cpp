// libFuzzer target: hostile headers and quantization configs through every first-party encoding.
// The input is turned into a valid safetensors file (so the reader's own checks are not what is
// fuzzed) of a few tensors whose names, dtypes and shapes come from the input, plus a config.json
// from templates with fuzzed numbers. Every weight the tensors could make up is looked up and,
// when recognised, decoded whole: encodings must refuse (Error) or decode, never crash, hang or
// read outside a tensor.
#include <moequant/checkpoint.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/safetensors_writer.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace moequant;
namespace fs = std::filesystem;

namespace {

// Reads the input front to back; past the end it yields zeros.
class Bytes {
public:
    Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
    std::uint8_t next() { return at_ < size_ ? data_[at_++] : 0; }
    bool empty() const { return at_ >= size_; }

private:
    const std::uint8_t* data_;
    std::size_t size_, at_ = 0;
};

const char* const names[] = {"m.weight",        "m.weight_scale",  "m.weight_scale_inv", "m.input_scale",
                             "m.weight_packed", "m.weight_shape",  "m.weight_g_idx",     "m.weight_zero_point",
                             "m.scale",         "m.qweight",       "m.qzeros",           "m.scales",
                             "m.g_idx",         "x_blocks",        "x_scales",           "x_bias"};
const DType dtypes[] = {DType::BF16, DType::F16, DType::F32, DType::F8_E4M3, DType::F8_E8M0,
                        DType::I8,   DType::U8,  DType::I32, DType::I64};

std::string config_of(Bytes& in) {
    const auto n = [&](int mod) { return std::to_string(static_cast<int>(in.next() % mod) - (mod > 64 ? 1 : 0)); };
    const char* strategies[] = {"channel", "tensor", "group", "block", "x"};
    switch (in.next() % 8) {
        case 0: return "{}";
        case 1: return R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [)" + n(8) + "," + n(8) + "]}}";
        case 2:
        case 3: {
            const bool pack = in.next() % 2;
            return std::string(R"({"quantization_config": {"quant_method": "compressed-tensors", "format": ")") +
                   (pack ? "pack-quantized" : "float-quantized") +
                   R"(", "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": )" + n(10) +
                   R"(, "type": ")" + (pack ? "int" : "float") + R"(", "symmetric": )" + (in.next() % 4 ? "true" : "false") +
                   R"(, "strategy": ")" + strategies[in.next() % 5] + R"(", "group_size": )" + n(66) +
                   (in.next() % 2 ? R"(, "actorder": "group")" : "") + "}}}}}";
        }
        case 4:
            return R"({"quantization_config": {"quant_method": "gptq", "bits": )" + n(9) + R"(, "group_size": )" + n(70) +
                   R"(, "desc_act": )" + (in.next() % 2 ? "true" : "false") + R"(, "checkpoint_format": ")" +
                   (in.next() % 2 ? "gptq_v2" : "gptq") + R"("}})";
        case 5: return R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}})";
        case 6:
            return R"({"quantization_config": {"quant_method": "awq", "bits": )" + n(9) + R"(, "group_size": )" + n(70) +
                   R"(, "zero_point": )" + (in.next() % 4 ? "true" : "false") + R"(, "version": ")" + (in.next() % 4 ? "gemm" : "gemv") +
                   R"("}})";
        case 7:
            if (in.next() % 2) return R"({"quantization_config": {"quant_method": "mxfp8", "weight_block_size": [1, 32]}})";
            [[fallthrough]];
        default: return R"({"expert_dtype": "fp4", "quantization_config": {"quant_method": "mxfp4"}})";
    }
}

const Registry& encodings() {
    static Registry* registry = [] {
        auto* r = new Registry;
        for (const char* id : {"float", "fp8", "ct_pack", "mxfp4", "mxfp8", "autogptq", "awq"})
            r->load_file(fs::path(MOEQUANT_PLUGIN_BUILD_DIR) / ("moequant-encoding-" + std::string(id) + ".so"),
                         PluginOrigin::explicit_file);
        return r;
    }();
    return *registry;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const fs::path dir = fs::temp_directory_path() / ("moequant-fuzz-encodings-" + std::to_string(::getpid()));
    Bytes in(data, size);
    const std::string config = config_of(in);
    std::vector<TensorSpec> specs;
    const int count = 1 + in.next() % 6;
    for (int t = 0; t < count; ++t) {
        TensorSpec spec{names[in.next() % std::size(names)], dtypes[in.next() % std::size(dtypes)], {}};
        const int rank = in.next() % 5;
        std::uint64_t elements = 1;
        for (int d = 0; d < rank; ++d) {
            const std::int64_t dim = in.next() % 65;
            spec.shape.push_back(dim);
            elements *= static_cast<std::uint64_t>(dim);
        }
        if (elements > 8192) return 0;  // keep every decode small
        bool duplicate = false;
        for (const auto& s : specs) duplicate = duplicate || s.name == spec.name;
        if (!duplicate) specs.push_back(spec);
    }
    try {
        fs::create_directories(dir);
        std::ofstream(dir / "config.json") << config;
        SafetensorsWriter writer(dir / "model.safetensors", specs);
        for (const auto& spec : specs) {
            std::vector<std::uint8_t> bytes(dtype_byte_size(spec.dtype, shape_elements(spec.shape).value_or(0)).value_or(0));
            for (auto& b : bytes) b = in.next();
            writer.write(spec.name, std::as_bytes(std::span<const std::uint8_t>(bytes)));
        }
        writer.finish();
    } catch (const Error&) {
        return 0;  // not a file the writer makes: nothing to fuzz
    }
    // Refusals of the input are the expected outcome; any other error (a plugin's broken promise,
    // an internal check) escapes and is a finding.
    auto refused = [](const Error& e) {
        if (e.kind() != ErrorKind::input) throw e;
    };
    Checkpoint checkpoint = Checkpoint::open(dir);
    attach_encodings(checkpoint, encodings());
    for (const char* weight : {"m.weight", "x", "m.weight_scale"}) {
        try {
            if (const EncodedWeight* w = checkpoint.find_weight(weight); w && w->shape.size() >= 2) {
                const std::int64_t matrices = w->shape.size() == 3 ? w->shape[0] : 1;
                for (std::int64_t m = 0; m < matrices; ++m) decode_matrix(checkpoint, *w, m);
            }
        } catch (const Error& e) {
            refused(e);
        }
    }
    for (const auto& spec : specs) {
        try {
            checkpoint.weight_holding(spec.name);
        } catch (const Error& e) {
            refused(e);
        }
    }
    return 0;
}
