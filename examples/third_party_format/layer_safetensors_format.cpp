// `example-layer-safetensors`: a third-party output format, the template for a new format. It
// writes one safetensors file per MoE layer holding every quantized part of the layer's experts,
// and an index last (layer_safetensors_layout.hpp). What a format owes the host, in order:
//   check()          refuse, before any file is touched, a job the format cannot hold;
//   planned_files()  every file and its exact size, without writing (--dry-run, free-disk check);
//   create()         a writer: one sink per layer (parts arrive from many threads, in any order),
//                    committed whole under its final name; adopt_layer() for an earlier run's
//                    layer; finish() writes the index last, so a folder with it is complete;
//   open()           a reader of its own outputs, whoever wrote them, for `moequant verify`.
// Files are written through the SDK's SafetensorsWriter / OutputFile: under a partial name,
// renamed when complete, removed when the run fails.

#include "layer_safetensors_layout.hpp"
#include "layer_safetensors_reader.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>
#include <moequant/safetensors_writer.hpp>

#include <mutex>
#include <set>

namespace example_layer_safetensors {
namespace {

using namespace moequant;
namespace fs = std::filesystem;

const MoeLayerPlan& moe_layer(const ModelPlan& plan, std::int64_t layer) {
    const MoeLayerPlan* found = plan.moe_layer(layer);
    if (!found) throw Error(ErrorKind::internal, "layer " + std::to_string(layer) + " holds no routed experts");
    return *found;
}

// Every tensor of a layer's file: the quantizer's parts of each (expert, projection, part).
std::vector<TensorSpec> layer_tensors(const OutputContext& c, std::int64_t layer) {
    std::vector<TensorSpec> tensors;
    for (const ExpertPlan& e : moe_layer(*c.plan, layer).experts)
        for (Projection p : expert_projections)
            for (int part = 0; part < c.parts; ++part)
                for (TensorSpec spec :
                     c.quantizer->quantizer_for({layer, p}).output_layout(part_shape(e.weights[static_cast<int>(p)], p, c.parts))) {
                    spec.name = part_tensor_prefix(layer, e.expert, p, part) + spec.name;
                    tensors.push_back(std::move(spec));
                }
    return tensors;
}

Metadata layer_metadata(std::int64_t layer) {
    return {{"format", "pt"}, {"example.layer", std::to_string(layer)}};
}

// The index: what verify needs to know without the job (layer_safetensors_layout.hpp).
std::string index_text(const OutputContext& c) {
    std::string text = std::string(index_magic) + "\nquantizer " + std::string(c.quantizer->id()) +
                       "\nparts " + std::to_string(c.parts) + "\nexperts " + std::to_string(c.plan->num_experts) + "\nlayers";
    for (const MoeLayerPlan& layer : c.plan->moe_layers) text += " " + std::to_string(layer.layer);
    text += "\n";
    for (const auto& [key, value] : c.quantizer->settings().items()) text += "setting." + key + " " + value + "\n";
    return text;
}

class LayerSink final : public moequant::LayerSink {
public:
    LayerSink(const OutputContext& c, std::int64_t layer)
        : layer_(layer), writer_(c.directory / layer_file(layer), layer_tensors(c, layer), layer_metadata(layer)) {}

    void write(const QuantizedExpert& q) override {
        const std::string prefix = part_tensor_prefix(layer_, q.expert, q.projection, q.part);
        std::lock_guard lock(mutex_);  // SafetensorsWriter is one file, written by one thread at a time
        for (const auto& [name, tensor] : q.tensor.parts) writer_.write(prefix + name, tensor.bytes());
    }

    std::vector<WrittenFile> commit() override {
        writer_.finish();  // refuses a tensor that never arrived
        return {{layer_file(layer_), writer_.file_size(), file_digest(writer_.path())}};
    }

private:
    std::int64_t layer_;
    std::mutex mutex_;
    SafetensorsWriter writer_;
};

class Writer final : public OutputWriter {
public:
    explicit Writer(const OutputContext& c) : c_(c) {}

    std::unique_ptr<moequant::LayerSink> begin_layer(std::int64_t layer) override {
        return std::make_unique<LayerSink>(c_, layer);
    }
    std::vector<std::string> layer_files(std::int64_t layer) const override { return {layer_file(layer)}; }
    void adopt_layer(std::int64_t) override {}  // its file is already in place under its final name

    std::vector<WrittenFile> finish() override {
        const std::string text = index_text(c_);
        OutputFile index(c_.directory / index_file, text.size());
        index.append(text);
        index.commit();
        return {{std::string(index_file), text.size(), digest_hex(std::as_bytes(std::span(text)))}};
    }

private:
    OutputContext c_;
};

class Format final : public OutputFormat {
public:
    std::string_view id() const override { return format_id; }
    std::string_view description() const override {
        return "example: one safetensors file of quantized expert parts per MoE layer, and an index";
    }

    void check(const OutputContext& c) const override {
        OutputFormat::check(c);  // refuses experts kept unquantized
        if (!c.quantizer) throw Error(ErrorKind::usage, std::string(format_id) + " needs a quantizer");
        // Expert tensors that are no gate/up/down matrix (gpt-oss's biases) would be dropped.
        std::set<std::string> planned;
        for (const MoeLayerPlan& layer : c.plan->moe_layers)
            for (const ExpertPlan& e : layer.experts)
                for (const ExpertWeightSource& w : e.weights) planned.insert(w.tensor);
        for (const auto& [name, role] : c.plan->roles) {
            if (role != TensorRole::routed_expert) continue;
            const EncodedWeight* weight = c.source->weight_holding(name);
            if (!planned.count(weight ? weight->name : name))
                throw Error(ErrorKind::input, std::string(format_id) + " stores only the experts' gate, up and down matrices",
                            {.tensor = name, .code = "UnsupportedExpertTensors"});
        }
    }

    std::unique_ptr<OutputWriter> create(const OutputContext& c) const override { return std::make_unique<Writer>(c); }

    std::optional<std::vector<PlannedFile>> planned_files(const OutputContext& c) const override {
        std::vector<PlannedFile> files;
        for (const MoeLayerPlan& layer : c.plan->moe_layers)
            files.push_back({layer_file(layer.layer), safetensors_file_size(layer_tensors(c, layer.layer), layer_metadata(layer.layer))});
        files.push_back({std::string(index_file), index_text(c).size()});
        return files;
    }

    std::unique_ptr<OutputReader> open(const fs::path& directory) const override { return open_layer_safetensors(directory); }
};

}  // namespace
}  // namespace example_layer_safetensors

MOEQUANT_PLUGIN("example_layer_safetensors", "1.0.0", MOEQUANT_KIND_FORMAT,
                "example output format: one safetensors file of quantized expert parts per MoE layer") {
    registrar.add(std::make_unique<example_layer_safetensors::Format>());
}
