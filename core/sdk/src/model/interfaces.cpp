// Out-of-line destructors anchor the interfaces' vtables and type_info in the SDK, so host
// and plugins share one copy of each; plus the names of the plan enums.
#include <moequant/checkpoint_reader.hpp>
#include <moequant/decoder_forward.hpp>
#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/source_encoding.hpp>

namespace moequant {

ModelAdapter::~ModelAdapter() = default;
Quantizer::~Quantizer() = default;
PreparedCalibration::~PreparedCalibration() = default;
QuantizerCalibration::~QuantizerCalibration() = default;
StoredCodeCarrier::~StoredCodeCarrier() = default;
QuantizerImportance::~QuantizerImportance() = default;
ExpertImportance::~ExpertImportance() = default;

LayerSink::~LayerSink() = default;
OutputWriter::~OutputWriter() = default;
bool OutputWriter::folds_layer_files() const { return false; }
OutputReader::~OutputReader() = default;
OutputFormat::~OutputFormat() = default;
SourceEncoding::~SourceEncoding() = default;
CheckpointReader::~CheckpointReader() = default;

RuntimeCheckReport OutputReader::run_runtime_check(std::string_view name, const ModelPlan&) const {
    throw Error(ErrorKind::internal, "this output's format has no runtime check '" + std::string(name) + "'");
}

ChatTemplate ModelAdapter::chat_template(const ModelConfig&) const { return plain_chat_template(); }

void ModelAdapter::synthesize(const std::filesystem::path&, const Options&) const {
    throw Error(ErrorKind::usage, "family '" + std::string(id()) + "' cannot synthesize a checkpoint",
                {.code = "NoSynthesis", .hint = "synth a family whose adapter writes synthetic checkpoints"});
}

std::vector<SynthRelease> ModelAdapter::synth_releases() const { return {}; }

std::unique_ptr<DecoderForward> ModelAdapter::decoder_forward(const ModelConfig&, const Checkpoint&, const ModelPlan&) const {
    throw Error(ErrorKind::plugin, "family '" + std::string(id()) + "' has no calibration forward pass",
                {.code = "NoForward", .hint = "record the MoE inputs with an inference engine and pass --calibration-activations"});
}

DecoderLayerForward::~DecoderLayerForward() = default;
DecoderForward::~DecoderForward() = default;

std::vector<float> DecoderForward::logits(std::span<const float>) const {
    throw Error(ErrorKind::plugin, "this decoder forward has no output head (final norm and lm_head)",
                {.code = "NoForward", .hint = "the family's adapter must implement DecoderForward::logits()"});
}

void OutputFormat::check(const OutputContext& context) const {
    if (!context.unquantized_layers.empty())
        throw Error(ErrorKind::usage, "format '" + std::string(id()) + "' cannot keep routed experts unquantized",
                    {.code = "UnquantizedExperts"});
}

std::string expert_module_name(const ExpertWeightSource& source, std::int64_t expert, Projection p) {
    const std::string& t = source.tensor;
    if (!source.slice) return t.ends_with(".weight") ? t.substr(0, t.size() - 7) : t;
    const std::size_t dot = t.rfind('.');  // "<...>.experts.gate_up_proj" -> "<...>.experts"
    return t.substr(0, dot) + "." + std::to_string(expert) + "." + std::string(projection_name(p)) + "_proj";
}

std::string_view projection_name(Projection p) noexcept {
    switch (p) {
        case Projection::gate: return "gate";
        case Projection::up: return "up";
        case Projection::down: return "down";
    }
    return "?";
}

std::string_view expert_layout_name(ExpertLayout layout) noexcept {
    switch (layout) {
        case ExpertLayout::per_expert: return "per-expert";
        case ExpertLayout::fused_linear: return "fused-linear";
        case ExpertLayout::fused_bmm: return "fused-bmm";
    }
    return "?";
}

std::string_view tensor_role_name(TensorRole role) noexcept {
    switch (role) {
        case TensorRole::routed_expert: return "routed_expert";
        case TensorRole::routed_expert_scale: return "routed_expert_scale";
        case TensorRole::router: return "router";
        case TensorRole::router_bias: return "router_bias";
        case TensorRole::shared_expert: return "shared_expert";
        case TensorRole::shared_expert_gate: return "shared_expert_gate";
        case TensorRole::dense_mlp: return "dense_mlp";
        case TensorRole::attention: return "attention";
        case TensorRole::norm: return "norm";
        case TensorRole::embedding: return "embedding";
        case TensorRole::lm_head: return "lm_head";
        case TensorRole::skipped_mtp: return "skipped_mtp";
        case TensorRole::skipped_buffer: return "skipped_buffer";
        case TensorRole::other: return "other";
    }
    return "?";
}

}  // namespace moequant
