// `moequant eval`: what a conversion costs end to end. The family's forward runs to the logits
// twice on the same tokens, with the source's routed experts and with the output's quantized
// ones read back and dequantized; perplexity of both, KL(source || quantized) per token, top-1
// agreement and each MoE layer's output error (docs/cli.md, eval, says what each measures).

#include "command.hpp"
#include "compute_dtype_option.hpp"
#include "dry_run_report.hpp"
#include "eval_report.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "report_page.hpp"
#include "option_values.hpp"
#include "scratch_folder.hpp"
#include "text_calibration.hpp"

#include <moequant/digest.hpp>
#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/engine/rank_checks.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/evaluation.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/hybrid_experts.hpp>
#include <moequant/engine/quantized_experts.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <optional>

namespace moequant::cli {

namespace po = boost::program_options;
namespace json = boost::json;

namespace {

namespace fs = std::filesystem;

// Every regular file under `folder`, by content, in path order: an output without a run manifest
// (another tool's) records no digests to compare ranks by.
std::string folder_digest(const fs::path& folder) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    std::string digest;
    for (const auto& f : files) digest += f.lexically_relative(folder).string() + ":" + file_digest(f) + "\n";
    return digest;
}

// What every rank of an eval run must agree on: the source, the token ids, the products, and the
// quantized outputs (their run manifests and indexes, which name every file's digest, each file
// checked against them when it is opened; every file of an output without a manifest) and the
// placement file, by content.
RunManifest eval_identity(const PlannedSource& source, const std::vector<std::vector<std::int32_t>>& samples,
                          const std::string& products, std::uint64_t max_memory, const std::vector<std::string>& inputs) {
    RunManifest m = describe_source(source.checkpoint, source.plan);
    m.command = "eval";
    m.settings = {{"calibration", token_ids_digest(samples)}, {"calibration.products", products}, {"max_memory", std::to_string(max_memory)}};
    for (const auto& input : inputs) {
        if (input.empty()) continue;
        std::string digest;
        for (const fs::path& file : {fs::path(input), fs::path(input) / "moequant-run.json", fs::path(input) / "model.safetensors.index.json"})
            if (std::error_code ec; fs::is_regular_file(file, ec)) digest += file_digest(file);
        if (std::error_code ec; fs::is_directory(input, ec) && !fs::exists(fs::path(input) / "moequant-run.json", ec))
            digest += folder_digest(input);
        m.settings.emplace_back(fs::path(input).filename().string(), digest);
    }
    return m;
}

}  // namespace

int run_eval_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string input, cpu_weights, gpu_weights, placement_file, compute, report_file;
    bool as_json = false, dry_run = false, overwrite_report = false;
    double max_memory_gb = 0;
    TextCalibrationOptions text;
    po::options_description options("Options");
    add_text_dataset_options(options, input, text);
    options.add_options()
        ("cpu-weights", po::value(&cpu_weights)->value_name("KT_OUT"),
         "a convert output (kt-safetensors, kt tree or gguf folder) of the source, or a GGUF model file of it "
         "(llama-quantize's too; a split one by its first part): its experts, dequantized")
        ("gpu-weights", po::value(&gpu_weights)->value_name("CT_OUT"),
         "a gptq output (compressed-tensors) of the source: its experts, dequantized")
        ("placement", po::value(&placement_file)->value_name("FILE"),
         "with both outputs, the hybrid model: moequant plan's placement JSON puts its GPU experts on "
         "--gpu-weights, the rest on --cpu-weights")
        ("max-memory", po::value(&max_memory_gb)->value_name("GB"),
         "bound both models' hidden states in memory (beyond, mapped scratch files) and run the samples in batches that fit")
        ("json", po::bool_switch(&as_json), "print the numbers as one JSON object")
        ("report", po::value(&report_file)->value_name("FILE"),
         "also write the report page: one self-contained HTML file (the numbers, the per-layer errors, the experts' use and coverage)")
        ("overwrite", po::bool_switch(&overwrite_report), "replace an existing --report file")
        ("dry-run", po::bool_switch(&dry_run), "run nothing: print the plan, the expected peak memory and time");
    add_compute_dtype_option(options, compute,
                             "both forwards' matrix products in FP32 (the default: the KL measures the conversion alone) "
                             "or BF16 (FP32 accumulation, oneDNN; faster, with BF16 rounding in both)");
    const std::optional<RunOptions> parsed = parse_text_run_command(
        args, options, globals,
        "moequant eval --model_id MODEL --dataset FILE|embedded [--cpu-weights KT_OUT] [--gpu-weights CT_OUT\n"
        "              [--placement placement.json]]",
        "Runs the model (on the CPU) to its logits twice on the tokenized dataset: with the\n"
        "source's routed experts, and with the quantized ones of the output (dequantized). Prints the\n"
        "perplexity of both, KL(source || quantized) of the next-token distributions (mean and 99th\n"
        "percentile), top-1 agreement, and each MoE layer's relative output error on the source's\n"
        "inputs to it. With both outputs and a placement, the hybrid model. Without an output the\n"
        "quantized model is the source: KL 0. Reads only.");
    if (!parsed) return 0;
    const RunOptions& common = *parsed;
    if (input.empty() || text.dataset.empty())
        throw_usage_error("eval needs --model_id and --dataset FILE (or --dataset embedded)", {.hint = "moequant eval --help"});
    const bool hybrid = !cpu_weights.empty() && !gpu_weights.empty();
    if (hybrid && placement_file.empty())
        throw_usage_error("--cpu-weights with --gpu-weights is the hybrid model: it needs --placement, which experts run on the GPU",
                          {.hint = "moequant plan --output placement.json"});
    if (!hybrid && !placement_file.empty())
        throw_usage_error("--placement needs both --cpu-weights and --gpu-weights (the hybrid model)");
    if (common.threads > 0) set_max_threads(common.threads);
    const std::string products = apply_compute_dtype(compute, ComputeDtype::f32);

    Registry registry;
    load_plugins(registry, globals);
    const PlannedSource source = open_planned_source(registry, input, common.family);
    // Every check of the inputs before any forward work.
    const std::string output = hybrid ? cpu_weights + " and " + gpu_weights : cpu_weights.empty() ? gpu_weights : cpu_weights;
    std::optional<QuantizedExperts> cpu, gpu;
    std::optional<HybridExperts> both;
    if (!cpu_weights.empty()) cpu.emplace(registry, cpu_weights, source.checkpoint, source.plan);
    if (!gpu_weights.empty()) gpu.emplace(registry, gpu_weights, source.checkpoint, source.plan);
    // Each flag takes its side's output: swapped, the hybrid would run each expert on the wrong one.
    auto side = [](const QuantizedExperts& o, const std::string& folder, bool cpu_side) {
        if (!(cpu_side ? o.holds_gpu_experts() : o.holds_cpu_experts())) return;
        throw Error(ErrorKind::input,
                    "is a " + o.format() + " output of " + o.quantizer() + (cpu_side ? " (GPU experts)" : " (kt-kernel's CPU experts)") +
                        ", not the " + (cpu_side ? "CPU" : "GPU") + " side",
                    {.file = folder, .code = "WrongSide",
                     .hint = cpu_side ? "pass it as --gpu-weights" : "pass it as --cpu-weights"});
    };
    if (cpu) side(*cpu, cpu_weights, true);
    if (gpu) side(*gpu, gpu_weights, false);
    if (hybrid) both.emplace(*cpu, *gpu, source.plan, read_gpu_placement(placement_file, source.plan));
    if (!report_file.empty()) {
        CommandInputs inputs{.folders = {source.checkpoint.directory()}};
        for (const std::string& f : {placement_file, text.dataset, cpu_weights, gpu_weights})
            if (!f.empty()) inputs.files.emplace_back(f);
        check_output_file(report_file, inputs, overwrite_report);
    }
    const ReplacementExperts* quantized = both ? static_cast<const ReplacementExperts*>(&*both)
                                          : cpu  ? static_cast<const ReplacementExperts*>(&*cpu)
                                          : gpu  ? static_cast<const ReplacementExperts*>(&*gpu)
                                                 : nullptr;
    std::unique_ptr<DecoderForward> forward;
    try {
        forward = source_decoder_forward(registry, source, source.plan);
    } catch (const Error& e) {
        if (e.code() != "NoForward") throw;
        throw Error(e.kind(), "family '" + source.plan.family + "' has no decoder forward: eval cannot run it",
                    {.file = source.config.source(), .code = "NoForward"});
    }
    CalibrationSamples tokenized = load_text_calibration(registry, source, text);

    const ScratchFolder scratch(scratch_bytes(tokenized.tokens(), source.plan.hidden_size, false, max_memory_gb > 0 ? 2 : 0));
    Cluster& cluster = Cluster::world();  // under mpirun the sample blocks are shared out (docs/cluster.md)
    EvaluationJob job{.forward = forward.get(), .source = &source.checkpoint, .plan = &source.plan,
                      .samples = std::move(tokenized.samples), .quantized = quantized,
                      .scratch = scratch.path(), .max_memory = memory_limit_bytes(max_memory_gb), .cluster = &cluster};
    check_same_job_on_every_rank(
        cluster, [&] { return eval_identity(source, job.samples, products, job.max_memory, {cpu_weights, gpu_weights, placement_file}); },
        source.checkpoint);
    StreamProgress progress(stderr);
    SilentProgress silent;
    std::string experts;
    if (both) experts = "the hybrid of " + std::to_string(both->gpu_experts()) + " GPU (" + gpu->quantizer() + ") and the other CPU (" +
                        cpu->quantizer() + ") experts of " + output;
    else if (quantized) experts = "the " + (cpu ? cpu : gpu)->quantizer() + " experts of " + output;
    const std::string what = quantized ? source.plan.family + " with " + experts : source.plan.family + " against itself";
    if (dry_run) return report_eval_dry_run(job, what);
    if (!common.quiet && cluster.root())
        progress.note("eval: " + what + ", " + std::to_string(job.samples.size()) + " sample(s) of " + text.dataset + "; " + products);
    const EvaluationReport report = run_evaluation(job, common.quiet || !cluster.root() ? static_cast<ProgressSink&>(silent) : progress);
    if (as_json) print_eval_json(report, source.plan);
    else print_eval_text(report, source.plan, what);
    if (!report_file.empty() && cluster.root()) {
        json::object output = eval_json(report, source.plan);
        output["name"] = quantized ? experts : "the source against itself";
        write_report_page(report_file, eval_report_data("moequant eval: " + what, command_line_text("eval", args), output, source.plan,
                                                        hybrid ? placement_file : std::string()));
    }
    note_unmeasured_experts(report, source.plan);
    return 0;
}

}  // namespace moequant::cli
