#include "calibration_inputs.hpp"
#include "compute_dtype_option.hpp"

#include "option_values.hpp"
#include "scratch_folder.hpp"
#include "text_calibration.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/error.hpp>
#include <moequant/router.hpp>

namespace moequant::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

void add_calibration_options(po::options_description& description, CalibrationInputOptions& o) {
    description.add_options()
        ("calibration-activations", po::value(&o.activations)->value_name("FILE"),
         "recorded MoE inputs: layers.L.moe_input [tokens, hidden] and sample_lengths (safetensors)")
        ("dataset", po::value(&o.dataset)->value_name(dataset_value_name),
         (std::string("built-in calibration, run through the model layer by layer on the CPU: ") + dataset_help).c_str())
        ("dataset_split", po::value(&o.split)->default_value(o.split),
         dataset_split_help)
        ("num_calibration_samples", po::value(&o.samples),
         "use N samples (default: all recorded ones; 512 rows of a --dataset)")
        ("max_sequence_length", po::value(&o.max_length),
         "use at most this many tokens of each sample (default: all recorded; 2048 with --dataset)")
        ("random_seed", po::value(&o.seed)->default_value(42), "shuffles the --dataset rows")
        ("max-memory", po::value(&o.max_memory_gb)->value_name("GB"),
         "with --dataset: bound the calibration hidden states in memory (beyond, a mapped scratch file) and "
         "run the samples in batches that fit (default: no limit)")
        ("save-activations", po::value(&o.save_activations)->value_name("FILE"),
         "with --dataset: also write every MoE layer's inputs as recorded activations")
        ("routed-only", po::bool_switch(&o.routed_only),
         "an expert sees only the tokens its layer's router sends it (moe_calibrate_all_experts=False)");
    add_compute_dtype_option(description, o.compute_dtype,
                             "calibration's matrix products (the --dataset forward's, and the Hessians of BF16 inputs, which "
                             "BF16 multiplies exactly) in BF16 with FP32 accumulation (oneDNN) or FP32 "
                             "(default: bf16 where the CPU has AVX512-BF16 or AMX, else f32)");
}

void check_calibration_options(const CalibrationInputOptions& o) {
    if (!o.activations.empty() && !o.dataset.empty())
        throw_usage_error("give either --calibration-activations or --dataset, not both");
    if (o.routed_only && !o.given())
        throw_usage_error("--routed-only chooses the calibration tokens; it needs --calibration-activations or --dataset");
    if (!o.save_activations.empty() && o.dataset.empty())
        throw_usage_error("--save-activations records what --dataset calibration computes; it needs --dataset");
    if (!o.compute_dtype.empty() && !o.given())
        throw_usage_error("--compute-dtype sets the precision of calibration; it needs --dataset or --calibration-activations");
    chosen_compute_dtype(o.compute_dtype, ComputeDtype::f32);  // a bad value fails before any work
}

CalibrationInputs::CalibrationInputs(const Registry& registry, const PlannedSource& source,
                                     const CalibrationInputOptions& options, bool overwrite, bool estimate_only)
    : options_(options) {
    const CommandInputs inputs{.folders = {source.checkpoint.directory()},
                               .files = options.activations.empty() ? dataset_files(options.dataset)
                                                                    : std::vector<fs::path>{options.activations}};
    if (!options.save_activations.empty()) check_output_file(options.save_activations, inputs, overwrite);
    if (options.given()) products_ = apply_compute_dtype(options.compute_dtype, calibration_compute_dtype());
    if (!options.dataset.empty()) {
        const TextCalibrationOptions text{options.dataset,
                                          {options.samples > 0 ? options.samples : 512,
                                           options.max_length > 0 ? options.max_length : 2048, options.seed, options.split}};
        CalibrationSamples tokenized = load_text_calibration(registry, source, text);
        forward_ = source_decoder_forward(registry, source, source.plan);
        const std::uint64_t budget = memory_limit_bytes(options.max_memory_gb);
        scratch_needed_ = scratch_bytes(tokenized.tokens(), source.plan.hidden_size, true, budget > 0);
        // A dry run writes no layer files: it reports their room instead of requiring it (its
        // probes' few files are small).
        scratch_ = std::make_unique<ScratchFolder>(estimate_only ? 0 : scratch_needed_);
        sequential_.emplace(*forward_, source.plan, std::move(tokenized.samples), scratch_->path(),
                            options.save_activations.empty() ? std::nullopt : std::optional<fs::path>(options.save_activations),
                            options.routed_only, budget, &Cluster::world(), estimate_only);
    } else if (!options.activations.empty()) {
        recorded_.emplace(CalibrationActivations::open(options.activations));
        recorded_->select(options.samples, options.max_length);
        recorded_->set_routed_only(options.routed_only);
    }
}

CalibrationInputs::~CalibrationInputs() = default;

void CalibrationInputs::attach(ConversionJob& job) {
    job.calibration = recorded_ ? &*recorded_ : nullptr;
    job.sequential = sequential_ ? &*sequential_ : nullptr;
    for (const auto& f : dataset_files(options_.dataset)) job.input_files.push_back(f);
    if (!options_.save_activations.empty()) job.input_files.push_back(options_.save_activations);  // never inside the output
    const std::string& data = options_.activations.empty() ? options_.dataset : options_.activations;
    job.calibration_label = data == "embedded" ? data : fs::path(data).filename().string();
}

void CalibrationInputs::describe(ProgressSink& progress, const ModelPlan& plan) const {
    const bool routed = options_.routed_only;
    if (sequential_)
        progress.note("calibration: " + std::to_string(sequential_->samples()) + " sample(s), " +
                      std::to_string(sequential_->tokens()) + " token(s) of " + options_.dataset +
                      ", run through the model layer by layer in " + std::to_string(sequential_->batches()) + " batch(es)" +
                      (sequential_->hidden_states_on_disk() ? ", hidden states in a scratch file" : "") +
                      (routed ? "; experts see the tokens routed to them" : "; every expert sees all of them") + "; " +
                      products_);
    else if (recorded_)
        progress.note("calibration: " + std::to_string(recorded_->samples()) + " sample(s), " +
                      std::to_string(recorded_->tokens()) + " token(s) per MoE layer from " + options_.activations +
                      (routed ? "; experts see the tokens routed to them (" + describe_router(plan.router) + ")"
                              : "; every expert sees all of them") + "; " + products_);
}

void CalibrationInputs::finish() {
    if (sequential_) sequential_->finish();
}

}  // namespace moequant::cli
