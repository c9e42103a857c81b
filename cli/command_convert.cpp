// `moequant convert`: the checkpoint's routed experts into kt-kernel's CPU format (or another
// output format), one layer in flight, resumable. The flags mirror kt-kernel's
// convert_cpu_weights.py so existing command lines work unchanged. With --calibrate the codes
// are chosen by GPTQ on calibration data (amx-int4-gptq / amx-int8-gptq), in the same layout.

#include "calibration_coverage_note.hpp"
#include "calibration_inputs.hpp"
#include "cluster_run.hpp"
#include "command.hpp"
#include "dry_run_report.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "option_values.hpp"
#include "saturated_rows_warning.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/conversion.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <algorithm>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;

namespace {

// --input-type must be a type some installed encoding produces (bf16, fp8, int4, mxfp4, ...).
std::string checked_input_type(const Registry& registry, const std::string& value) {
    std::vector<std::string> known;
    for (const auto& e : registry.encodings())
        for (const auto& t : e.object->input_types())
            if (std::find(known.begin(), known.end(), t) == known.end()) known.push_back(t);
    if (std::find(known.begin(), known.end(), value) != known.end()) return value;
    std::string list;
    for (const auto& t : known) list += (list.empty() ? "" : ", ") + t;
    throw_usage_error("--input-type '" + value + "' is no type the installed encodings read (" +
                      (list.empty() ? std::string("none are installed") : list) + ")");
}

}  // namespace

int run_convert_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string input, output, input_type, quant_method = "int4", quantizer_id, format_id, family;
    int parts = 2;
    std::size_t threads = 0, cpuinfer_threads = 0;
    std::int64_t resume_layer = -1;
    bool no_merge = false, overwrite = false, allow_non_finite = false, quiet = false, help = false, calibrate = false;
    bool gpu = false, save_backward_weights = false, profile = false;  // kt-kernel's convert_cpu_weights.py
    bool dry_run = false;
    CalibrationInputOptions data;
    double dampening = 0.1;
    po::options_description options("Options");
    options.add_options()
        ("input-path,i", po::value(&input)->value_name("PATH"), "model folder (a safetensors or pytorch_model.bin index or single file), or an index file")
        ("output,o", po::value(&output)->value_name("DIR"), "output folder")
        ("input-type", po::value(&input_type)->value_name("bf16|fp16|fp32|fp8|int4|int8|mxfp4"),
         "declared dtype of the routed experts; checked against the data (default: taken from the data)")
        ("quant-method", po::value(&quant_method)->value_name("int4|int8")->default_value("int4"),
         "kt-kernel method: int4 = AMXINT4 (amx-int4), int8 = AMXINT8 (amx-int8)")
        ("quantizer", po::value(&quantizer_id)->value_name("ID"), "quantizer object id (overrides --quant-method)")
        ("format", po::value(&format_id)->value_name("ID"),
         "output format: kt-safetensors (default), kt-tree, bf16-safetensors, or a plugin's")
        ("no-merge-safetensor", po::bool_switch(&no_merge), "write the .kt file tree (format kt-tree)")
        ("threadpool-count", po::value(&parts)->default_value(2), "threadpool parts T (kt-kernel's NUMA sub-pools)")
        ("calibrate", po::bool_switch(&calibrate),
         "choose the codes by GPTQ error feedback on calibration data (--dataset or --calibration-activations): "
         "amx-int4-gptq / amx-int8-gptq, the same layout and method in the files")
        ("dampening_frac", po::value(&dampening)->default_value(0.1), "with --calibrate: GPTQ dampening, relative to mean(diag H)");
    add_calibration_options(options, data);
    options.add_options()
        ("cpuinfer-threads", po::value(&cpuinfer_threads), "worker threads for the conversion (default: all cores)")
        ("threads", po::value(&threads), "same as --cpuinfer-threads")
        ("resume-layer", po::value(&resume_layer), "redo layers from this one on; earlier ones must be complete")
        ("overwrite", po::bool_switch(&overwrite),
         "replace another run's output in the output folder (removes only what a conversion writes)")
        ("allow-non-finite", po::bool_switch(&allow_non_finite),
         "convert expert weights holding NaN or Inf as they are (default: refuse them, naming the tensor)")
        ("family", po::value(&family)->value_name("NAME"), "use this adapter (id or model_type) instead of detecting it")
        ("dry-run", po::bool_switch(&dry_run), "write nothing: print the plan, every output file with its size, whether it fits, the expected peak memory and time")
        ("quiet,q", po::bool_switch(&quiet), "no progress output")
        ("help,h", po::bool_switch(&help), "show this help");
    po::options_description seed_options("Of kt-kernel's convert_cpu_weights.py");
    seed_options.add_options()
        ("gpu", po::bool_switch(&gpu), "no effect: moequant converts on the CPU (the seed script never reads it either)")
        ("save-backward-weights", po::bool_switch(&save_backward_weights),
         "kt-kernel's SFT backward weights: not written by moequant (refused)")
        ("profile", po::bool_switch(&profile), "torch profiler trace: moequant has no torch (refused)");
    options.add(seed_options);
    options.add(global_option_group(globals));
    require_positive(parse_command_line(args, options, {}),
                     {"threads", "cpuinfer-threads", "num_calibration_samples", "max_sequence_length", "max-memory"});
    if (help) {
        print_command_help(
            "moequant convert -i MODEL -o OUT [--quant-method int4|int8] [--threadpool-count T] [--no-merge-safetensor]\n"
            "                 [--calibrate --dataset FILE|embedded | --calibration-activations FILE]",
            "Quantizes the routed experts of a BF16, FP16 or FP8 checkpoint into kt-kernel's AMX INT4/INT8\n"
            "layout (merged safetensors, or the .kt tree), one layer in flight; FP8 is dequantized on the\n"
            "CPU with the config's block size. Rerunning the same command continues an interrupted\n"
            "conversion (moequant-run.json) and gives the same bytes as one clean run.\n"
            "--calibrate chooses the codes by GPTQ error feedback on calibration text run through the model\n"
            "layer by layer (--dataset) or on recorded MoE inputs, each row's scale searched on the same\n"
            "data: the bytes stay in kt-kernel's layout, which its runtime loads unchanged.",
            options);
        return 0;
    }
    if (input.empty()) throw_usage_error("convert needs --input-path", {.hint = "moequant convert --help"});
    if (output.empty()) throw_usage_error("convert needs --output");
    if (parts < 1) throw_usage_error("--threadpool-count must be at least 1");
    if (no_merge && !format_id.empty() && format_id != "kt-tree")
        throw_usage_error("--no-merge-safetensor conflicts with --format " + format_id);
    if (format_id.empty()) format_id = no_merge ? "kt-tree" : "kt-safetensors";
    check_calibration_options(data);
    if (calibrate && !data.given())
        throw_usage_error("--calibrate needs calibration data",
                          {.code = "NeedsCalibration", .hint = "pass --dataset FILE (or --dataset embedded) or --calibration-activations FILE"});
    if (!calibrate && data.given())
        throw_usage_error("calibration data is used only with --calibrate", {.hint = "add --calibrate, or leave the data out"});
    if (save_backward_weights)
        throw_usage_error("--save-backward-weights (kt-kernel's transposed SFT backward weights) is not written by moequant",
                          {.hint = "convert with kt-kernel's own script for SFT; moequant writes the inference weights"});
    if (profile)
        throw_usage_error("--profile writes a torch profiler trace, and moequant has no torch",
                          {.hint = "the progress lines give each layer's time; bench/ measures the stages"});
    if (quantizer_id.empty()) {
        if (quant_method == "awq")
            throw_usage_error("--quant-method awq (AWQ checkpoints rewritten column-major) is not supported by moequant");
        if (quant_method == "moe_int4" || quant_method == "moe_int8")
            throw_usage_error("--quant-method " + quant_method + " (kt-kernel's MOE_INT4/MOE_INT8 layout for AMD CPUs) is not supported "
                              "by moequant", {.hint = "int4 and int8 write the AMX layout"});
        if (quant_method != "int4" && quant_method != "int8")
            throw_usage_error("--quant-method must be int4 or int8, got '" + quant_method + "'");
        quantizer_id = "amx-" + quant_method + (calibrate ? "-gptq" : "");
    }
    if (threads == 0) threads = cpuinfer_threads;
    if (threads > 0) set_max_threads(threads);

    Registry registry;
    load_plugins(registry, globals);
    std::optional<std::string> declared;
    if (!input_type.empty()) declared = checked_input_type(registry, input_type);
    const OutputFormat* format = registry.format(format_id);
    if (!format) throw Error(ErrorKind::plugin, "no installed output format '" + format_id + "'", {.hint = "see 'moequant plugins'"});
    const Quantizer* quantizer = nullptr;
    if (format->needs_quantizer()) {
        quantizer = registry.quantizer(quantizer_id);
        if (!quantizer)
            throw Error(ErrorKind::plugin, "no installed quantizer '" + quantizer_id + "'", {.hint = "see 'moequant plugins'"});
    }
    // Whether a quantizer calibrates is its own to say: --calibrate and it must agree.
    const bool calibrating = quantizer && quantizer->calibration();
    if (calibrate && !calibrating)
        throw_usage_error(quantizer ? "quantizer '" + quantizer_id + "' does not calibrate; --calibrate needs one that does"
                                    : "format '" + format_id + "' writes no quantized experts; --calibrate has nothing to calibrate");
    if (calibrating && !calibrate)
        throw_usage_error("quantizer '" + quantizer_id + "' chooses its codes on calibration data",
                          {.code = "NeedsCalibration", .hint = "add --calibrate and --dataset FILE|embedded or --calibration-activations FILE"});

    const PlannedSource source = open_planned_source(registry, input, family);
    const ModelPlan& plan = source.plan;
    // What the adapter wants a user to know (inspect prints the same), before any work.
    for (const auto& w : plan.warnings) std::cerr << "warning: " << printable_text(w) << "\n";

    ConversionJob job;
    job.command = "convert";
    job.source = &source.checkpoint;
    job.config = &source.config;
    job.plan = &plan;
    job.quantizer = quantizer;
    job.format = format;
    job.output = output;
    job.parts = parts;
    job.input_type = declared;
    if (resume_layer >= 0) job.resume_layer = resume_layer;
    job.overwrite = overwrite;
    job.allow_non_finite = allow_non_finite;
    std::optional<CalibrationInputs> calibration;
    if (calibrate) {
        calibration.emplace(registry, source, data, overwrite);
        calibration->attach(job);
        job.quantizer_options.set("dampening_frac", std::to_string(dampening));
    }

    SaturatedRowLog saturated;
    job.saturated_rows = &saturated;
    if (dry_run) return report_dry_run(job, quantizer ? std::string(quantizer->id()) : std::string("no quantizer"));

    StreamProgress progress(stderr);
    SilentProgress silent;
    ProgressSink& sink = quiet || !Cluster::world().root() ? static_cast<ProgressSink&>(silent) : progress;
    if (gpu) sink.note("--gpu: no effect, moequant converts on the CPU");
    if (calibration) calibration->describe(sink, plan);
    job.cluster = &Cluster::world();
    ConversionResult result = run_conversion(job, sink);
    if (calibration) calibration->finish();  // commits --save-activations
    warn_about_saturated_rows_of_every_rank(saturated);
    if (calibration) note_calibration_coverage(output, quiet);
    std::cout << "converted " << result.layers_written << " layer(s)";
    if (result.layers_adopted) std::cout << ", kept " << result.layers_adopted << " completed earlier";
    std::cout << " of " << plan.family << " with " << (quantizer ? quantizer->id() : std::string_view("no quantizer"))
              << " into " << format->id() << " (" << printable_name(output) << "): " << human_bytes(result.input_bytes) << " of experts in, "
              << human_bytes(result.output_bytes) << " written, " << result.seconds << " s" << cluster_traffic(result) << "\n";
    return 0;
}

}  // namespace moequant::cli
