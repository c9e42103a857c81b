// `moequant gptq` (alias `gpu`): the routed experts quantized for the GPU with GPTQ or RTN
// (W4A16 / W8A16) into a compressed-tensors checkpoint vLLM and SGLang load as it is. The
// flags follow kt-kernel's convert_gpu_weights.py (llm-compressor) where they make sense here;
// calibration comes from text (--dataset, run through the family's decoder forward) or from
// recorded MoE inputs (--calibration-activations).

#include "calibration_inputs.hpp"
#include "command.hpp"
#include "command_line.hpp"
#include "conversion_run.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "seed_gpu_options.hpp"
#include "text_calibration.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/conversion.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <iostream>
#include <regex>
#include <set>

namespace moequant::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// A regex for every expert module of the layer `module` (an expert's module name) sits in.
std::string experts_regex(const std::string& module) {
    std::string escaped;
    for (char c : module.substr(0, module.rfind(".experts.") + 8)) {
        if (c == '.') escaped += '\\';
        escaped += c;
    }
    return escaped + "\\..*";
}

// --ignore_patterns: llm-compressor's syntax, "re:<regex>" (matched against the whole module
// name) or an exact module name. Every non-expert Linear is already left unquantized. Patterns
// that select routed experts must select whole MoE layers — every expert and projection — since
// vLLM and SGLang pick one method per MoE layer (from expert 0's three projections); those
// layers' experts are written in BF16 and listed in `ignore`. Anything partial is refused.
// Returns the MoE layers whose experts the patterns select.
std::set<std::int64_t> unquantized_layers(const std::vector<std::string>& patterns, const ModelPlan& plan) {
    std::vector<std::pair<std::string, std::optional<std::regex>>> matchers;
    for (const auto& pattern : patterns) {
        std::optional<std::regex> re;
        if (pattern.starts_with("re:")) {
            try {
                re.emplace(pattern.substr(3));
            } catch (const std::regex_error& e) {
                throw_usage_error("--ignore_patterns '" + pattern + "' is not a valid regular expression: " + e.what());
            }
        }
        matchers.emplace_back(pattern, std::move(re));
    }
    auto selecting = [&](const std::string& module) -> const std::string* {
        for (const auto& [pattern, re] : matchers)
            if (re ? std::regex_match(module, *re) : module == pattern) return &pattern;
        return nullptr;
    };
    std::set<std::int64_t> layers;
    for (const auto& layer : plan.moe_layers) {
        const std::string* first_pattern = nullptr;
        std::string kept_module, quantized_module;
        for (const auto& expert : layer.experts)
            for (Projection p : expert_projections) {
                const std::string module = expert_module_name(expert.weights[static_cast<int>(p)], expert.expert, p);
                if (const std::string* pattern = selecting(module)) {
                    if (!first_pattern) first_pattern = pattern;
                    if (kept_module.empty()) kept_module = module;
                } else if (quantized_module.empty()) {
                    quantized_module = module;
                }
            }
        if (!first_pattern) continue;
        if (!quantized_module.empty())
            throw Error(ErrorKind::usage,
                        "--ignore_patterns '" + *first_pattern + "' selects '" + kept_module + "' but not '" + quantized_module +
                            "': routed experts can be left unquantized only a whole MoE layer at a time",
                        {.code = "PartialExpertIgnore",
                         .hint = "vLLM and SGLang use one method for all experts of a layer; select every expert, e.g. \"re:" +
                                 experts_regex(kept_module) + "\""});
        layers.insert(layer.layer);
    }
    if (!layers.empty() && layers.size() == plan.moe_layers.size())
        throw Error(ErrorKind::usage, "--ignore_patterns selects the routed experts of every MoE layer: nothing would be quantized",
                    {.code = "NothingToQuantize"});
    return layers;
}

// With --allow-unaligned, compressed-tensors' rule for in_features that the group size does not
// divide: ceil(K / gs) groups, the last one shorter; said once per such projection, as the
// reference warns (strategy_cdiv).
void warn_about_ragged_groups(const ModelPlan& plan, std::int64_t group) {
    if (plan.moe_layers.empty() || group <= 0) return;
    for (Projection p : expert_projections) {
        const ExpertWeightSource& s = plan.moe_layers.front().experts.front().weights[static_cast<int>(p)];
        if (s.cols % group == 0) continue;
        std::cerr << "moequant: warning: in_features " << s.cols << " of " << printable_name(s.tensor)
                  << " (and the other experts') is not a multiple of group_size " << group << ": "
                  << (s.cols + group - 1) / group << " groups a row, the last of " << s.cols % group
                  << " columns, as compressed-tensors shapes them; vLLM/SGLang's Marlin kernels cannot run them\n";
    }
}

// --group_size: the group sizes vLLM/SGLang's Marlin kernels run (§8: 32, 64, 128 and -1, one
// scale per row), as the quantizer's group_size, or 0 for channel. With --strategy channel only
// -1 (or nothing) agrees.
std::int64_t chosen_group_size(const std::string& text, bool given, const std::string& strategy) {
    std::int64_t group = 0;
    if (text == "32" || text == "64" || text == "128") group = std::stoll(text);
    else if (text != "-1")
        throw_usage_error("--group_size '" + text + "' is not supported",
                          {.code = "BadOption", .hint = "use 32, 64, 128 or -1 (one scale per row): the sizes Marlin runs"});
    if (strategy == "channel") {
        if (given && group) throw_usage_error("--group_size " + text + " conflicts with --strategy channel (one scale per row)");
        return 0;
    }
    return group;
}

// --for kt-rawint4: the one checkpoint kt-kernel's RAWINT4 CPU experts and the GPU both compute
// right (docs/kt-rawint4.md): W4A16, group 32 (the only group kt's default backend runs; 64 and
// 128 run on its avxvnni backend, with a warning), codes -7..7 (its products get -8's sign
// wrong), no g_idx (kt never reads it). An option given with another value contradicts it.
void apply_kt_rawint4(const po::variables_map& given, std::string& quant_type, std::string& group_size,
                      const std::string& strategy, const std::string& actorder) {
    auto conflicts = [&](const char* option, const std::string& value, const std::string& why) {
        throw_usage_error("--for kt-rawint4 conflicts with --" + std::string(option) + " " + value + ": " + why,
                          {.code = "BadOption", .hint = "leave --" + std::string(option) + " out; --for kt-rawint4 sets what kt needs"});
    };
    if (!given["quant_type"].defaulted() && quant_type != "W4A16" && quant_type != "w4a16")
        conflicts("quant_type", quant_type, "kt's RAWINT4 reads 4-bit codes");
    if (strategy == "channel") conflicts("strategy", strategy, "kt's RAWINT4 has no one-scale-per-row mode");
    if (group_size == "-1") conflicts("group_size", group_size, "kt's RAWINT4 has no one-scale-per-row mode");
    if (actorder == "group" || actorder == "dynamic") conflicts("actorder", actorder, "kt never reads weight_g_idx");
    quant_type = "W4A16";
    if (given["group_size"].defaulted()) group_size = "32";
    else if (group_size != "32")
        std::cerr << "moequant: warning: --for kt-rawint4 --group_size " << group_size
                  << ": kt's default RAWINT4 backend (amx) runs group 32 only; serve this folder with KT_RAWINT4_BACKEND=avxvnni\n";
}

// What a gptq command line asks for.
struct GptqRequest : ConversionRequest {
    std::string method = "GPTQ", quant_type = "W8A16", strategy = "group", group_size = "128", actorder = "static", runtime;
    std::vector<std::string> ignore;
    bool allow_unaligned = false;
    SeedGpuOptions seed;
};

constexpr CommandHelp gptq_help{
    "moequant gptq --model_id MODEL --output_dir OUT [--quant_method GPTQ|RTN] [--quant_type W4A16|W8A16]\n"
    "              [--group_size 32|64|128|-1] [--for kt-rawint4]\n"
    "              [--dataset FILE|DIR|ID|embedded | --calibration-activations FILE]",
    "Quantizes the routed experts for the GPU (GPTQ or RTN, llm-compressor's numerics) into a\n"
    "compressed-tensors pack-quantized checkpoint vLLM and SGLang load as it is. Every other\n"
    "tensor is copied (FP8 dequantized to BF16). GPTQ calibrates on text (--dataset: run through\n"
    "the model layer by layer on the CPU, each layer seeing the quantized ones before it) or on\n"
    "recorded MoE inputs: all experts of a layer see all tokens (one shared gate/up Hessian per layer), or\n"
    "with --routed-only the tokens the family's router sends them (an expert that gets none is\n"
    "calibrated on all tokens rather than zeroed).\n"
    "One layer in flight; rerunning the same command continues an interrupted run."};

void add_gptq_options(po::options_description& options, GptqRequest& r) {
    options.add_options()
        ("model_id", po::value(&r.input)->value_name("PATH"), "model folder (a safetensors or pytorch_model.bin index or single file), or a GGUF model file")
        ("input-path,i", po::value(&r.input)->value_name("PATH"), "same as --model_id")
        ("output_dir", po::value(&r.output)->value_name("DIR"), "output folder")
        ("output,o", po::value(&r.output)->value_name("DIR"), "same as --output_dir")
        ("quant_method", po::value(&r.method)->value_name("GPTQ|RTN")->default_value("GPTQ"),
         "GPTQ (needs calibration) or RTN (round to nearest, needs none)")
        ("quant_type", po::value(&r.quant_type)->value_name("W4A16|W8A16")->default_value("W8A16"),
         "int4 or int8 weights, symmetric (W8A16 by default, as kt-kernel's convert_gpu_weights.py)")
        ("group_size", po::value(&r.group_size)->value_name("32|64|128|-1")->default_value("128"),
         "columns per scale (-1: one scale per row); kt-kernel's RAWINT4 CPU experts need 32 on its default backend")
        ("strategy", po::value(&r.strategy)->value_name("group|channel")->default_value("group"),
         "scale per group of columns, or one per row (the older W8A16 preset; same as --group_size -1)")
        ("actorder", po::value(&r.actorder)->value_name("static|group|none")->default_value("static"),
         "GPTQ column order (static: by decreasing Hessian diagonal, no g_idx)")
        ("dampening_frac", po::value(&r.dampening)->default_value(0.1), "GPTQ dampening, relative to mean(diag H)")
        ("for", po::value(&r.runtime)->value_name("kt-rawint4"),
         "also for kt-kernel's RAWINT4 CPU experts: W4A16, group 32 unless --group_size says otherwise, codes -7..7 "
         "(the range its kernels multiply right), no g_idx");
    add_calibration_options(options, r.data);
    options.add_options()
        ("ignore_patterns", po::value(&r.ignore)->multitoken()->value_name("PATTERN..."),
         "modules to leave unquantized (\"re:<regex>\" or a name); non-expert modules always are, "
         "routed experts only a whole MoE layer at a time (written in BF16)")
        ("allow-unaligned", po::bool_switch(&r.allow_unaligned),
         "write shapes vLLM/SGLang's Marlin kernels cannot run (in_features not a multiple of 128 or of the group size: "
         "ceil(K/group) groups, the last one shorter)")
        ("threads", po::value(&r.threads), "worker threads (default: all cores)")
        ("resume-layer", po::value(&r.resume_layer), "redo layers from this one on; earlier ones must be complete")
        ("overwrite", po::bool_switch(&r.overwrite),
         "replace another run's output in the output folder (only what a conversion writes) and a --save-activations file")
        ("allow-non-finite", po::bool_switch(&r.allow_non_finite), "quantize expert weights holding NaN or Inf as they are")
        ("family", po::value(&r.family)->value_name("NAME"), "use this adapter (id, model_type or synth release) instead of detecting it")
        ("dry-run", po::bool_switch(&r.dry_run), "write nothing: print the plan, every output file with its size, whether it fits, the expected peak memory and time")
        ("quiet,q", po::bool_switch(&r.quiet), "no progress output");
    po::options_description seed_options("Accepted for kt-kernel's convert_gpu_weights.py command lines");
    add_seed_gpu_options(seed_options, r.seed);
    options.add(seed_options);
}

// What the command line settles of the quantization.
struct GptqScheme {
    std::string quantizer_id;  // gptq or rtn
    std::int64_t group = 0;    // columns per scale; 0: one scale per row
    bool kt_rawint4 = false;   // --for kt-rawint4: codes -7..7
    std::string name;          // "W4A16 group 32 codes -7..7", as the dry run and the summary say it
    std::vector<std::string> seed_notes;  // the seed flags that have no effect here
};

// The command line's own usage errors, before any plugin loads. --for kt-rawint4 settles
// --quant_type and --group_size in `r`, --max_cpu_memory the calibration's memory limit.
GptqScheme checked_scheme(GptqRequest& r, const po::variables_map& given) {
    if (r.input.empty()) throw_usage_error("gptq needs --model_id", {.hint = "moequant gptq --help"});
    if (r.output.empty()) throw_usage_error("gptq needs --output_dir");
    GptqScheme scheme;
    if (r.method == "GPTQ" || r.method == "gptq")
        scheme.quantizer_id = "gptq";
    else if (r.method == "RTN" || r.method == "rtn")
        scheme.quantizer_id = "rtn";
    else
        throw_usage_error("--quant_method must be GPTQ or RTN, got '" + r.method + "'");
    if (r.strategy != "group" && r.strategy != "channel")
        throw_usage_error("--strategy '" + r.strategy + "' is not supported", {.code = "BadOption", .hint = "use group or channel"});
    scheme.kt_rawint4 = r.runtime == "kt-rawint4";
    if (!r.runtime.empty() && !scheme.kt_rawint4)
        throw_usage_error("--for '" + r.runtime + "' is not supported", {.code = "BadOption", .hint = "use kt-rawint4"});
    if (scheme.kt_rawint4) apply_kt_rawint4(given, r.quant_type, r.group_size, r.strategy, r.actorder);
    scheme.group = chosen_group_size(r.group_size, scheme.kt_rawint4 || !given["group_size"].defaulted(), r.strategy);
    scheme.name = r.quant_type + (scheme.group ? " group " + std::to_string(scheme.group) : " channel") +
                  (scheme.kt_rawint4 ? " codes -7..7" : "");
    scheme.seed_notes = apply_seed_gpu_options(r.seed, r.data);
    check_calibration_options(r.data);
    return scheme;
}

// The installed quantizer and format gptq writes with.
struct GptqPlugins {
    const OutputFormat* format = nullptr;
    const Quantizer* quantizer = nullptr;
    // Whether the quantizer calibrates (GPTQ) is its own to say; calibration data and GPTQ's
    // options go to such a quantizer only.
    bool calibrated = false;
};

GptqPlugins chosen_plugins(const Registry& registry, const std::string& quantizer_id) {
    GptqPlugins chosen{.format = registry.format("compressed-tensors"), .quantizer = registry.quantizer(quantizer_id)};
    if (!chosen.format || !chosen.quantizer)
        throw Error(ErrorKind::plugin,
                    std::string("no installed ") + (chosen.format ? "quantizer '" + quantizer_id + "'" : "format 'compressed-tensors'"),
                    {.hint = "see 'moequant plugins'"});
    chosen.calibrated = chosen.quantizer->calibration() != nullptr;
    return chosen;
}

// The calibration data once the quantizer is known. The seed tool calibrates on a Hub dataset
// by default; offline, the embedded text stands in: returns whether it did.
bool settle_calibration_data(CalibrationInputOptions& data, bool calibrated) {
    const bool embedded_by_default = calibrated && !data.given();
    if (embedded_by_default) data.dataset = "embedded";
    if (!data.save_activations.empty() && !calibrated)
        throw_usage_error("--save-activations records what GPTQ's --dataset calibration computes; RTN computes none");
    return embedded_by_default;
}

ConversionJob gptq_job(const GptqRequest& r, const GptqScheme& scheme, const GptqPlugins& plugins, const PlannedSource& source,
                       const std::set<std::int64_t>& kept_layers) {
    // "gptq" under the alias gpu too: the same job either way.
    ConversionJob job = conversion_job("gptq", r, source, plugins.quantizer, plugins.format);
    job.parts = 1;
    if (!plugins.calibrated) job.input_files = dataset_files(r.data.dataset);  // RTN reads no data, but its output may not hold it
    job.unquantized_layers = kept_layers;
    job.quantizer_options.set("quant_type", r.quant_type);
    job.quantizer_options.set("strategy", scheme.group ? "group" : "channel");
    if (scheme.group) job.quantizer_options.set("group_size", std::to_string(scheme.group));
    if (scheme.kt_rawint4) job.quantizer_options.set("code_range", "symmetric");
    if (plugins.calibrated) {
        job.quantizer_options.set("actorder", r.actorder);
        job.quantizer_options.set("dampening_frac", std::to_string(r.dampening));
    }
    if (r.allow_unaligned) job.format_options.set("allow_unaligned", "true");
    job.format_options.set("torch_dtype", r.seed.torch_dtype);
    return job;
}

}  // namespace

int run_gptq_command(const std::vector<std::string>& args, GlobalOptions globals) {
    GptqRequest request;
    po::options_description options("Options");
    add_gptq_options(options, request);
    const std::optional<po::variables_map> given =
        parse_command(args, options, globals, gptq_help, {"threads", "num_calibration_samples", "max_sequence_length", "max-memory"});
    if (!given) return 0;
    const GptqScheme scheme = checked_scheme(request, *given);
    if (request.threads > 0) set_max_threads(request.threads);

    Registry registry;
    load_plugins(registry, globals);
    const GptqPlugins plugins = chosen_plugins(registry, scheme.quantizer_id);
    const bool embedded_by_default = settle_calibration_data(request.data, plugins.calibrated);

    const PlannedSource source = open_planned_source(registry, request.input, request.family);
    const std::set<std::int64_t> kept_layers = unquantized_layers(request.ignore, source.plan);
    // GPTQ's data: a dataset through the family's forward layer by layer, or recorded inputs.
    std::optional<CalibrationInputs> calibration;
    if (plugins.calibrated) calibration.emplace(registry, source, request.data, request.overwrite, request.dry_run);
    ConversionJob job = gptq_job(request, scheme, plugins, source, kept_layers);
    if (calibration) calibration->attach(job);
    return run_conversion_command({
        .job = job,
        .request = request,
        .method = scheme.quantizer_id + " " + scheme.name,
        .done = "quantized",
        .calibration = calibration ? &*calibration : nullptr,
        .notes = [&](ProgressSink& sink) {
            for (const std::string& note : scheme.seed_notes) sink.note(note);
            if (embedded_by_default)
                std::cerr << "moequant: warning: no --dataset: GPTQ calibrates on the embedded text (a few public-domain paragraphs), "
                             "enough to run but not to calibrate well; real calibration needs real data (--dataset FILE|DIR|owner/name)\n";
            if (request.allow_unaligned) warn_about_ragged_groups(source.plan, scheme.group);
            if (!kept_layers.empty()) {
                std::string layers;
                for (std::int64_t l : kept_layers) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
                sink.note("routed experts kept in BF16 (--ignore_patterns): layer(s) " + layers);
            }
            if (!calibration && request.data.given())
                sink.note("RTN needs no calibration: " +
                          (request.data.activations.empty() ? request.data.dataset : request.data.activations) + " is not used");
        },
    });
}

}  // namespace moequant::cli
