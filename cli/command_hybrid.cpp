// `moequant hybrid`: one run that prepares a model for kt-kernel + SGLang's hybrid serving. It
// records the routing on the calibration text, writes the GPU checkpoint (GPTQ W4A16 of every
// routed expert, or the one-INT4-checkpoint recipe for kt's RAWINT4) and the CPU experts (AMX
// INT4/INT8 or MOE_INT8, calibrated), keeps on the GPU the most used experts its --gpu-memory
// holds, checks both outputs with verify, measures the hybrid model with eval on held-out text
// and prints the SGLang command for exactly these files. Every step is one of the commands run
// in this process with the arguments a user would give it, so each resumes as that command does
// (a finished step costs a check of its files). docs/hybrid.md.

#include "command.hpp"
#include "command_line.hpp"
#include "global_options.hpp"
#include "hybrid_run.hpp"
#include "report_page.hpp"

#include <moequant/error.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

namespace moequant::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// The held-out text when none is given: the model folder's heldout.jsonl, else the embedded
// text (with a warning when that is also the calibration text).
std::string default_eval_dataset(const HybridRequest& r) {
    std::error_code ec;
    const fs::path folder = fs::is_directory(r.input, ec) ? fs::path(r.input) : fs::path(r.input).parent_path();
    if (fs::exists(folder / "heldout.jsonl", ec)) return (folder / "heldout.jsonl").string();
    if (r.dataset == "embedded")
        std::cerr << "moequant: warning: hybrid evaluates on the embedded text, which is also the calibration text: give --eval-dataset "
                     "for figures on text the calibration did not see\n";
    return "embedded";
}

}  // namespace

int run_hybrid_command(const std::vector<std::string>& args, GlobalOptions globals) {
    HybridRequest r;
    po::options_description options("Options");
    options.add_options()
        ("model_id", po::value(&r.input)->value_name("PATH"), "model folder, or a GGUF model file")
        ("input-path,i", po::value(&r.input)->value_name("PATH"), "same as --model_id")
        ("output,o", po::value(&r.output)->value_name("DIR"), "the run's folder: gpu/, cpu/, placement.json, activation_stats.pt, eval.json, hybrid.json")
        ("gpu-memory", po::value(&r.gpu_memory)->value_name("SIZE"),
         "GPU memory for the weights (e.g. 24GiB): what the GPU checkpoint needs outside the routed experts, and as many of the "
         "most used experts per MoE layer as fit; leave SGLang's KV cache out of it")
        ("cpu-memory", po::value(&r.cpu_memory)->value_name("SIZE"),
         "CPU memory for kt-kernel's expert weights: then AMXINT8 and AMXINT4 (or --kt-method alone) are tried with the fewest and the "
         "most GPU experts that fit both budgets, and the lowest KL on the calibration text is kept")
        ("kt-method", po::value(&r.kt_method)->value_name("M")->default_value("AMXINT4"),
         "the CPU experts: AMXINT4 or AMXINT8 (calibrated AMX), MOE_INT8 (calibrated, CPUs without AMX), RAWINT4 (kt reads the GPU "
         "checkpoint, written as gptq --for kt-rawint4)")
        ("dataset", po::value(&r.dataset)->value_name("FILE|DIR|ID|embedded"), "calibration text (default: embedded, with a warning)")
        ("dataset_split", po::value(&r.dataset_split)->default_value("train_sft"), "the split of a dataset folder")
        ("num_calibration_samples", po::value(&r.samples)->default_value(512), "calibration rows")
        ("max_sequence_length", po::value(&r.max_length)->default_value(2048), "tokens per calibration row at most")
        ("random_seed", po::value(&r.seed)->default_value(42), "shuffles the calibration rows")
        ("eval-dataset", po::value(&r.eval_dataset)->value_name("FILE|embedded"),
         "held-out text for eval (default: the model folder's heldout.jsonl, else embedded)")
        ("eval-samples", po::value(&r.eval_samples)->default_value(128), "eval rows")
        ("eval-max-length", po::value(&r.eval_max_length)->default_value(512), "tokens per eval row at most")
        ("kt-threadpool-count", po::value(&r.threadpools)->default_value(2), "kt-kernel's thread pools (NUMA sub-pools) the CPU experts are split for")
        ("kt-cpuinfer", po::value(&r.cpuinfer), "CPU threads for kt-kernel in the launch line (default: this machine's)")
        ("compare-outputs", po::bool_switch(&r.compare_outputs),
         "also evaluate every expert on the CPU and every expert on the GPU, beside the hybrid (two more evals)")
        ("dry-run", po::bool_switch(&r.dry_run), "run nothing: sizes, GPU experts, peak memory and time of every step, and the launch line")
        ("family", po::value(&r.family)->value_name("NAME"), "use this adapter (id, model_type or synth release) instead of detecting it")
        ("threads", po::value(&r.threads), "worker threads (default: all cores)")
        ("quiet,q", po::bool_switch(&r.quiet), "no progress output");
    const std::optional<po::variables_map> vm = parse_command(args, options, globals,
                       {"moequant hybrid --model_id MODEL --output DIR --gpu-memory SIZE [--kt-method AMXINT4|AMXINT8|MOE_INT8|RAWINT4]\n"
                        "              [--dataset FILE] [--eval-dataset FILE] [--dry-run]",
                        "Prepares a model for kt-kernel + SGLang's hybrid serving in one resumable run: records the routing\n"
                        "on the calibration text, writes the GPU checkpoint (GPTQ W4A16; for RAWINT4 the one-INT4-checkpoint\n"
                        "recipe) and the calibrated CPU experts, keeps on the GPU the most used experts --gpu-memory holds,\n"
                        "verifies both outputs, evaluates the hybrid model on held-out text and prints the SGLang command\n"
                        "for exactly these files. Rerun the same command to resume."},
                       {"threads", "num_calibration_samples", "max_sequence_length", "eval-samples", "eval-max-length", "kt-threadpool-count",
                        "kt-cpuinfer"});
    if (!vm) return 0;
    r.method_given = vm->count("kt-method") && !(*vm)["kt-method"].defaulted();
    if (r.input.empty()) throw_usage_error("hybrid needs --model_id", {.hint = "moequant hybrid --help"});
    if (r.output.empty()) throw_usage_error("hybrid needs --output DIR");
    if (r.gpu_memory.empty()) throw_usage_error("hybrid needs --gpu-memory SIZE (the GPU memory for the weights, e.g. 24GiB)");
    hybrid_method_named(r.kt_method);  // a bad name is refused before anything else
    if (r.dataset.empty()) {
        std::cerr << "moequant: warning: no --dataset: calibrating on the small embedded text; give text like the one the model will serve\n";
        r.dataset = "embedded";
    }
    if (r.eval_dataset.empty()) r.eval_dataset = default_eval_dataset(r);
    if (r.cpuinfer == 0) r.cpuinfer = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::thread::hardware_concurrency()));
    return run_hybrid(std::move(r), std::move(globals), command_line_text("hybrid", args));
}

}  // namespace moequant::cli
