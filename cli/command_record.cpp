// `moequant record`: the MoE inputs of a model on text, without quantizing anything — the
// tokenized dataset runs through the family's decoder forward layer by layer with the
// checkpoint's own weights, and every MoE layer's inputs are written as recorded activations
// (conventions.md §4). What an inference engine would dump; usable by `gptq
// --calibration-activations`, `verify --calibration-activations` (e.g. held-out text) and `plan`.
// With --imatrix, the routed experts' statistics on the way, as llama.cpp's importance matrix
// file (recorded_imatrix.hpp): what llama-imatrix would write for the stacked expert tensors.

#include "command.hpp"
#include "compute_dtype_option.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "option_values.hpp"
#include "recorded_imatrix.hpp"
#include "scratch_folder.hpp"
#include "text_calibration.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/engine/expert_importance_statistics.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/engine/rank_checks.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// What every rank of a record run must agree on: the source, the token ids, the products.
RunManifest record_identity(const PlannedSource& source, const SequentialCalibration& run, const std::string& products,
                            const std::string& imatrix) {
    RunManifest m = describe_source(source.checkpoint, source.plan);
    m.command = "record";
    m.settings = {{"calibration", run.digest()},
                  {"calibration.products", products},
                  {"calibration.block_tokens", std::to_string(run.batch_token_limit())},
                  {"imatrix", imatrix}};
    return m;
}

}  // namespace

int run_record_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string input, output, compute, imatrix;
    TextCalibrationOptions text;
    double max_memory_gb = 0;
    bool overwrite = false;
    po::options_description options("Options");
    add_text_dataset_options(options, input, text);
    options.add_options()
        ("output,o", po::value(&output)->value_name("FILE"), "the recorded activations to write (safetensors)")
        ("imatrix", po::value(&imatrix)->value_name("FILE"),
         "also (or only) write the routed experts' importance matrix as llama-imatrix does: the legacy form for a .dat "
         "FILE, else GGUF (for convert --format gguf --imatrix and llama-quantize --imatrix)")
        ("overwrite", po::bool_switch(&overwrite), "replace an existing --output or --imatrix file")
        ("max-memory", po::value(&max_memory_gb)->value_name("GB"),
         "bound the hidden states in memory (beyond, a mapped scratch file) and run the samples in batches that fit");
    add_compute_dtype_option(options, compute,
                             "the forward's matrix products in BF16 (FP32 accumulation, oneDNN) or FP32 (default: bf16 "
                             "where the CPU has AVX512-BF16 or AMX, else f32, as gptq --dataset)");
    const std::optional<RunOptions> parsed = parse_text_run_command(
        args, options, globals,
        "moequant record --model_id MODEL --dataset FILE|embedded [--output ACTIVATIONS.safetensors] [--imatrix FILE]",
        "Runs the model (its own weights, on the CPU) on the tokenized dataset and writes the\n"
        "hidden states entering every MoE block, with the samples' lengths, as recorded activations;\n"
        "with --imatrix, the routed experts' importance matrix as llama-imatrix writes it (the\n"
        "blk.L.ffn_{gate,up,down}_exps.weight entries; attention and dense tensors are not measured).");
    if (!parsed) return 0;
    const RunOptions& common = *parsed;
    if (input.empty()) throw_usage_error("record needs --model_id", {.hint = "moequant record --help"});
    if (text.dataset.empty()) throw_usage_error("record needs --dataset FILE (or --dataset embedded)");
    if (output.empty() && imatrix.empty())
        throw_usage_error("record needs --output FILE or --imatrix FILE", {.hint = "moequant record --help"});
    if (!output.empty() && !imatrix.empty() && fs::weakly_canonical(output) == fs::weakly_canonical(imatrix))
        throw_usage_error("--output and --imatrix name the same file");
    if (common.threads > 0) set_max_threads(common.threads);
    const std::string products = apply_compute_dtype(compute, calibration_compute_dtype());

    Registry registry;
    load_plugins(registry, globals);
    const PlannedSource source = open_planned_source(registry, input, common.family);
    const CommandInputs inputs{.folders = {source.checkpoint.directory()}, .files = dataset_files(text.dataset)};
    if (!output.empty()) check_output_file(output, inputs, overwrite);
    if (!imatrix.empty()) check_output_file(imatrix, inputs, overwrite);
    CalibrationSamples tokenized = load_text_calibration(registry, source, text);
    // llama-imatrix's chunks are its contexts; here each sample is one, of at most the longest's tokens.
    std::size_t longest_sample = 0;
    for (const auto& sample : tokenized.samples) longest_sample = std::max(longest_sample, sample.size());
    const auto forward = source_decoder_forward(registry, source, source.plan);
    // The imatrix's statistics wait in the scratch folder too, a layer at a time (recorded_imatrix.hpp).
    std::uint64_t imatrix_spool = 0;
    if (!imatrix.empty())
        for (const auto& layer : source.plan.moe_layers) {
            const auto& weights = layer.experts.front().weights;
            imatrix_spool += RecordedImatrix::spool_bytes(imatrix, source.plan.num_experts, 1, weights[static_cast<int>(Projection::gate)].cols,
                                                          weights[static_cast<int>(Projection::down)].cols);
        }
    const ScratchFolder scratch(scratch_bytes(tokenized.tokens(), source.plan.hidden_size, true, max_memory_gb > 0) + imatrix_spool);
    // Under mpirun the sample blocks are shared out; rank 0 writes the file (docs/cluster.md).
    Cluster& cluster = Cluster::world();
    SequentialCalibration run(*forward, source.plan, std::move(tokenized.samples), scratch.path(),
                              output.empty() ? std::nullopt : std::optional<fs::path>(output), false, memory_limit_bytes(max_memory_gb),
                              &cluster);
    check_same_job_on_every_rank(cluster, [&] { return record_identity(source, run, products, imatrix); }, source.checkpoint);
    StreamProgress progress(stderr);
    SilentProgress silent;
    ProgressSink& sink = common.quiet || !cluster.root() ? static_cast<ProgressSink&>(silent) : progress;
    sink.note("record: " + products);
    std::size_t done = 0;
    ForwardReadCheck source_reads(cluster, source.checkpoint, source.plan);  // every rank reads what rank 0 reads
    std::optional<RecordedImatrix> importance;
    if (!imatrix.empty()) importance.emplace(source.plan.num_experts, imatrix, scratch.path());
    std::vector<std::string> unseen_notes;
    auto load = [&](const ExpertWeightSource& s) { return load_expert_matrix(source.checkpoint, s); };
    for (const auto& layer : source.plan.moe_layers) {
        const CalibrationActivations& inputs_of_layer = run.layer_inputs(layer.layer);
        // Every rank measures (each holds every layer's inputs and reads the same tensors); rank 0 writes.
        if (importance) {
            const std::vector<std::int64_t> unseen =
                importance->add_layer(layer.layer, measure_expert_statistics(inputs_of_layer, source.plan, layer, source.checkpoint, load));
            if (!unseen.empty()) unseen_notes.push_back(unseen_experts_sentence(layer.layer, unseen));
        }
        run.finish_layer(layer.layer, {});
        source_reads.through_layer(layer.layer);
        sink.step(++done, source.plan.moe_layers.size(), "layer", 0, 0);
    }
    sink.finish();
    run.finish();
    if (importance && cluster.root())
        importance->write(text.dataset, static_cast<std::uint32_t>(run.samples()), static_cast<std::uint32_t>(longest_sample));
    cluster.barrier();  // no rank reports success before rank 0 wrote the files
    // Said even with --quiet: it is about the file, not progress (llama-quantize weighs such an expert 1).
    for (const std::string& note : unseen_notes)
        if (cluster.root()) std::cerr << "moequant: note: imatrix coverage: " << note << " (its count is 0: llama-quantize weighs its columns 1)\n";
    std::cout << "recorded " << source.plan.moe_layers.size() << " MoE layer(s) of " << source.plan.family << ": "
              << run.samples() << " sample(s), " << run.tokens() << " token(s)";
    if (!output.empty()) std::cout << " -> " << printable_name(output);
    if (importance)
        std::cout << (output.empty() ? " -> " : ", ") << printable_name(imatrix) << " ("
                  << (wants_legacy_imatrix(imatrix) ? "legacy" : "GGUF") << " imatrix, " << importance->entries() << " expert entries)";
    std::cout << "\n";
    return 0;
}

}  // namespace moequant::cli
