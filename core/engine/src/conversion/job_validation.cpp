#include "conversion/job_validation.hpp"

#include "calibration/expert_tokens.hpp"

#include <moequant/engine/plugin_registry.hpp>
#include <moequant/engine/source_bound_quantizer.hpp>
#include <moequant/error.hpp>

#include <string>

namespace moequant {

namespace {

// Every routed expert must be of the type the user declared (--input-type): "fp8" covers every
// FP8 flavour, "int4" compressed-tensors and GPTQ words alike.
void check_input_type(const ConversionJob& job) {
    if (!job.input_type) return;
    for (const auto& layer : job.plan->moe_layers)
        for (const auto& e : layer.experts)
            for (const auto& s : e.weights) {
                const EncodedWeight& w = job.source->weight(s.tensor);
                if (w.input_type != *job.input_type)
                    throw Error(ErrorKind::input,
                                "--input-type " + *job.input_type + " was given, but the expert is " + w.input_type +
                                    " (" + w.summary + ")",
                                {.tensor = s.tensor,
                                 .code = "InputTypeMismatch",
                                 .hint = "use --input-type " + w.input_type + ", or leave it out"});
            }
}

// A quantizer that uses calibration needs its data and inputs that fit the plan (and routers,
// when experts see only their routed tokens). Each threadpool part is calibrated on the inputs
// it sees (calibrated_layer.hpp).
void check_calibration(const ConversionJob& job, const Quantizer& quantizer) {
    if (!job.calibration && !job.sequential)
        throw Error(ErrorKind::usage, "quantizer '" + std::string(quantizer.id()) + "' needs calibration data",
                    {.code = "NeedsCalibration",
                     .hint = "give it calibration data (text or recorded MoE inputs), or use a quantizer that needs none"});
    if (job.calibration) {
        job.calibration->check_plan(*job.plan);
        check_routing(*job.calibration, *job.plan, *job.source);
    } else if (job.sequential->routed_only()) {
        check_routers(*job.plan, *job.source);
    }
}

}  // namespace

bool weighs_by_importance(const Quantizer& quantizer, const ModelPlan& plan) {
    if (plan.moe_layers.empty()) return false;
    for (Projection p : expert_projections)
        if (!quantizer.quantizer_for({plan.moe_layers.front().layer, p}).importance()) return false;
    return true;
}

namespace {

// An importance matrix is used through the importance facet of each matrix's quantizer, on its
// own: calibration (GPTQ's Hessians) is another way to learn from inputs.
void check_importance(const ConversionJob& job, const Quantizer* quantizer) {
    const std::string format(job.format->id());
    if (!quantizer || job.plan->moe_layers.empty()) return;  // no expert matrix to weigh
    if (quantizer->calibration())
        throw Error(ErrorKind::usage, "quantizer '" + std::string(quantizer->id()) +
                                          "' calibrates on inputs; it is not combined with the importance matrix given to format '" +
                                          format + "'");
    if (!weighs_by_importance(*quantizer, *job.plan))
        throw Error(ErrorKind::usage, "quantizer '" + std::string(quantizer->id()) +
                                          "' does not weigh columns by importance; the importance matrix given to format '" + format +
                                          "' would be ignored");
}

// Layers kept unquantized must be MoE layers, and are stored whole.
void check_unquantized_layers(const ConversionJob& job) {
    for (std::int64_t layer : job.unquantized_layers)
        if (!job.plan->moe_layer(layer))
            throw Error(ErrorKind::usage, "layer " + std::to_string(layer) + " is not a MoE layer; it has no routed experts to keep");
    if (!job.unquantized_layers.empty() && job.parts != 1)
        throw Error(ErrorKind::usage, "unquantized experts are stored whole, not in " + std::to_string(job.parts) + " parts");
}

// Every expert matrix must split into the threadpool parts, and each part must be a shape the
// quantizer can pack (the first expert stands for all: the plan gives them one shape).
void check_expert_shapes(const ConversionJob& job, const Quantizer& quantizer) {
    if (job.plan->moe_layers.empty()) return;
    const ExpertPlan& e = job.plan->moe_layers.front().experts.front();
    for (Projection p : expert_projections) {
        const auto& s = e.weights[static_cast<int>(p)];
        const std::int64_t split = p == Projection::down ? s.cols : s.rows;
        if (job.parts <= 0 || split % job.parts != 0)
            throw Error(ErrorKind::input,
                        "the expert size " + std::to_string(split) + " is not divisible by " + std::to_string(job.parts) +
                            " threadpool parts",
                        {.tensor = s.tensor, .code = "UnsplittableExpert"});
        const Shape part_shape = p == Projection::down ? Shape{s.rows, s.cols / job.parts} : Shape{s.rows / job.parts, s.cols};
        try {
            quantizer.quantizer_for({job.plan->moe_layers.front().layer, p}).output_layout(part_shape);
        } catch (const Error& err) {
            throw err.with_context({.tensor = s.tensor, .hint = "each of the " + std::to_string(job.parts) + " parts is " +
                                                                 shape_to_string(part_shape)});
        }
    }
}

// A quantizer that carries the stored codes takes each expert matrix whole, as stored: no
// threadpool split, nothing to calibrate.
void check_carried(const ConversionJob& job, const Quantizer& quantizer) {
    const std::string id(quantizer.id());
    if (quantizer.calibration())
        throw Error(ErrorKind::usage, "quantizer '" + id + "' carries the source's stored codes; it has nothing to calibrate");
    if (job.parts != 1)
        throw Error(ErrorKind::usage,
                    "quantizer '" + id + "' carries the source's stored codes whole, not in " + std::to_string(job.parts) +
                        " threadpool parts",
                    {.hint = "use one threadpool part"});
}

// The host binds and checks (one part, no calibration) a carrier through the quantizer's own
// carrier(): one that packs some matrices with carriers must have one itself.
void check_matrix_carriers(const ConversionJob& job, const Quantizer& quantizer) {
    if (quantizer.carrier()) return;
    for (const auto& layer : job.plan->moe_layers)
        for (Projection p : expert_projections)
            if (quantizer.quantizer_for({layer.layer, p}).carrier())
                throw Error(ErrorKind::plugin, "quantizer '" + std::string(quantizer.id()) +
                                                   "' carries stored codes for some expert matrices but has no carrier of its own to bind "
                                                   "them to the source (Quantizer::carrier())");
}

// What the output records of the calibration data: its name, digest and size.
std::string calibration_record(const ConversionJob& job) {
    const std::string label = job.calibration_label.empty() ? std::string() : job.calibration_label + " ";
    if (job.sequential)
        return "text " + label + "(sequential:" + job.sequential->digest() + "), " + std::to_string(job.sequential->samples()) +
               " samples, " + std::to_string(job.sequential->tokens()) + " tokens, " +
               (job.sequential->routed_only() ? "experts see their routed tokens" : "every expert sees all tokens");
    const SafetensorsFile& f = job.calibration->file();
    return "activations " + label + "(" + std::to_string(f.file_size()) + ":" + f.header_digest() + "), " +
           std::to_string(job.calibration->samples()) + " samples, " + std::to_string(job.calibration->tokens()) + " tokens, " +
           (job.calibration->routed_only() ? "experts see their routed tokens" : "every expert sees all tokens");
}

}  // namespace

CheckedJob validate_job(const ConversionJob& job) {
    if (!job.source || !job.config || !job.plan || !job.format)
        throw Error(ErrorKind::internal, "incomplete conversion job");
    if (job.format->needs_quantizer() && !job.quantizer)
        throw Error(ErrorKind::usage, "format '" + std::string(job.format->id()) + "' needs a quantizer");
    check_input_type(job);
    CheckedJob checked;
    OutputContext& context = checked.context;
    context.directory = job.output;
    context.source = job.source;
    context.config = job.config;
    context.plan = job.plan;
    context.parts = job.parts;
    context.options = job.format_options;
    context.unquantized_layers = job.unquantized_layers;
    if (job.quantizer) {
        // The format's word on the layout comes first; the job's own options are set over it.
        Options options = job.format->quantizer_options(context);
        for (const auto& [key, value] : job.quantizer_options.items()) options.set(key, value);
        checked.configured = configured_quantizer(*job.quantizer, options);  // bad options fail here
        checked.configured = source_bound_quantizer(checked.configured, *job.source, *job.plan);
    }
    checked.quantizer = checked.configured.get();
    if (checked.quantizer) check_matrix_carriers(job, *checked.quantizer);
    if (checked.quantizer && checked.quantizer->carrier()) check_carried(job, *checked.quantizer);
    // A quantizer learns from calibration data through its calibration facet (GPTQ), or, given
    // the data, through its importance facet with the importance measured on it.
    const bool measures_importance = checked.quantizer && !checked.quantizer->calibration() && (job.calibration || job.sequential) &&
                                     weighs_by_importance(*checked.quantizer, *job.plan);
    if (checked.quantizer && (checked.quantizer->calibration() || measures_importance)) {
        check_calibration(job, *checked.quantizer);
        context.calibration = calibration_record(job);
    }
    context.quantizer = checked.quantizer;
    check_unquantized_layers(job);
    job.format->check(context);
    if (checked.quantizer) check_expert_shapes(job, *checked.quantizer);
    checked.importance = job.format->expert_importance(context);
    if (checked.importance && measures_importance)
        throw Error(ErrorKind::usage, "format '" + std::string(job.format->id()) +
                                          "' was given an importance matrix, and calibration data would measure another one",
                    {.hint = "give one of them"});
    if (checked.importance) check_importance(job, checked.quantizer);
    return checked;
}

}  // namespace moequant
