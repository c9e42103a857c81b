#include <moequant/checked_math.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/error.hpp>

#include <cstring>

namespace moequant {

std::string CalibrationActivations::tensor_name(std::int64_t layer) {
    return "layers." + std::to_string(layer) + ".moe_input";
}

CalibrationActivations CalibrationActivations::open(const std::filesystem::path& path) {
    CalibrationActivations a(SafetensorsFile::open(path));
    const std::string file = path.string();
    const TensorInfo* lengths = a.file_.find("sample_lengths");
    if (!lengths)
        throw Error(ErrorKind::input, "holds no sample_lengths tensor (I64 [num_samples], conventions.md §4)",
                    {.file = file, .tensor = "sample_lengths", .code = "MissingTensor"});
    if (lengths->dtype != DType::I64 || lengths->shape.size() != 1 || lengths->shape[0] <= 0)
        throw Error(ErrorKind::input,
                    "must be I64 [num_samples] with at least one sample, not " + std::string(dtype_name(lengths->dtype)) + " " +
                        shape_to_string(lengths->shape),
                    {.file = file, .tensor = "sample_lengths", .code = "BadCalibration"});
    const TensorView view = a.file_.view(*lengths);
    a.lengths_.resize(static_cast<std::size_t>(lengths->shape[0]));
    std::memcpy(a.lengths_.data(), view.data(), view.size_bytes());
    for (std::int64_t n : a.lengths_) {
        if (n < 0)
            throw Error(ErrorKind::input, "holds a negative length " + std::to_string(n),
                        {.file = file, .tensor = "sample_lengths", .code = "BadCalibration"});
        a.stored_tokens_ = checked_add(a.stored_tokens_, n, "the sum of sample_lengths", {.file = file, .tensor = "sample_lengths"});
    }
    if (a.stored_tokens_ <= 0)
        throw Error(ErrorKind::input, "the samples hold no tokens", {.file = file, .tensor = "sample_lengths", .code = "BadCalibration"});
    for (const TensorInfo& t : a.file_.tensors()) {
        if (!t.name.ends_with(".moe_input")) continue;
        if ((t.dtype != DType::BF16 && t.dtype != DType::F32) || t.shape.size() != 2 || t.shape[0] != a.stored_tokens_)
            throw Error(ErrorKind::input,
                        "must be BF16 or F32 [" + std::to_string(a.stored_tokens_) + ", hidden] (the sum of sample_lengths), not " +
                            std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape),
                        {.file = file, .tensor = t.name, .code = "BadCalibration"});
    }
    a.select(0, 0);
    return a;
}

void CalibrationActivations::select(std::int64_t max_samples, std::int64_t max_tokens) {
    ranges_.clear();
    samples_ = tokens_ = 0;
    std::int64_t at = 0;
    for (std::int64_t length : lengths_) {
        if (max_samples > 0 && samples_ == max_samples) break;
        const std::int64_t used = max_tokens > 0 ? std::min(length, max_tokens) : length;
        if (used > 0) {
            if (!ranges_.empty() && ranges_.back().second == at)
                ranges_.back().second = at + used;
            else
                ranges_.emplace_back(at, at + used);
        }
        ++samples_;
        tokens_ += used;
        at += length;
    }
}

void CalibrationActivations::check_plan(const ModelPlan& plan) const {
    for (const auto& layer : plan.moe_layers) {
        const std::string name = tensor_name(layer.layer);
        const TensorInfo* t = file_.find(name);
        if (!t)
            throw Error(ErrorKind::input, "holds no inputs for MoE layer " + std::to_string(layer.layer),
                        {.file = path().string(), .tensor = name, .code = "MissingTensor",
                         .hint = "record the hidden states entering every MoE block"});
        if (t->shape[1] != plan.hidden_size)
            throw Error(ErrorKind::input,
                        "has width " + std::to_string(t->shape[1]) + ", but the model's hidden_size is " +
                            std::to_string(plan.hidden_size),
                        {.file = path().string(), .tensor = name, .code = "BadCalibration"});
    }
}

TensorView CalibrationActivations::layer_inputs(std::int64_t layer) const { return file_.view(tensor_name(layer)); }

void CalibrationActivations::release_layer(std::int64_t layer) const noexcept {
    if (const TensorInfo* t = file_.find(tensor_name(layer))) file_.release_pages(*t);
}

}  // namespace moequant
