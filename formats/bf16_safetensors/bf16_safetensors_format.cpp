// `bf16-safetensors`: the checkpoint with every FP8 block-scaled weight dequantized to BF16
// (the seed workflow's convert-to-BF16 step, without a GPU). Every tensor keeps its name;
// `*_scale_inv` tensors of FP8 weights are dropped; MTP layers and rotary buffers are not
// copied (conventions.md §4); other dtypes are copied unchanged. One shard per MoE layer (all
// of that layer's tensors), then one shard with everything else, config.json without
// `quantization_config`, tokenizer files, and the index last. Tensors are streamed one at a
// time, so memory stays bounded by the largest tensor.

#include "copied_tensors.hpp"
#include "layer_shard_plan.hpp"
#include "model_config_file.hpp"
#include "written_files.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>
#include <moequant/sharded_writer.hpp>


#include <map>
#include <set>

namespace {

using namespace moequant;
using namespace moequant::formats;
namespace fs = std::filesystem;

class Bf16Writer;

class Bf16LayerSink final : public LayerSink {
public:
    Bf16LayerSink(Bf16Writer& writer, std::int64_t layer) : writer_(writer), layer_(layer) {}
    void write(const QuantizedExpert&) override {
        throw Error(ErrorKind::internal, "bf16-safetensors takes no quantized experts");
    }
    std::vector<WrittenFile> commit() override;

private:
    Bf16Writer& writer_;
    std::int64_t layer_;
};

class Bf16Writer final : public OutputWriter {
public:
    explicit Bf16Writer(const OutputContext& c) : c_(c), sharded_(c.directory) {
        std::set<std::int64_t> moe;
        for (const auto& l : c.plan->moe_layers) moe.insert(l.layer);
        for (const auto& name : copied_tensors(*c.source, *c.plan, [](TensorRole) { return true; })) {
            const std::int64_t layer = layer_of(name);
            (moe.count(layer) ? by_layer_[layer] : rest_).push_back(name);
        }
        shards_ = LayerShardPlan(*c.plan, !rest_.empty());
    }

    std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) override {
        return std::make_unique<Bf16LayerSink>(*this, layer);
    }
    std::vector<std::string> layer_files(std::int64_t layer) const override { return {shards_.layer_shard(layer)}; }
    void adopt_layer(std::int64_t layer) override { sharded_.adopt_shard(shards_.layer_shard(layer)); }

    std::vector<WrittenFile> finish() override {
        std::vector<WrittenFile> written;
        if (!rest_.empty()) written.push_back(write_shard(shards_.other_shard(), rest_));
        write_model_config(*c_.source, c_.directory, std::nullopt);
        written.push_back(describe_written(c_.directory, "config.json"));
        copy_side_files(*c_.source, c_.directory, side_files, written);
        sharded_.write_index();
        written.push_back(describe_written(c_.directory, safetensors_index_name));
        return written;
    }

    std::vector<WrittenFile> write_layer(std::int64_t layer) {
        return {write_shard(shards_.layer_shard(layer), by_layer_[layer])};
    }

    // The files the layers' commits and finish() write, sized from their specs.
    std::vector<PlannedFile> planned() const {
        ShardedSafetensorsPlan shards;
        for (const auto& layer : c_.plan->moe_layers) {
            const auto names = by_layer_.find(layer.layer);
            shards.add_shard(shards_.layer_shard(layer.layer), specs_of(names == by_layer_.end() ? std::vector<std::string>{} : names->second));
        }
        if (!rest_.empty()) shards.add_shard(shards_.other_shard(), specs_of(rest_));
        std::vector<PlannedFile> files = shards.files();
        files.push_back({"config.json", model_config_text(*c_.source, std::nullopt).size()});
        plan_side_files(*c_.source, side_files, files);
        return files;
    }

private:
    static constexpr std::initializer_list<const char*> side_files = {"tokenizer.json", "tokenizer_config.json",
                                                                      "special_tokens_map.json", "generation_config.json"};

    std::vector<TensorSpec> specs_of(const std::vector<std::string>& names) const {
        std::vector<TensorSpec> specs;
        for (const auto& name : names) specs.push_back(copied_spec(*c_.source, name));
        return specs;
    }

    WrittenFile write_shard(const std::string& file, const std::vector<std::string>& names) {
        const std::vector<TensorSpec> specs = specs_of(names);
        SafetensorsWriter writer = sharded_.open_shard(file, specs);
        for (const auto& name : names) write_copied(writer, *c_.source, name);
        writer.finish();
        return describe_written(c_.directory, file);
    }

    OutputContext c_;
    ShardedSafetensorsWriter sharded_;
    std::map<std::int64_t, std::vector<std::string>> by_layer_;
    std::vector<std::string> rest_;
    LayerShardPlan shards_;
};

std::vector<WrittenFile> Bf16LayerSink::commit() { return writer_.write_layer(layer_); }

class Bf16Format final : public OutputFormat {
public:
    std::string_view id() const override { return "bf16-safetensors"; }
    std::string_view description() const override {
        return "the checkpoint in BF16: FP8 block-scaled weights dequantized on the CPU, names kept";
    }
    bool needs_quantizer() const override { return false; }
    std::unique_ptr<OutputWriter> create(const OutputContext& context) const override {
        return std::make_unique<Bf16Writer>(context);
    }
    std::optional<std::vector<PlannedFile>> planned_files(const OutputContext& context) const override {
        return Bf16Writer(context).planned();
    }
};

}  // namespace

MOEQUANT_PLUGIN("bf16_safetensors", "0.1.0", MOEQUANT_KIND_FORMAT, "BF16 export (FP8 dequantized on the CPU)") {
    registrar.add(std::make_unique<Bf16Format>());
}
