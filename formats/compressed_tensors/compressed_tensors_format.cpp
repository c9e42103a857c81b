// `compressed-tensors`: the checkpoint vLLM and SGLang load as it is, with the routed experts
// quantized by `gptq` or `rtn` and stored `pack-quantized` (gptq-compressed-tensors.md §6–§7):
// per expert Linear `<module>.weight_packed` I32, `.weight_scale` BF16, `.weight_shape` I64
// (and `.weight_g_idx` with actorder "group"). Every other tensor is copied, FP8 weights
// dequantized to BF16 with their `weight_scale_inv` dropped; MTP layers and rotary buffers are
// not written. One shard per MoE layer (its experts and its other tensors), one shard with
// everything else, config.json with the §7 quantization_config in place of any FP8 one,
// tokenizer and side files, and the index last.
//
// Shapes vLLM/SGLang's Marlin kernels cannot run (§8: N % 64, K % 128, K % group; MoE hidden %
// 128, intermediate % max(64, group)) are refused unless the format option allow_unaligned.

#include "expert_tensors.hpp"
#include "compressed_tensors_reader.hpp"
#include "copied_tensors.hpp"
#include "kt_rawint4_check.hpp"
#include "layer_shard_plan.hpp"
#include "model_config_file.hpp"
#include "quantization_config.hpp"
#include "writer_format.hpp"
#include "written_files.hpp"

#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/plugin.hpp>
#include <moequant/sharded_writer.hpp>

#include <array>
#include <map>
#include <set>

namespace {

using namespace moequant;
using namespace moequant::formats;
namespace fs = std::filesystem;

// The format option torch_dtype (gptq --torch_dtype): every copied floating-point tensor, and
// the experts kept unquantized, in that dtype, but the modules transformers keeps in fp32.
// Absent: copies as stored. Of the families we read, only the DeepSeek-V3 line (Kimi-K2, GLM-4.5
// and its heirs, MiniMax-M2, Nemotron-H) declares any: _keep_in_fp32_modules_strict =
// ["e_score_correction_bias"]; Qwen3-Next, Qwen3-MoE, Mixtral and gpt-oss declare none.
CopyDtype copy_dtype(const Options& options) {
    CopyDtype dtype;
    if (auto name = options.get("torch_dtype")) {
        dtype.floating = torch_dtype_named(*name);
        if (!dtype.floating)
            throw Error(ErrorKind::usage, "torch_dtype must be bfloat16, float16 or float32, got '" + *name + "'", {.code = "BadOption"});
        dtype.kept_in_f32 = {"e_score_correction_bias"};
    }
    return dtype;
}

void refuse_unaligned(const ModelPlan& plan, const Options& settings) {
    if (plan.moe_layers.empty()) return;
    const std::int64_t group = settings.get_int("group_size", 0);
    auto refuse = [](const std::string& tensor, const std::string& why) {
        throw Error(ErrorKind::input, why + ": vLLM/SGLang's Marlin kernels cannot run it",
                    {.tensor = tensor, .code = "UnalignedShape", .hint = "--allow-unaligned writes it anyway"});
    };
    for (const auto& e : plan.moe_layers.front().experts)
        for (Projection p : expert_projections) {
            const ExpertWeightSource& s = e.weights[static_cast<int>(p)];
            if (s.rows % 64 != 0) refuse(s.tensor, "out_features " + std::to_string(s.rows) + " is not a multiple of 64");
            if (s.cols % 128 != 0) refuse(s.tensor, "in_features " + std::to_string(s.cols) + " is not a multiple of 128");
            if (group && s.cols % group != 0)
                refuse(s.tensor, "in_features " + std::to_string(s.cols) + " is not a multiple of the group size");
        }
    const ExpertWeightSource& down = plan.moe_layers.front().experts.front().weights[2];
    const std::int64_t need = std::max<std::int64_t>(64, group);
    if (plan.expert_intermediate_size % need != 0)
        refuse(down.tensor, "the expert intermediate size " + std::to_string(plan.expert_intermediate_size) +
                                " is not a multiple of " + std::to_string(need));
}

class CtWriter;

class CtLayerSink final : public LayerSink {
public:
    CtLayerSink(CtWriter& owner, std::int64_t layer, SafetensorsWriter writer)
        : owner_(owner), layer_(layer), writer_(std::move(writer)) {}
    void write(const QuantizedExpert& q) override;
    std::vector<WrittenFile> commit() override;

private:
    CtWriter& owner_;
    std::int64_t layer_;
    SafetensorsWriter writer_;
};

class CtWriter final : public OutputWriter {
public:
    explicit CtWriter(const OutputContext& c)
        : c_(c), sharded_(c.directory), settings_(c.quantizer->settings()), scheme_(c.quantizer->published_name("ct.scheme")),
          dtype_(copy_dtype(c.options)) {
        std::set<std::int64_t> moe;
        for (const auto& l : c.plan->moe_layers) {
            moe.insert(l.layer);
            for (const auto& e : l.experts)
                for (Projection p : expert_projections)
                    module_[{l.layer, e.expert, p}] = expert_module_name(e.weights[static_cast<int>(p)], e.expert, p);
        }
        auto copied = [](TensorRole r) { return r != TensorRole::routed_expert && r != TensorRole::routed_expert_scale; };
        for (const auto& name : copied_tensors(*c.source, *c.plan, copied)) {
            const std::int64_t layer = layer_of(name);
            (moe.count(layer) ? by_layer_[layer] : rest_).push_back(name);
        }
        shards_ = LayerShardPlan(*c.plan, !rest_.empty());
    }

    std::unique_ptr<LayerSink> begin_layer(std::int64_t layer) override {
        SafetensorsWriter writer = sharded_.open_shard(shards_.layer_shard(layer), layer_specs(layer), layer_metadata(layer));
        return std::make_unique<CtLayerSink>(*this, layer, std::move(writer));
    }

    // The files the layers' commits and finish() write, sized from their specs.
    std::vector<PlannedFile> planned() const {
        ShardedSafetensorsPlan shards;
        for (const auto& layer : c_.plan->moe_layers)
            shards.add_shard(shards_.layer_shard(layer.layer), layer_specs(layer.layer), layer_metadata(layer.layer));
        if (!rest_.empty()) shards.add_shard(shards_.other_shard(), rest_specs());
        std::vector<PlannedFile> files = shards.files();
        files.push_back({"config.json", config_text().size()});
        plan_side_files(*c_.source, side_files, files);
        return files;
    }

    std::vector<TensorSpec> layer_specs(std::int64_t layer) const {
        const MoeLayerPlan& plan = planned_moe_layer(*c_.plan, layer);
        const bool kept = c_.unquantized_layers.count(layer) > 0;
        std::vector<TensorSpec> specs;
        for (const auto& e : plan.experts)
            for (Projection p : expert_projections) {
                const ExpertWeightSource& s = e.weights[static_cast<int>(p)];
                const std::vector<TensorSpec> layout =
                    kept ? std::vector<TensorSpec>{{"weight", kept_dtype(), {s.rows, s.cols}}}
                         : c_.quantizer->quantizer_for({layer, p}).output_layout({s.rows, s.cols});
                for (auto spec : layout) {
                    spec.name = module_.at({layer, e.expert, p}) + "." + spec.name;
                    specs.push_back(std::move(spec));
                }
            }
        for (const auto& name : layer_copies(layer)) specs.push_back(copied_spec(*c_.source, name, dtype_));
        return specs;
    }

    Metadata layer_metadata(std::int64_t layer) const {
        Metadata metadata = default_safetensors_metadata();
        metadata.emplace_back("moequant.method", c_.unquantized_layers.count(layer) ? "BF16" : scheme_);
        metadata.emplace_back("moequant.quantizer", std::string(c_.quantizer->id()));
        metadata.emplace_back("moequant.experts", std::to_string(planned_moe_layer(*c_.plan, layer).experts.size()));
        metadata.emplace_back("moequant.layer", std::to_string(layer));
        metadata.emplace_back("moequant.source", c_.plan->family + ":" + c_.plan->model_type);
        // Codes kept out of the lowest one (gptq --for kt-rawint4): verify holds them to it.
        // quantization_config has no field for it, and the other settings are there.
        if (auto range = settings_.get("code_range")) metadata.emplace_back("moequant.quantizer.code_range", *range);
        return metadata;
    }

    std::vector<std::string> layer_files(std::int64_t layer) const override { return {shards_.layer_shard(layer)}; }
    void adopt_layer(std::int64_t layer) override { sharded_.adopt_shard(shards_.layer_shard(layer)); }

    std::vector<WrittenFile> finish() override {
        std::vector<WrittenFile> written;
        if (!rest_.empty()) {
            SafetensorsWriter writer = sharded_.open_shard(shards_.other_shard(), rest_specs());
            for (const auto& name : rest_) write_copied(writer, *c_.source, name, dtype_);
            writer.finish();
            written.push_back(describe_written(c_.directory, shards_.other_shard()));
        }
        write_file_atomically(c_.directory / "config.json", config_text());
        written.push_back(describe_written(c_.directory, "config.json"));
        copy_side_files(*c_.source, c_.directory, side_files, written);
        sharded_.write_index();
        written.push_back(describe_written(c_.directory, safetensors_index_name));
        return written;
    }

    // The dtype of the experts of a layer kept unquantized (the engine hands them over in BF16).
    DType kept_dtype() const { return dtype_.floating.value_or(DType::BF16); }

    const std::string& module(std::int64_t layer, std::int64_t expert, Projection p) const {
        return module_.at({layer, expert, p});
    }

    // The layer's other tensors (attention, router, shared experts, norms), then the shard.
    std::vector<WrittenFile> commit_layer(std::int64_t layer, SafetensorsWriter& writer) {
        for (const auto& name : layer_copies(layer)) write_copied(writer, *c_.source, name, dtype_);
        writer.finish();
        return {describe_written(c_.directory, shards_.layer_shard(layer))};
    }

private:
    static constexpr std::initializer_list<const char*> side_files = {
        "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json", "chat_template.jinja"};

    // The source's config.json with our quantization_config (and --torch_dtype).
    std::string config_text() const {
        return model_config_text(*c_.source,
                                 quantization_config(settings_, ignored_modules(*c_.plan, *c_.source, unquantized_modules())),
                                 c_.options.get("torch_dtype"));
    }

    std::vector<TensorSpec> rest_specs() const {
        std::vector<TensorSpec> specs;
        for (const auto& name : rest_) specs.push_back(copied_spec(*c_.source, name, dtype_));
        return specs;
    }

    // The layer's copied tensors (attention, router, shared experts, norms).
    const std::vector<std::string>& layer_copies(std::int64_t layer) const {
        static const std::vector<std::string> none;
        const auto it = by_layer_.find(layer);
        return it == by_layer_.end() ? none : it->second;
    }

    // The expert modules of the layers kept unquantized, which `ignore` must list.
    std::vector<std::string> unquantized_modules() const {
        std::vector<std::string> names;
        for (const auto& [key, name] : module_)
            if (c_.unquantized_layers.count(std::get<0>(key))) names.push_back(name);
        return names;
    }

    OutputContext c_;
    ShardedSafetensorsWriter sharded_;
    Options settings_;
    std::string scheme_;  // what the shards record as their method
    std::map<std::tuple<std::int64_t, std::int64_t, Projection>, std::string> module_;
    std::map<std::int64_t, std::vector<std::string>> by_layer_;
    std::vector<std::string> rest_;
    LayerShardPlan shards_;
    CopyDtype dtype_;
};

void CtLayerSink::write(const QuantizedExpert& q) {
    const std::string& module = owner_.module(layer_, q.expert, q.projection);
    for (const auto& [part, tensor] : q.tensor.parts)
        if (q.tensor.unquantized && tensor.dtype() != owner_.kept_dtype())
            writer_.write(module + "." + part, converted_to(tensor.view(), owner_.kept_dtype()).view());
        else
            writer_.write(module + "." + part, tensor.view());
}

std::vector<WrittenFile> CtLayerSink::commit() { return owner_.commit_layer(layer_, writer_); }

class CompressedTensorsFormat final : public WriterFormat<CtWriter> {
public:
    std::string_view id() const override { return "compressed-tensors"; }
    std::string_view description() const override {
        return "compressed-tensors pack-quantized checkpoint (W4A16/W8A16 experts) for vLLM and SGLang";
    }
    void check(const OutputContext& context) const override {  // unquantized_layers are supported
        if (!context.quantizer) throw Error(ErrorKind::usage, "compressed-tensors needs a quantizer");
        if (context.parts != 1)
            throw Error(ErrorKind::usage, "compressed-tensors stores one part per expert matrix, not " + std::to_string(context.parts));
        if (!context.options.get_bool("allow_unaligned", false)) refuse_unaligned(*context.plan, context.quantizer->settings());
        if (context.options.get_bool("backward_weights", false))
            throw Error(ErrorKind::usage, "compressed-tensors has no place for kt-kernel's SFT backward weights",
                        {.hint = "they are written by the kt formats (kt-safetensors, kt-tree)"});
        refuse_extra_expert_tensors(context, id());  // per-expert Linears without biases would drop gpt-oss's
    }
    std::vector<RuntimeCheckInfo> runtime_checks() const override { return {kt_rawint4_check_info()}; }
    std::unique_ptr<OutputReader> open(const fs::path& directory) const override { return open_compressed_tensors(directory); }
};

}  // namespace

MOEQUANT_PLUGIN("compressed_tensors", "0.1.0", MOEQUANT_KIND_FORMAT, "compressed-tensors pack-quantized output (GPU experts)") {
    registrar.add(std::make_unique<CompressedTensorsFormat>());
}
