#include "text_calibration.hpp"
#include "command_line.hpp"
#include "hub_dataset.hpp"

#include <moequant/decoder_forward.hpp>
#include <moequant/engine/tokenizer.hpp>
#include <moequant/error.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace moequant::cli {

namespace fs = std::filesystem;

const ModelAdapter& source_adapter(const Registry& registry, const PlannedSource& source) {
    const ModelAdapter* adapter = find_adapter(registry, source.plan.family);
    if (!adapter) throw Error(ErrorKind::internal, "the planning adapter '" + source.plan.family + "' is gone");
    return *adapter;
}

std::unique_ptr<DecoderForward> source_decoder_forward(const Registry& registry, const PlannedSource& source,
                                                       const ModelPlan& plan) {
    try {
        return source_adapter(registry, source).decoder_forward(source.config, source.checkpoint, plan);
    } catch (const Error& e) {
        throw e.with_context({.file = source.config.source()});
    }
}

CalibrationSamples load_text_calibration(const Registry& registry, const PlannedSource& source,
                                         const TextCalibrationOptions& options) {
    const std::optional<std::string> tokenizer_json = source.checkpoint.side_file("tokenizer.json");
    if (!tokenizer_json)
        throw Error(ErrorKind::input, "the model has no tokenizer.json; built-in calibration needs it",
                    {.file = source.checkpoint.directory().string(), .code = "MissingTokenizer",
                     .hint = source.checkpoint.container() == "gguf"
                                 ? "moequant rebuilds a GGUF's tokenizer for SentencePiece vocabularies with scores and gpt2 ones with the "
                                   "qwen2, deepseek-v3, glm4 or minimax-m2 pre-tokenizer (docs/gguf-source.md); or pass recorded MoE inputs with --calibration-activations"
                                 : "or pass recorded MoE inputs with --calibration-activations"});
    const Tokenizer tokenizer = Tokenizer::parse(*tokenizer_json, source.checkpoint.side_file("tokenizer_config.json").value_or(""),
                                                 (source.checkpoint.directory() / "tokenizer.json").string());
    if (options.dataset == "embedded")
        return tokenize_calibration_texts(embedded_calibration_paragraphs(), tokenizer, options.selection);
    const ChatTemplate chat = source_adapter(registry, source).chat_template(source.config);
    return load_calibration_dataset(dataset_path(options.dataset, options.selection.split), tokenizer, chat, options.selection);
}

void add_text_dataset_options(boost::program_options::options_description& description, std::string& model,
                              TextCalibrationOptions& options) {
    namespace po = boost::program_options;
    DatasetSelection& s = options.selection;
    description.add_options()
        ("model_id", po::value(&model)->value_name("PATH"), "model folder (with tokenizer.json), or a GGUF model file")
        ("input-path,i", po::value(&model)->value_name("PATH"), "same as --model_id")
        ("dataset", po::value(&options.dataset)->value_name(dataset_value_name),
         dataset_help)
        ("dataset_split", po::value(&s.split)->default_value(s.split),
         dataset_split_help)
        ("num_calibration_samples", po::value(&s.num_samples)->default_value(s.num_samples), "rows to use")
        ("max_sequence_length", po::value(&s.max_sequence_length)->default_value(s.max_sequence_length), "tokens per row at most")
        ("random_seed", po::value(&s.seed)->default_value(s.seed), "shuffles the rows");
}

std::optional<RunOptions> parse_text_run_command(const std::vector<std::string>& args,
                                                 boost::program_options::options_description& description,
                                                 GlobalOptions& globals, const char* usage, const char* summary) {
    namespace po = boost::program_options;
    RunOptions run;
    description.add_options()
        ("family", po::value(&run.family)->value_name("NAME"), "use this adapter (id, model_type or synth release) instead of detecting it")
        ("threads", po::value(&run.threads), "worker threads (default: all cores)")
        ("quiet,q", po::bool_switch(&run.quiet), "no progress output");
    if (!parse_command(args, description, globals, {usage, summary},
                       {"threads", "num_calibration_samples", "max_sequence_length", "max-memory"}))
        return std::nullopt;
    return run;
}

std::vector<fs::path> dataset_files(const std::string& dataset) {
    if (dataset.empty() || dataset == "embedded") return {};
    if (auto cached = cached_hub_dataset(dataset)) return {*cached};
    return {dataset};
}

}  // namespace moequant::cli
