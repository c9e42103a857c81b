// OutputFormat: how converted experts and pass-through tensors are laid out on disk (first
// draft).
//
// A format creates an OutputWriter for one conversion. The host calls write_layer() once per
// MoE layer with every quantized (expert, projection, part), in any layer order when resuming,
// then write_passthrough() for the tensors the plan keeps, then finish(). Writers write files
// through OutputFile / SafetensorsWriter so nothing half-written carries a final name.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/options.hpp>
#include <moequant/quantizer.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

struct QuantizedExpert {
    std::int64_t expert = 0;
    Projection projection = Projection::gate;
    int part = 0;  // NUMA part (0 when the format does not split)
    QuantizedTensor tensor;
};

struct OutputContext {
    std::filesystem::path directory;     // output folder (exists)
    const Checkpoint* source = nullptr;  // the input checkpoint
    const ModelPlan* plan = nullptr;
    std::string quantizer;               // quantizer object id
    Options options;
};

class MOEQUANT_API OutputWriter {
public:
    virtual ~OutputWriter();
    virtual void write_layer(std::int64_t layer, const std::vector<QuantizedExpert>& experts) = 0;
    virtual void write_passthrough(const std::vector<std::string>& tensors) = 0;
    // Completes the output (index last). Without it the output is not complete.
    virtual void finish() = 0;
};

class MOEQUANT_API OutputFormat {
public:
    virtual ~OutputFormat();

    // Object id, e.g. "kt-safetensors" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;

    // How many parts each expert matrix is split into (NUMA parts); 1 = no split.
    virtual int parts(const Options& options) const { return 1; }

    virtual std::unique_ptr<OutputWriter> create(const OutputContext& context) const = 0;
};

}  // namespace moequant
