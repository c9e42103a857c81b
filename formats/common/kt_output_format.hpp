// kt-kernel's two output formats (kt-safetensors, kt-tree) as one format class, told apart by
// their names, writer and reader: each needs a quantizer and stores the experts as bias-free
// SwiGLU matrices, so gpt-oss's expert biases are refused before anything is written. Format
// option backward_weights (convert --save-backward-weights) asks for kt's backward weights too,
// which the quantizer must make. Header-only.
#pragma once

#include "expert_tensors.hpp"
#include "kt_naming.hpp"
#include "writer_format.hpp"

#include <moequant/error.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace moequant::formats {

template <class Writer>
class KtOutputFormat final : public WriterFormat<Writer> {
public:
    using Opener = std::unique_ptr<OutputReader> (*)(const std::filesystem::path& directory);
    KtOutputFormat(std::string_view id, std::string_view description, Opener open)
        : id_(id), description_(description), open_(open) {}

    std::string_view id() const override { return id_; }
    std::string_view description() const override { return description_; }
    void check(const OutputContext& context) const override {
        OutputFormat::check(context);
        if (!context.quantizer) throw Error(ErrorKind::usage, id_ + " needs a quantizer");
        refuse_extra_expert_tensors(context, id_);  // gpt-oss's expert biases have no place in kt's format
        if (backward_weights_requested(context)) check_backward_weights(context);
        if (!kt_splits_threadpools(*context.quantizer)) check_unsplit(context);
    }
    std::unique_ptr<OutputReader> open(const std::filesystem::path& directory) const override { return open_(directory); }

private:
    // The quantizer must return backward parts for every projection (the amx quantizers do when
    // configured with backward_weights); kt-kernel has SFT methods for AMXINT4/AMXINT8 only.
    void check_backward_weights(const OutputContext& context) const {
        if (!context.plan || context.plan->moe_layers.empty()) return;
        const MoeLayerPlan& layer = context.plan->moe_layers.front();
        for (Projection p : expert_projections) {
            const ExpertWeightSource& source = layer.experts.front().weights[static_cast<int>(p)];
            bool backward = false;
            for (const auto& spec : context.quantizer->quantizer_for({layer.layer, p}).output_layout(part_shape(source, p, context.parts)))
                backward = backward || kt_part_name(spec.name).backward;
            if (!backward)
                throw Error(ErrorKind::usage,
                            "quantizer '" + std::string(context.quantizer->id()) + "' makes no backward weights for " + id_,
                            {.code = "NoBackwardWeights",
                             .hint = "kt-kernel's SFT backward weights exist for --quant-method int4 and int8 (amx-int4, amx-int8)"});
        }
    }

    // A method whose matrices stay whole (kt's awq) has names only in the merged safetensors
    // (Writer::names_unsplit_parts): kt's converter writes no .kt files for it.
    void check_unsplit(const OutputContext& context) const {
        const std::string method = context.quantizer->published_name("kt.method");
        if (!Writer::names_unsplit_parts)
            throw Error(ErrorKind::usage, id_ + " has no files for kt's " + method + " method: kt-kernel's converter writes none for it",
                        {.code = "NoTreeForMethod", .hint = "leave out --no-merge-safetensor (format kt-safetensors)"});
        if (context.parts != 1)
            throw Error(ErrorKind::usage, "kt's " + method + " method stores each expert matrix whole, not in " +
                                              std::to_string(context.parts) + " threadpool parts");
    }

    std::string id_, description_;
    Opener open_;
};

}  // namespace moequant::formats
