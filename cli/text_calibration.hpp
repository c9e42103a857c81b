// Built-in calibration's inputs for the CLI: a dataset ("embedded" or a JSONL file) tokenized
// with the model's own tokenizer.json and chat format (the scratch folder for the per-layer
// inputs is scratch_folder.hpp's). Shared by `gptq --dataset` and `record`.
#pragma once

#include "family_selection.hpp"
#include "global_options.hpp"

#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/engine/plugin_registry.hpp>

#include <boost/program_options.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace moequant::cli {

// The help of --dataset and --dataset_split, which every command reading a dataset takes.
inline constexpr const char* dataset_value_name = "FILE|DIR|ID|embedded";
inline constexpr const char* dataset_help =
    "a JSONL (or JSON array) file of {\"text\"} or {\"messages\"} rows, a folder of them by split, a Hub id "
    "(owner/name) found as JSON/JSONL in the local Hugging Face cache, or 'embedded' (a short public-domain text)";
inline constexpr const char* dataset_split_help =
    "the split to use: DIR/<split>.jsonl or DIR/<split>/*.jsonl of a folder, and rows whose \"split\" field is it";

struct TextCalibrationOptions {
    std::string dataset;             // "embedded", a path or a Hub id (hub_dataset.hpp)
    DatasetSelection selection;
};

// The opening options of the commands that run the model on a dataset (record, eval):
// --model_id (-i) into `model`, then --dataset, --num_calibration_samples,
// --max_sequence_length and --random_seed into `options`.
void add_text_dataset_options(boost::program_options::options_description& description, std::string& model,
                              TextCalibrationOptions& options);

// The closing options of those commands (--family, --threads, -q, -h, then the plugin
// options), and their parsing with the counts and sizes required positive. nullopt when -h
// asked for the help, which it printed (`usage`, `summary`).
struct RunOptions {
    std::string family;
    std::size_t threads = 0;
    bool quiet = false;
};
std::optional<RunOptions> parse_text_run_command(const std::vector<std::string>& args,
                                                 boost::program_options::options_description& description,
                                                 GlobalOptions& globals, const char* usage, const char* summary);

// Error(input) when the model folder has no tokenizer.json, or the dataset is bad.
CalibrationSamples load_text_calibration(const Registry& registry, const PlannedSource& source,
                                         const TextCalibrationOptions& options);

// The files a --dataset value reads: none for "embedded" or no dataset.
std::vector<std::filesystem::path> dataset_files(const std::string& dataset);

// The family adapter of a planned source (by its plan's family id).
const ModelAdapter& source_adapter(const Registry& registry, const PlannedSource& source);

// The source family's decoder forward for `plan`; an Error reading its settings that names no
// file names config.json.
std::unique_ptr<DecoderForward> source_decoder_forward(const Registry& registry, const PlannedSource& source,
                                                       const ModelPlan& plan);

}  // namespace moequant::cli
