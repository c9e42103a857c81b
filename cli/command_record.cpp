// `moequant record`: the MoE inputs of a model on text, without quantizing anything — the
// tokenized dataset runs through the family's decoder forward layer by layer with the
// checkpoint's own weights, and every MoE layer's inputs are written as recorded activations
// (conventions.md §4). What an inference engine would dump; usable by `gptq
// --calibration-activations`, `verify --calibration-activations` (e.g. held-out text) and `plan`.

#include "command.hpp"
#include "compute_dtype_option.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "option_values.hpp"
#include "scratch_folder.hpp"
#include "text_calibration.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/rank_checks.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <boost/program_options.hpp>

#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;

namespace {

// What every rank of a record run must agree on: the source, the token ids, the products.
RunManifest record_identity(const PlannedSource& source, const SequentialCalibration& run, const std::string& products) {
    RunManifest m = describe_source(source.checkpoint, source.plan);
    m.command = "record";
    m.settings = {{"calibration", run.digest()},
                  {"calibration.products", products},
                  {"calibration.block_tokens", std::to_string(run.batch_token_limit())}};
    return m;
}

}  // namespace

int run_record_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string input, output, compute;
    TextCalibrationOptions text;
    double max_memory_gb = 0;
    bool overwrite = false;
    po::options_description options("Options");
    add_text_dataset_options(options, input, text);
    options.add_options()
        ("output,o", po::value(&output)->value_name("FILE"), "the recorded activations to write (safetensors)")
        ("overwrite", po::bool_switch(&overwrite), "replace an existing --output file")
        ("max-memory", po::value(&max_memory_gb)->value_name("GB"),
         "bound the hidden states in memory (beyond, a mapped scratch file) and run the samples in batches that fit");
    add_compute_dtype_option(options, compute,
                             "the forward's matrix products in BF16 (FP32 accumulation, oneDNN) or FP32 (default: bf16 "
                             "where the CPU has AVX512-BF16 or AMX, else f32, as gptq --dataset)");
    const std::optional<RunOptions> parsed = parse_text_run_command(
        args, options, globals,
        "moequant record --model_id MODEL --dataset FILE|embedded --output ACTIVATIONS.safetensors",
        "Runs the model (its own weights, on the CPU) on the tokenized dataset and writes the\n"
        "hidden states entering every MoE block, with the samples' lengths, as recorded activations.");
    if (!parsed) return 0;
    const RunOptions& common = *parsed;
    if (input.empty()) throw_usage_error("record needs --model_id", {.hint = "moequant record --help"});
    if (text.dataset.empty()) throw_usage_error("record needs --dataset FILE (or --dataset embedded)");
    if (output.empty()) throw_usage_error("record needs --output FILE");
    if (common.threads > 0) set_max_threads(common.threads);
    const std::string products = apply_compute_dtype(compute, calibration_compute_dtype());

    Registry registry;
    load_plugins(registry, globals);
    const PlannedSource source = open_planned_source(registry, input, common.family);
    check_output_file(output, {.folders = {source.checkpoint.directory()}, .files = dataset_files(text.dataset)}, overwrite);
    CalibrationSamples tokenized = load_text_calibration(registry, source, text);
    const auto forward = source_decoder_forward(registry, source, source.plan);
    const ScratchFolder scratch(scratch_bytes(tokenized.tokens(), source.plan.hidden_size, true, max_memory_gb > 0));
    // Under mpirun the sample blocks are shared out; rank 0 writes the file (docs/cluster.md).
    Cluster& cluster = Cluster::world();
    SequentialCalibration run(*forward, source.plan, std::move(tokenized.samples), scratch.path(), output, false,
                              memory_limit_bytes(max_memory_gb), &cluster);
    check_same_job_on_every_rank(cluster, [&] { return record_identity(source, run, products); }, source.checkpoint);
    StreamProgress progress(stderr);
    SilentProgress silent;
    ProgressSink& sink = common.quiet || !cluster.root() ? static_cast<ProgressSink&>(silent) : progress;
    sink.note("record: " + products);
    std::size_t done = 0;
    ForwardReadCheck source_reads(cluster, source.checkpoint, source.plan);  // every rank reads what rank 0 reads
    for (const auto& layer : source.plan.moe_layers) {
        run.layer_inputs(layer.layer);
        run.finish_layer(layer.layer, {});
        source_reads.through_layer(layer.layer);
        sink.step(++done, source.plan.moe_layers.size(), "layer", 0, 0);
    }
    sink.finish();
    run.finish();
    cluster.barrier();  // no rank reports success before rank 0 wrote the file
    std::cout << "recorded " << source.plan.moe_layers.size() << " MoE layer(s) of " << source.plan.family << ": "
              << run.samples() << " sample(s), " << run.tokens() << " token(s) -> " << printable_name(output) << "\n";
    return 0;
}

}  // namespace moequant::cli
