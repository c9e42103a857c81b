// Test plugin modules for the loader: one source, one FIXTURE_<variant> define per module.
// Each variant differs from the good plugin in exactly one way the host must handle.

#include <moequant/error.hpp>
#include <moequant/plugin.hpp>

#include <cstring>

namespace {

using namespace moequant;

// Copies the weight unchanged and reports it as "identity" (enough to call through the ABI).
class FixtureQuantizer final : public Quantizer {
public:
    explicit FixtureQuantizer(std::string id) : id_(std::move(id)) {}
    std::string_view id() const override { return id_; }
    std::string_view description() const override { return "test fixture: copies the weight"; }
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override { return {{"weight", DType::F32, matrix}}; }
    QuantizedTensor quantize(const TensorView& weight) const override {
        QuantizedTensor q;
        q.method = "IDENTITY";
        q.parts.emplace_back("weight", Tensor::copy_of(weight));
        return q;
    }
    Tensor dequantize(const QuantizedTensor& q, const Shape&) const override {
        return Tensor::copy_of(q.part("weight")->view());
    }

private:
    std::string id_;
};

class FixtureAdapter final : public ModelAdapter {
public:
    std::string_view id() const override { return "fixture-family"; }
    std::string_view description() const override { return "test fixture: claims model_type 'fixture'"; }
    int match(const ModelConfig& config, const Checkpoint&) const override {
        return config.model_type() == "fixture" ? 1 : 0;
    }
    std::vector<std::string> model_types() const override { return {"fixture"}; }
    ModelPlan plan(const ModelConfig&, const Checkpoint&) const override {
        ModelPlan p;
        p.family = "fixture-family";
        return p;
    }
    // No synthesize(): the SDK's default refuses (NoSynthesis).
};

class FixtureFormat final : public OutputFormat {
public:
    std::string_view id() const override { return "fixture-format"; }
    std::string_view description() const override { return "test fixture: writes nothing"; }
    std::unique_ptr<OutputWriter> create(const OutputContext&) const override {
        throw Error(ErrorKind::plugin, "fixture-format cannot write");
    }
};

[[maybe_unused]] int probe_unusable(std::string& reason) {
    reason = "needs AMX-INT8, which this CPU lacks";
    return 0;
}

}  // namespace

#if defined(FIXTURE_GOOD) || defined(FIXTURE_MISSING_DEP)
extern "C" int moequant_fixture_stub_value();
MOEQUANT_PLUGIN("fixture_good", "1.2.3", MOEQUANT_KIND_QUANTIZER, "a valid test quantizer") {
#if defined(FIXTURE_MISSING_DEP)
    if (moequant_fixture_stub_value() != 42) return;
#endif
    registrar.add(std::make_unique<FixtureQuantizer>("fixture-good"));
}

#elif defined(FIXTURE_SECOND_GOOD)
MOEQUANT_PLUGIN("fixture_second_good", "0.0.1", MOEQUANT_KIND_ADAPTER | MOEQUANT_KIND_FORMAT,
                "a valid test adapter and format") {
    registrar.add(std::make_unique<FixtureAdapter>());
    registrar.add(std::make_unique<FixtureFormat>());
}

#elif defined(FIXTURE_THROWS)
MOEQUANT_PLUGIN("fixture_throws", "1.0.0", MOEQUANT_KIND_QUANTIZER, "throws while registering") {
    throw Error(ErrorKind::plugin, "fixture refuses to register");
}

#elif defined(FIXTURE_PROBE_ZERO)
MOEQUANT_PLUGIN_WITH_PROBE("fixture_probe_zero", "1.0.0", MOEQUANT_KIND_QUANTIZER, "unusable here",
                           &probe_unusable) {
    registrar.add(std::make_unique<FixtureQuantizer>("fixture-probe-zero"));
}

#elif defined(FIXTURE_LATE_DUP_OBJECT)
MOEQUANT_PLUGIN("fixture_late_dup_object", "1.0.0", MOEQUANT_KIND_QUANTIZER, "provides fixture-good again") {
    registrar.add(std::make_unique<FixtureQuantizer>("fixture-good"));
}

#elif defined(FIXTURE_LATE_DUP_PLUGIN_ID)
MOEQUANT_PLUGIN("fixture_good", "9.9.9", MOEQUANT_KIND_QUANTIZER, "a second module with the id fixture_good") {
    registrar.add(std::make_unique<FixtureQuantizer>("fixture-dup-plugin-id"));
}

#elif defined(FIXTURE_BAD_OBJECT_ID)
MOEQUANT_PLUGIN("fixture_bad_object_id", "1.0.0", MOEQUANT_KIND_QUANTIZER, "invalid object id") {
    registrar.add(std::make_unique<FixtureQuantizer>("Bad Name"));
}

#elif defined(FIXTURE_WRONG_KIND)
MOEQUANT_PLUGIN("fixture_wrong_kind", "1.0.0", MOEQUANT_KIND_QUANTIZER, "registers an undeclared kind") {
    registrar.add(std::make_unique<FixtureAdapter>());
}

#elif defined(FIXTURE_NOTHING)
MOEQUANT_PLUGIN("fixture_nothing", "1.0.0", MOEQUANT_KIND_QUANTIZER, "registers nothing") {}

#else
// Hand-made descriptors: what a plugin built against another SDK or toolchain looks like.
namespace {
int register_good(void* registrar, char*, std::size_t) {
    static_cast<PluginRegistrar*>(registrar)->add(std::make_unique<FixtureQuantizer>("fixture-handmade"));
    return 0;
}
#if defined(FIXTURE_ABI_PLUS_ONE)
constexpr std::uint32_t abi = MOEQUANT_PLUGIN_ABI_VERSION + 1;
#elif defined(FIXTURE_ABI_SEVEN)
constexpr std::uint32_t abi = 7;  // the ABI the 0.1.0 SDK headers declared
#else
constexpr std::uint32_t abi = MOEQUANT_PLUGIN_ABI_VERSION;
#endif
#if defined(FIXTURE_SDK_MAJOR_PLUS_ONE)
constexpr std::uint32_t sdk = MOEQUANT_SDK_VERSION + 10000;
#elif defined(FIXTURE_ABI_SEVEN)
constexpr std::uint32_t sdk = 100;  // 0.1.0
#else
constexpr std::uint32_t sdk = MOEQUANT_SDK_VERSION;
#endif
#if defined(FIXTURE_FINGERPRINT)
constexpr const char* toolchain = "gcc-99/libstdc++-cxx11abi1-debug/x86_64";
#else
constexpr const char* toolchain = MOEQUANT_TOOLCHAIN_FINGERPRINT;
#endif
#if defined(FIXTURE_SMALL_DESCRIPTOR)
constexpr std::uint32_t size = 16;
#else
constexpr std::uint32_t size = sizeof(moequant_plugin_descriptor);
#endif
const moequant_plugin_descriptor descriptor = {size, abi, sdk, toolchain, "fixture_handmade", "1.0.0",
                                               "hand-made descriptor", MOEQUANT_KIND_QUANTIZER, nullptr,
                                               &register_good};
const moequant_plugin_descriptor* entry() noexcept { return &descriptor; }
}  // namespace
#if defined(FIXTURE_GENERATION_V2)
BOOST_DLL_ALIAS_SECTIONED(entry, moequant_plugin_v2, moequant)
#else
BOOST_DLL_ALIAS_SECTIONED(entry, moequant_plugin_v1, moequant)
#endif
#endif
