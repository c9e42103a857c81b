// `kt-safetensors`: the merged safetensors output kt-kernel's CPU runtime loads
// (kt-cpu-format.md §7). One shard per converted MoE layer holding
// `blk.{L}.ffn_{gate,up,down}_exps.{E}.numa.{i}.{weight,scale}` (1-D I8 codes and F32 row
// scales, the bytes of the `.kt` files), with --save-backward-weights also
// `blk.{L}.ffn_{gate,up,down}_bwd_exps.{E}.numa.{i}.{weight,scale}` (the backward weights, as
// kt's converter merges them), then one shard with every non-expert tensor renamed
// as §7.3 (MTP layers and rotary buffers are never copied), config and tokenizer files, and
// model.safetensors.index.json last. Shard names are fixed by the plan up front, so a resumed
// run never renumbers them. kt's awq method (quantizer kt-awq) names its whole matrices
// `blk.{L}.ffn_{gate,up,down}_exps.{E}.{weight,qzeros,scale}`, without a threadpool part. `__metadata__` records the method, part count, expert count and
// source, which the runtime ignores and `moequant verify` reads.

#include "copied_tensors.hpp"
#include "kt_naming.hpp"
#include "kt_output_format.hpp"
#include "layer_shard_plan.hpp"
#include "kt_safetensors_reader.hpp"
#include "written_files.hpp"

#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>
#include <moequant/sharded_writer.hpp>

#include <algorithm>
#include <map>

namespace {

using namespace moequant;
using namespace moequant::formats;
namespace fs = std::filesystem;

// §7.3: drop every "language_model." (as kt-kernel does on reading), then, for names that start
// with "model.", "model.layers." becomes "blk." and any other "model." is removed. Checkpoints
// without the "model." prefix (DeepSeek-V4) get "layers." -> "blk." as kt's V4 converter writes
// them (model-families-2026.md §4.2); other such names are kept.
std::string kt_rename(std::string name) {
    for (std::size_t p; (p = name.find("language_model.")) != std::string::npos;) name.erase(p, 15);
    if (name.starts_with("layers.")) return name.replace(0, 7, "blk.");
    if (!name.starts_with("model.")) return name;
    for (std::size_t p; (p = name.find("model.layers.")) != std::string::npos;) name.replace(p, 13, "blk.");
    for (std::size_t p; (p = name.find("model.")) != std::string::npos;) name.erase(p, 6);
    return name;
}

// kt-kernel's converter copies exactly these four (kt-cpu-format.md §7.2).
constexpr std::initializer_list<const char*> side_files = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                                           "special_tokens_map.json"};

bool is_copied(TensorRole role) {
    return role != TensorRole::routed_expert && role != TensorRole::routed_expert_scale &&
           role != TensorRole::skipped_mtp && role != TensorRole::skipped_buffer;
}

class KtSafetensorsSink final : public LayerSink {
public:
    KtSafetensorsSink(SafetensorsWriter writer, std::int64_t layer, bool numa, fs::path dir, std::string file)
        : writer_(std::move(writer)), layer_(layer), numa_(numa), dir_(std::move(dir)), file_(std::move(file)) {}

    void write(const QuantizedExpert& q) override {
        for (const auto& [part, tensor] : q.tensor.parts)
            writer_.write(kt_tensor_name(layer_, q.projection, q.expert, q.part, part, numa_), tensor.view());
    }

    std::vector<WrittenFile> commit() override {
        writer_.finish();
        return {describe_written(dir_, file_)};
    }

private:
    SafetensorsWriter writer_;
    std::int64_t layer_;
    bool numa_;  // names with .numa.{i}
    fs::path dir_;
    std::string file_;
};

class KtSafetensorsWriter final : public OutputWriter {
public:
    static constexpr bool names_unsplit_parts = true;  // kt's awq: blk.L.ffn_*_exps.E.{weight,qzeros,scale}
    explicit KtSafetensorsWriter(const OutputContext& c)
        : c_(c), sharded_(c.directory), decodes_encoded_(c.source->container() != "safetensors" && c.source->container() != "pytorch") {
        if (decodes_encoded_) rest_ = copied_tensors(*c.source, *c.plan, is_copied);
        else
            for (const auto& [name, role] : c.plan->roles)
                if (is_copied(role)) rest_.push_back(name);
        shards_ = LayerShardPlan(*c.plan, !rest_.empty());
    }

    std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) override {
        const std::string& file = shards_.layer_shard(layer);
        SafetensorsWriter writer = sharded_.open_shard(file, layer_specs(layer), layer_metadata(layer));
        return std::make_unique<KtSafetensorsSink>(std::move(writer), layer, kt_splits_threadpools(*c_.quantizer), c_.directory, file);
    }

    // The files finish() and every layer's commit() write, sized from their specs.
    std::vector<PlannedFile> planned() const {
        ShardedSafetensorsPlan shards;
        for (const auto& layer : c_.plan->moe_layers)
            shards.add_shard(shards_.layer_shard(layer.layer), layer_specs(layer.layer), layer_metadata(layer.layer));
        if (!rest_.empty()) shards.add_shard(shards_.other_shard(), rest_specs(renamed_rest()));
        std::vector<PlannedFile> files = shards.files();
        plan_side_files(*c_.source, side_files, files);
        return files;
    }

    std::vector<std::string> layer_files(std::int64_t layer) const override { return {shards_.layer_shard(layer)}; }

    void adopt_layer(std::int64_t layer) override { sharded_.adopt_shard(shards_.layer_shard(layer)); }

    std::vector<WrittenFile> finish() override {
        std::vector<WrittenFile> written;
        if (!rest_.empty()) {
            const std::map<std::string, std::string> source_of = renamed_rest();  // new name -> checkpoint name
            SafetensorsWriter writer = sharded_.open_shard(shards_.other_shard(), rest_specs(source_of));
            for (const auto& [renamed, name] : source_of) {
                if (decodes_encoded_) {
                    write_copied(writer, *c_.source, name, {}, renamed);
                    continue;
                }
                writer.write(renamed, c_.source->view(name));  // from the mmap
                c_.source->release_pages(name);                // copied once: need not stay resident
            }
            writer.finish();
            written.push_back(describe_written(c_.directory, shards_.other_shard()));
        }
        copy_side_files(*c_.source, c_.directory, side_files, written);
        sharded_.write_index();
        written.push_back(describe_written(c_.directory, safetensors_index_name));
        return written;
    }

private:
    std::vector<TensorSpec> layer_specs(std::int64_t layer) const {
        std::vector<TensorSpec> specs;
        const bool numa = kt_splits_threadpools(*c_.quantizer);
        for_each_quantized_part(planned_moe_layer(*c_.plan, layer), *c_.quantizer, c_.parts,
                                [&](std::int64_t expert, Projection p, int part, TensorSpec spec) {
                                    spec.name = kt_tensor_name(layer, p, expert, part, spec.name, numa);
                                    specs.push_back(std::move(spec));
                                });
        return specs;
    }

    Metadata layer_metadata(std::int64_t layer) const {
        const MoeLayerPlan& plan = planned_moe_layer(*c_.plan, layer);
        Metadata metadata = default_safetensors_metadata();
        metadata.emplace_back("moequant.method", c_.quantizer->published_name("kt.method"));
        metadata.emplace_back("moequant.quantizer", std::string(c_.quantizer->id()));
        metadata.emplace_back("moequant.parts", std::to_string(c_.parts));
        metadata.emplace_back("moequant.experts", std::to_string(plan.experts.size()));
        metadata.emplace_back("moequant.layer", std::to_string(layer));
        metadata.emplace_back("moequant.source", c_.plan->family + ":" + c_.plan->model_type);
        // A calibrated quantizer's settings and data (the plain ones have none: their files
        // stay as they were).
        const Options settings = c_.quantizer->settings();
        for (const auto& [key, value] : settings.items())
            metadata.emplace_back("moequant.quantizer." + key, value);
        if (!c_.calibration.empty()) metadata.emplace_back("moequant.calibration", c_.calibration);
        return metadata;
    }

    // The other shard's tensors: the checkpoint's, under their kt names.
    std::vector<TensorSpec> rest_specs(const std::map<std::string, std::string>& source_of) const {
        std::vector<TensorSpec> specs;
        for (const auto& [renamed, name] : source_of) {
            if (decodes_encoded_) {
                TensorSpec spec = copied_spec(*c_.source, name);
                spec.name = renamed;
                specs.push_back(std::move(spec));
                continue;
            }
            const TensorInfo& info = c_.source->info(name);
            specs.push_back({renamed, info.dtype, info.shape});
        }
        return specs;
    }

    // The other tensors under their kt names: new name -> checkpoint name.
    std::map<std::string, std::string> renamed_rest() const {
        std::map<std::string, std::string> source_of;
        for (const auto& name : rest_) {
            const std::string renamed = kt_rename(name);
            if (!source_of.emplace(renamed, name).second)
                throw Error(ErrorKind::input, "two tensors get the kt name '" + renamed + "'", {.tensor = name});
        }
        return source_of;
    }

    OutputContext c_;
    ShardedSafetensorsWriter sharded_;
    // A model read from another container (a GGUF) has no release layout to keep: its encoded
    // weights (ggml blocks) are copied decoded to BF16, as bf16-safetensors copies them, where a
    // safetensors release's are copied as stored, as kt's converter does.
    bool decodes_encoded_;
    std::vector<std::string> rest_;
    LayerShardPlan shards_;
};

}  // namespace

MOEQUANT_PLUGIN("kt_safetensors", "0.1.0", MOEQUANT_KIND_FORMAT, "kt-kernel merged safetensors output") {
    registrar.add(std::make_unique<KtOutputFormat<KtSafetensorsWriter>>(
        "kt-safetensors", "kt-kernel merged safetensors: blk.L.ffn_*_exps.E.numa.i.{weight,scale}, one shard per layer",
        open_kt_safetensors));
}
