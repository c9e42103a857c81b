#include <moequant/digest.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/safetensors_writer.hpp>
#include <moequant/sequential_calibration.hpp>

#include <cstring>
#include <numeric>

namespace moequant {

namespace fs = std::filesystem;

struct SequentialCalibration::State {
    const DecoderForward& forward;
    const ModelPlan& plan;
    std::vector<std::int64_t> lengths;
    std::vector<float> x;              // hidden states entering layer `next`
    std::int64_t next = 0;             // the next layer whose attention half has not run
    std::unique_ptr<DecoderLayerForward> layer;  // the current layer (attention half done)
    std::vector<float> mlp_input;      // its MLP block's input
    fs::path scratch;
    std::optional<CalibrationActivations> current;
    fs::path current_file;
    std::optional<SafetensorsWriter> saved;
    bool routed_only = false;
    std::string digest;

    State(const DecoderForward& f, const ModelPlan& p) : forward(f), plan(p) {}

    bool is_moe(std::int64_t layer) const {
        for (const auto& l : plan.moe_layers)
            if (l.layer == layer) return true;
        return false;
    }
    // Runs layer `next`'s attention half.
    void attend() {
        layer = forward.layer(next);
        mlp_input = layer->attention(x, lengths);
    }
    // Finishes the current layer's MLP half and moves to the next layer.
    void complete(const ExpertMatrices& experts) {
        layer->mlp(mlp_input, x, experts, nullptr);
        layer.reset();
        mlp_input.clear();
        ++next;
    }
    void drop_current() {
        current.reset();
        if (!current_file.empty()) {
            std::error_code ec;
            fs::remove(current_file, ec);
            current_file.clear();
        }
    }
};

SequentialCalibration::SequentialCalibration(const DecoderForward& forward, const ModelPlan& plan,
                                             std::vector<std::vector<std::int32_t>> samples, fs::path scratch,
                                             std::optional<fs::path> save_activations, bool routed_only)
    : state_(std::make_unique<State>(forward, plan)) {
    State& s = *state_;
    if (samples.empty()) throw Error(ErrorKind::input, "no calibration samples", {.code = "BadDataset"});
    std::vector<std::int32_t> ids;
    Digest64 digest;
    for (auto& sample : samples) {
        s.lengths.push_back(static_cast<std::int64_t>(sample.size()));
        ids.insert(ids.end(), sample.begin(), sample.end());
        digest.update(std::to_string(sample.size()) + ":");
        digest.update(std::as_bytes(std::span(sample)));
    }
    s.digest = digest.hex();
    s.x = forward.embed(ids);
    s.scratch = std::move(scratch);
    s.routed_only = routed_only;
    fs::create_directories(s.scratch);
    if (save_activations) {
        std::vector<TensorSpec> specs{{"sample_lengths", DType::I64, {static_cast<std::int64_t>(s.lengths.size())}}};
        for (const auto& l : plan.moe_layers)
            specs.push_back({CalibrationActivations::tensor_name(l.layer), DType::BF16, {tokens(), plan.hidden_size}});
        s.saved.emplace(*save_activations, std::move(specs));
        s.saved->write("sample_lengths", std::as_bytes(std::span(s.lengths)));
    }
}

SequentialCalibration::~SequentialCalibration() {
    if (state_) state_->drop_current();
}

bool SequentialCalibration::routed_only() const noexcept { return state_->routed_only; }
const std::string& SequentialCalibration::digest() const noexcept { return state_->digest; }

std::int64_t SequentialCalibration::samples() const noexcept { return static_cast<std::int64_t>(state_->lengths.size()); }

std::int64_t SequentialCalibration::tokens() const noexcept {
    return std::accumulate(state_->lengths.begin(), state_->lengths.end(), std::int64_t{0});
}

const CalibrationActivations& SequentialCalibration::layer_inputs(std::int64_t layer) {
    State& s = *state_;
    if (layer < s.next || (s.layer && layer != s.next))
        throw Error(ErrorKind::internal, "sequential calibration asked for layer " + std::to_string(layer) + " out of order");
    s.drop_current();
    while (s.next < layer) {  // layers before it: dense, or MoE layers quantized earlier were finished
        if (s.is_moe(s.next))
            throw Error(ErrorKind::internal, "MoE layer " + std::to_string(s.next) + " was not finished");
        s.attend();
        s.complete({});
    }
    if (!s.layer) s.attend();
    // The inputs as a recorded-activation file, so the calibrated layer reads them as usual.
    const std::int64_t t = tokens(), h = s.plan.hidden_size;
    s.current_file = s.scratch / ("layer-" + std::to_string(layer) + ".safetensors");
    SafetensorsWriter writer(s.current_file, {{"sample_lengths", DType::I64, {static_cast<std::int64_t>(s.lengths.size())}},
                                              {CalibrationActivations::tensor_name(layer), DType::F32, {t, h}}});
    writer.write("sample_lengths", std::as_bytes(std::span(s.lengths)));
    writer.write(CalibrationActivations::tensor_name(layer), std::as_bytes(std::span(s.mlp_input)));
    writer.finish();
    if (s.saved) {
        std::vector<std::uint16_t> bf16(s.mlp_input.size());
        convert_f32_to_bf16(s.mlp_input.data(), bf16.data(), bf16.size());
        s.saved->write(CalibrationActivations::tensor_name(layer), std::as_bytes(std::span(bf16)));
    }
    s.current.emplace(CalibrationActivations::open(s.current_file));
    s.current->set_routed_only(s.routed_only);
    return *s.current;
}

void SequentialCalibration::finish_layer(std::int64_t layer, const ExpertMatrices& quantized) {
    State& s = *state_;
    if (!s.layer || layer != s.next) throw Error(ErrorKind::internal, "finish_layer for a layer that is not current");
    s.drop_current();
    s.complete(quantized);
}

void SequentialCalibration::finish() {
    if (state_->saved) {
        state_->saved->finish();
        state_->saved.reset();
    }
}

}  // namespace moequant
