// `moequant convert`: the checkpoint's routed experts into kt-kernel's CPU format (or another
// output format), one layer in flight, resumable. The flags mirror kt-kernel's
// convert_cpu_weights.py so existing command lines work unchanged. With --calibrate the codes
// are chosen by GPTQ on calibration data (amx-int4-gptq / amx-int8-gptq / moe-int8-gptq),
// in the same layout.

#include "calibration_inputs.hpp"
#include "command.hpp"
#include "command_line.hpp"
#include "conversion_run.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"

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

// What a convert command line asks for.
struct ConvertRequest : ConversionRequest {
    std::string input_type, quant_method, quantizer_id, format_id;  // quant_method: empty until given
    int parts = 2;
    std::size_t cpuinfer_threads = 0;
    bool no_merge = false, calibrate = false;
    bool gpu = false, save_backward_weights = false, profile = false;  // kt-kernel's convert_cpu_weights.py
    bool backward_weights = false;  // --save-backward-weights asks the quantizer and format for them (not for moe_int8)
    // --format gguf: llama-quantize's options (the preset is --quant-method).
    std::vector<std::string> tensor_types;
    std::string output_tensor_type, token_embedding_type, imatrix;
    bool pure = false, leave_output_tensor = false, legacy_mla = false, gptq = false;
    std::string split_max_size, split_max_tensors;
    bool single_file = false;
    int awq_parts_given = 0;             // --quant-method awq: the --threadpool-count it does not use
    std::string awq_input_type_ignored;  // --quant-method awq: an --input-type other than awq, unused as kt does
};

constexpr CommandHelp convert_help{
    "moequant convert -i MODEL -o OUT [--quant-method int4|int8|moe_int8|awq] [--threadpool-count T] [--no-merge-safetensor]\n"
    "                 [--calibrate --dataset FILE|embedded | --calibration-activations FILE]",
    "Quantizes the routed experts of a BF16, FP16 or FP8 checkpoint into kt-kernel's AMX INT4/INT8\n"
    "or MOE_INT8 layout (merged safetensors, or the .kt tree), one layer in flight; FP8 is dequantized on the\n"
    "CPU with the config's block size. Rerunning the same command continues an interrupted\n"
    "conversion (moequant-run.json) and gives the same bytes as one clean run.\n"
    "--calibrate chooses the codes by GPTQ error feedback on calibration text run through the model\n"
    "layer by layer (--dataset) or on recorded MoE inputs, each row's scale searched on the same\n"
    "data: the bytes stay in kt-kernel's layout, which its runtime loads unchanged.\n"
    "--save-backward-weights adds kt-kernel's SFT backward weights (each part transposed, packed\n"
    "alike) to either layout, byte for byte as its converter writes them.\n"
    "--quant-method awq re-lays an AutoAWQ INT4 checkpoint's codes, zero points and scales into kt's\n"
    "column-major tensors (blk.L.ffn_PROJ_exps.E.{weight,qzeros,scale}) as its converter does, requantizing nothing.\n"
    "--format gguf writes llama.cpp's GGUF with llama-quantize's preset (--quant-method Q4_K_M, ...); its experts weighed by\n"
    "an importance matrix from llama-imatrix (--imatrix FILE) or measured on the way (--calibrate, routed tokens per expert),\n"
    "or with --calibrate --gptq their codes chosen by GPTQ error feedback within those weights' block scales."};

void add_convert_options(po::options_description& options, ConvertRequest& r) {
    options.add_options()
        ("input-path,i", po::value(&r.input)->value_name("PATH"), "model folder (a safetensors or pytorch_model.bin index or single file), an index file, or a GGUF model (its file, or the first part of a split one)")
        ("output,o", po::value(&r.output)->value_name("DIR"), "output folder")
        ("input-type", po::value(&r.input_type)->value_name("bf16|fp16|fp32|fp8|int4|int8|mxfp4|awq"),
         "declared dtype of the routed experts; checked against the data (default: taken from the data)")
        ("quant-method", po::value(&r.quant_method)->value_name("int4|int8|moe_int8|awq"),
         "kt-kernel method (default int4): int4 = AMXINT4 (amx-int4), int8 = AMXINT8 (amx-int8), moe_int8 = MOE_INT8 (moe-int8, "
         "AOCL kernels for CPUs without AMX), awq = an AutoAWQ checkpoint's codes re-laid column-major (kt-awq); "
         "with --format gguf: llama-quantize's preset (Q4_K_M, Q8_0, IQ4_XS, BF16, ...)")
        ("quantizer", po::value(&r.quantizer_id)->value_name("ID"), "quantizer object id (overrides --quant-method)")
        ("format", po::value(&r.format_id)->value_name("ID"),
         "output format: kt-safetensors (default), kt-tree, bf16-safetensors, or a plugin's")
        ("no-merge-safetensor", po::bool_switch(&r.no_merge), "write the .kt file tree (format kt-tree)")
        ("threadpool-count", po::value(&r.parts)->default_value(2), "threadpool parts T (kt-kernel's NUMA sub-pools)")
        ("calibrate", po::bool_switch(&r.calibrate),
         "choose the codes by GPTQ error feedback on calibration data (--dataset or --calibration-activations): "
         "amx-int4-gptq / amx-int8-gptq / moe-int8-gptq, the same layout and method in the files; with --format gguf: "
         "weigh each expert's columns by their mean square over the tokens routed to it (llama-imatrix's importance)")
        ("dampening_frac", po::value(&r.dampening)->default_value(0.1), "with --calibrate: GPTQ dampening, relative to mean(diag H)");
    add_calibration_options(options, r.data);
    options.add_options()
        ("cpuinfer-threads", po::value(&r.cpuinfer_threads), "worker threads for the conversion (default: all cores)")
        ("threads", po::value(&r.threads), "same as --cpuinfer-threads")
        ("resume-layer", po::value(&r.resume_layer), "redo layers from this one on; earlier ones must be complete")
        ("overwrite", po::bool_switch(&r.overwrite),
         "replace another run's output in the output folder (removes only what a conversion writes)")
        ("allow-non-finite", po::bool_switch(&r.allow_non_finite),
         "convert expert weights holding NaN or Inf as they are (default: refuse them, naming the tensor)")
        ("family", po::value(&r.family)->value_name("NAME"), "use this adapter (id, model_type or synth release) instead of detecting it")
        ("dry-run", po::bool_switch(&r.dry_run), "write nothing: print the plan, every output file with its size, whether it fits, the expected peak memory and time")
        ("quiet,q", po::bool_switch(&r.quiet), "no progress output");
    po::options_description gguf_options("With --format gguf (llama-quantize's options; --quant-method takes its presets: Q4_K_M, Q8_0, IQ4_XS, ...)");
    gguf_options.add_options()
        ("tensor-type", po::value(&r.tensor_types)->value_name("PATTERN=TYPE")->composing(),
         "give tensors whose GGUF name matches the regular expression PATTERN the ggml type TYPE (repeatable; the first match wins)")
        ("output-tensor-type", po::value(&r.output_tensor_type)->value_name("TYPE"), "the ggml type of output.weight")
        ("token-embedding-type", po::value(&r.token_embedding_type)->value_name("TYPE"), "the ggml type of token_embd.weight")
        ("pure", po::bool_switch(&r.pure), "no mixture: every quantized tensor in the preset's type")
        ("leave-output-tensor", po::bool_switch(&r.leave_output_tensor), "keep output.weight unquantized")
        ("legacy-mla", po::bool_switch(&r.legacy_mla),
         "DeepSeek: keep attn_kv_b whole, as llama.cpp's converter wrote it before 2025-04 (llama.cpp of that time "
         "loads only this layout; later builds load it without their compressed MLA cache)")
        ("imatrix", po::value(&r.imatrix)->value_name("FILE"),
         "weigh each tensor's rounding errors by llama.cpp's importance matrix FILE (llama-imatrix's GGUF or legacy .dat), "
         "as llama-quantize --imatrix does")
        ("gptq", po::bool_switch(&r.gptq),
         "with --calibrate: choose the experts' codes by GPTQ error feedback on the calibration inputs, within the "
         "block scales ggml's importance-weighted rounding gives them (quantizer gguf-gptq); the types and blocks stay "
         "llama.cpp's own")
        ("split-max-size", po::value(&r.split_max_size)->value_name("N(K|M|G)"),
         "gguf-split parts of at most this much tensor data each (decimal units, as gguf-split), tensors in model order, "
         "instead of one part per MoE layer; the layers' experts are staged and copied into the parts at the end")
        ("split-max-tensors", po::value(&r.split_max_tensors)->value_name("N"), "gguf-split parts of at most N tensors each (staged likewise)")
        ("single-file", po::bool_switch(&r.single_file), "one file, model.gguf (staged likewise)");
    options.add(gguf_options);
    po::options_description seed_options("Of kt-kernel's convert_cpu_weights.py");
    seed_options.add_options()
        ("gpu", po::bool_switch(&r.gpu), "no effect: moequant converts on the CPU (the seed script never reads it either)")
        ("save-backward-weights", po::bool_switch(&r.save_backward_weights),
         "also write kt-kernel's SFT backward weights (int4, int8): each part transposed and packed alike, "
         "as blk.L.ffn_PROJ_bwd_exps tensors (the tree: PREFIX_PROJ_bwd_E_* files); moe_int8: skipped with a "
         "note, as kt does")
        ("profile", po::bool_switch(&r.profile),
         "time the run's steps (decode, quantize, write, calibration) on every thread: two tables, and a Chrome "
         "trace written to OUTPUT/profile_trace.json");
    options.add(seed_options);
}

// kt's awq method (AWQToColumnMajorConverter) re-lays an AutoAWQ checkpoint's words: whatever
// --input-type says, each expert matrix whole (its --threadpool-count is not used), only into
// merged safetensors (with --no-merge-safetensor kt's converter writes no expert at all).
void check_awq_request(ConvertRequest& r) {
    if (r.no_merge)
        throw_usage_error("--quant-method awq has no .kt tree: kt-kernel's converter writes no expert tensors with "
                          "--no-merge-safetensor for it",
                          {.hint = "leave out --no-merge-safetensor"});
    if (r.calibrate) throw_usage_error("--quant-method awq carries the AWQ checkpoint's codes; there is nothing to calibrate");
    r.quantizer_id = "kt-awq";
    r.awq_parts_given = r.parts;
    r.parts = 1;
    r.awq_input_type_ignored = !r.input_type.empty() && r.input_type != "awq" ? r.input_type : std::string();
    if (!r.awq_input_type_ignored.empty()) r.input_type.clear();
}

// --format gguf: --quant-method names llama-quantize's preset (the format checks it), the
// experts go to the `gguf` quantizer in the types the format chooses, each matrix whole.
void check_gguf_request(ConvertRequest& r) {
    if (r.quant_method.empty())
        throw_usage_error("--format gguf needs --quant-method PRESET", {.hint = "e.g. --quant-method Q4_K_M (or Q8_0, IQ4_XS, BF16, ...)"});
    if (r.calibrate && !r.imatrix.empty())
        throw_usage_error("--imatrix gives the importance matrix, and --calibrate would measure another one", {.hint = "give one of them"});
    if (r.gptq && !r.calibrate)
        throw_usage_error("--gptq chooses the codes on calibration data", {.code = "NeedsCalibration", .hint = "add --calibrate and --dataset FILE|embedded"});
    // An importance matrix is measured per expert on the tokens routed to it, as llama-imatrix
    // does; GPTQ's Hessians, whose diagonals give the same weights, likewise.
    if (r.calibrate) r.data.routed_only = true;
    if (r.quantizer_id.empty()) r.quantizer_id = r.gptq ? "gguf-gptq" : "gguf";
    r.parts = 1;
}

// The command line's own usage errors, before any plugin loads; settles the format and the
// quantizer id (from --quant-method and --calibrate) and the thread count.
void check_request(ConvertRequest& r) {
    if (r.input.empty()) throw_usage_error("convert needs --input-path", {.hint = "moequant convert --help"});
    if (r.output.empty()) throw_usage_error("convert needs --output");
    if (r.parts < 1) throw_usage_error("--threadpool-count must be at least 1");
    if (r.no_merge && !r.format_id.empty() && r.format_id != "kt-tree")
        throw_usage_error("--no-merge-safetensor conflicts with --format " + r.format_id);
    if (r.format_id.empty()) r.format_id = r.no_merge ? "kt-tree" : "kt-safetensors";
    check_calibration_options(r.data);
    if (r.calibrate && !r.data.given())
        throw_usage_error("--calibrate needs calibration data",
                          {.code = "NeedsCalibration", .hint = "pass --dataset FILE (or --dataset embedded) or --calibration-activations FILE"});
    if (!r.calibrate && r.data.given())
        throw_usage_error("calibration data is used only with --calibrate", {.hint = "add --calibrate, or leave the data out"});
    // kt's script skips them with a warning for MOE_INT8, which has no SFT method (convert_cpu_weights.py L1064), and
    // never hands them to its awq converter.
    r.backward_weights = r.save_backward_weights && !(r.quantizer_id.empty() && (r.quant_method == "moe_int8" || r.quant_method == "awq"));
    if (r.backward_weights && r.calibrate)
        throw_usage_error("--save-backward-weights has no --calibrate variant: kt-kernel packs the backward weights from "
                          "the source by plain rounding, whatever chose the forward codes",
                          {.hint = "leave out one of them"});
    if (r.format_id == "gguf") check_gguf_request(r);
    else if (!r.tensor_types.empty() || !r.output_tensor_type.empty() || !r.token_embedding_type.empty() || !r.imatrix.empty() ||
             r.pure || r.leave_output_tensor || r.legacy_mla || r.gptq || !r.split_max_size.empty() ||
             !r.split_max_tensors.empty() || r.single_file)
        throw_usage_error("--imatrix, --tensor-type, --output-tensor-type, --token-embedding-type, --pure, "
                          "--leave-output-tensor, --legacy-mla, --gptq, --split-max-size, --split-max-tensors and --single-file are "
                          "options of --format gguf",
                          {.hint = "add --format gguf --quant-method PRESET, or leave them out"});
    if (r.quant_method.empty()) r.quant_method = "int4";
    if (r.quantizer_id.empty() && r.quant_method == "awq") check_awq_request(r);
    if (r.quantizer_id.empty()) {
        if (r.quant_method == "moe_int4")
            throw_usage_error("--quant-method moe_int4: kt-kernel has no MOE_INT4 on x86 (its Int4_KERNEL_MOE is built only for "
                              "ARM with KML, and its converter stops with 'backend not available'; docs/kt-moe-int8.md)",
                              {.hint = "moe_int8 writes kt's MOE_INT8 for CPUs without AMX"});
        if (r.quant_method == "moe_int8") {
            r.quantizer_id = r.calibrate ? "moe-int8-gptq" : "moe-int8";
        } else {
            if (r.quant_method != "int4" && r.quant_method != "int8")
                throw_usage_error("--quant-method must be int4, int8, moe_int8 or awq, got '" + r.quant_method + "'");
            r.quantizer_id = "amx-" + r.quant_method + (r.calibrate ? "-gptq" : "");
        }
    }
    if (r.threads == 0) r.threads = r.cpuinfer_threads;
}

// The installed plugins the request names, checked against it.
struct ConvertPlugins {
    std::optional<std::string> input_type;  // --input-type, known to an installed encoding
    const OutputFormat* format = nullptr;
    const Quantizer* quantizer = nullptr;   // null when the format needs none
};

ConvertPlugins chosen_plugins(const Registry& registry, const ConvertRequest& r) {
    ConvertPlugins chosen;
    if (!r.input_type.empty()) chosen.input_type = checked_input_type(registry, r.input_type);
    chosen.format = registry.format(r.format_id);
    if (!chosen.format) throw Error(ErrorKind::plugin, "no installed output format '" + r.format_id + "'", {.hint = "see 'moequant plugins'"});
    if (chosen.format->needs_quantizer()) {
        chosen.quantizer = registry.quantizer(r.quantizer_id);
        if (!chosen.quantizer)
            throw Error(ErrorKind::plugin, "no installed quantizer '" + r.quantizer_id + "'", {.hint = "see 'moequant plugins'"});
    }
    // The backward weights are parts the quantizer makes: a format without one has none to hold.
    if (r.backward_weights && !chosen.quantizer)
        throw_usage_error("format '" + r.format_id + "' writes no quantized experts; --save-backward-weights has nothing to transpose",
                          {.hint = "use --format kt-safetensors or kt-tree"});
    // Whether a quantizer calibrates is its own to say: --calibrate and it must agree.
    // GPTQ's calibration facet needs the data; an importance facet takes it (the data then measures
    // llama.cpp's imatrix).
    const bool calibrating = chosen.quantizer && chosen.quantizer->calibration();
    if (r.calibrate && !calibrating && !(chosen.quantizer && chosen.quantizer->importance()))
        throw_usage_error(chosen.quantizer ? "quantizer '" + r.quantizer_id + "' does not calibrate; --calibrate needs one that does"
                                           : "format '" + r.format_id + "' writes no quantized experts; --calibrate has nothing to calibrate");
    if (calibrating && !r.calibrate)
        throw_usage_error("quantizer '" + r.quantizer_id + "' chooses its codes on calibration data",
                          {.code = "NeedsCalibration", .hint = "add --calibrate and --dataset FILE|embedded or --calibration-activations FILE"});
    return chosen;
}

ConversionJob convert_job(const ConvertRequest& r, const ConvertPlugins& plugins, const PlannedSource& source) {
    ConversionJob job = conversion_job("convert", r, source, plugins.quantizer, plugins.format);
    job.parts = r.parts;
    job.input_type = plugins.input_type;
    if (r.format_id == "gguf") {
        job.format_options.set("preset", r.quant_method);
        std::string types;
        for (const auto& t : r.tensor_types) types += (types.empty() ? "" : ";") + t;
        if (!types.empty()) job.format_options.set("tensor_types", types);
        if (!r.output_tensor_type.empty()) job.format_options.set("output-tensor-type", r.output_tensor_type);
        if (!r.token_embedding_type.empty()) job.format_options.set("token-embedding-type", r.token_embedding_type);
        if (r.pure) job.format_options.set("pure", "true");
        if (r.leave_output_tensor) job.format_options.set("leave-output-tensor", "true");
        if (r.legacy_mla) job.format_options.set("legacy_mla", "true");
        if (!r.split_max_size.empty()) job.format_options.set("split_max_size", r.split_max_size);
        if (!r.split_max_tensors.empty()) job.format_options.set("split_max_tensors", r.split_max_tensors);
        if (r.single_file) job.format_options.set("single_file", "true");
        if (r.calibrate) job.format_options.set("measured_importance", "true");  // the type rules see an imatrix
        if (!r.imatrix.empty()) {
            job.format_options.set("imatrix", r.imatrix);
            job.input_files.emplace_back(r.imatrix);  // the output folder may not hold it
        }
    }
    if (r.calibrate) job.quantizer_options.set("dampening_frac", std::to_string(r.dampening));
    if (r.backward_weights) {  // the quantizer makes them, the format stores them (or refuses the job)
        job.quantizer_options.set("backward_weights", "true");
        job.format_options.set("backward_weights", "true");
    }
    return job;
}

}  // namespace

int run_convert_command(const std::vector<std::string>& args, GlobalOptions globals) {
    ConvertRequest request;
    po::options_description options("Options");
    add_convert_options(options, request);
    if (!parse_command(args, options, globals, convert_help,
                       {"threads", "cpuinfer-threads", "num_calibration_samples", "max_sequence_length", "max-memory"}))
        return 0;
    check_request(request);
    if (request.threads > 0) set_max_threads(request.threads);

    Registry registry;
    load_plugins(registry, globals);
    const ConvertPlugins plugins = chosen_plugins(registry, request);
    const PlannedSource source = open_planned_source(registry, request.input, request.family);
    // What the adapter wants a user to know (inspect prints the same), before any work.
    for (const auto& w : source.plan.warnings) std::cerr << "warning: " << printable_text(w) << "\n";

    ConversionJob job = convert_job(request, plugins, source);
    std::optional<CalibrationInputs> calibration;
    if (request.calibrate) {
        calibration.emplace(registry, source, request.data, request.overwrite, request.dry_run);
        calibration->attach(job);
    }
    return run_conversion_command({
        .job = job,
        .request = request,
        .method = plugins.quantizer ? std::string(plugins.quantizer->id()) : std::string("no quantizer"),
        .done = "converted",
        .calibration = calibration ? &*calibration : nullptr,
        .profile = request.profile,
        .notes = [&](ProgressSink& sink) {
            if (request.gpu) sink.note("--gpu: no effect, moequant converts on the CPU");
            if (request.save_backward_weights && !request.backward_weights)
                sink.note("--save-backward-weights: " + std::string(request.quant_method == "awq" ? "AWQ" : "MOE_INT8") +
                          " has no SFT method, so there are no backward weights (as kt-kernel's script skips them)");
            if (request.awq_parts_given > 1)
                sink.note("--threadpool-count " + std::to_string(request.awq_parts_given) +
                          ": kt's awq method stores each expert matrix whole, in no threadpool parts");
            if (!request.awq_input_type_ignored.empty())
                sink.note("--input-type " + request.awq_input_type_ignored + ": not used by --quant-method awq, which reads AutoAWQ "
                          "words (as kt-kernel's script ignores it)");
        },
    });
}

}  // namespace moequant::cli
