// `moequant synth --family F --out DIR`: a small random checkpoint in a family's exact on-disk
// conventions, written by the family's adapter. The folder appears under its final name only
// when complete.

#include "command.hpp"
#include "command_line.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "synth_activations.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/output_lock.hpp>
#include <moequant/engine/output_overwrite.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/sharded_writer.hpp>

#include <boost/json.hpp>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include <filesystem>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// A fresh staging folder, locked while this run lives: a leftover of a killed run is removed, one
// another run holds is refused (OutputLocked), and a link found under the name loses only its name.
std::unique_ptr<OutputFolderLock> prepare_staging(const fs::path& staging) {
    std::error_code ec;
    const fs::file_status found = fs::symlink_status(staging, ec);
    if (fs::is_directory(found)) {
        OutputFolderLock stale(staging, OutputFolderLock::Where::folder_itself);  // throws while another run holds it
        fs::remove_all(staging, ec);
    } else if (fs::exists(found)) {
        fs::remove(staging, ec);
    }
    if (!staging.parent_path().empty()) fs::create_directories(staging.parent_path(), ec);  // as convert makes its output's
    if (::mkdir(staging.c_str(), 0755) != 0) {
        const int e = errno;
        throw Error(ErrorKind::io, std::string("cannot create the output folder: ") + std::strerror(e),
                    {.file = staging.string(), .code = e == EEXIST ? "OutputLocked" : "WriteFailed",
                     .hint = e == EEXIST ? "another moequant synth is writing the same output" : ""});
    }
    return std::make_unique<OutputFolderLock>(staging, OutputFolderLock::Where::folder_itself);
}

// The top-level names of a folder: what synth wrote, so --overwrite may replace them.
std::set<std::string> entry_names(const fs::path& dir) {
    std::set<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) names.insert(it->path().filename().string());
    if (ec) throw Error(ErrorKind::io, "cannot list the staging folder: " + ec.message(), {.file = dir.string(), .code = "WriteFailed"});
    return names;
}

// A hidden file in every checkpoint synth writes (loaders ignore it): what made it, and the proof
// that `synth --overwrite` may replace the folder.
constexpr const char* synth_marker_name = ".moequant-synth.json";

std::string synth_marker(const ModelAdapter& adapter, const Options& options) {
    boost::json::object o{{"written_by", "moequant synth"}, {"adapter", std::string(adapter.id())}};
    for (const auto& [key, value] : options.items()) o[key] = value;
    return boost::json::serialize(o) + "\n";
}

void refuse_unless_synthesized(const fs::path& target) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(target / synth_marker_name, ec)))
        throw Error(ErrorKind::io,
                    std::string("synth --overwrite replaces only a checkpoint synth wrote, and the folder has no ") +
                        synth_marker_name,
                    {.file = target.string(), .code = "ForeignEntry", .hint = "choose another --out, or remove the folder yourself"});
}

// Moves the staged checkpoint into the emptied target, its index last: until then the folder does
// not look like a complete checkpoint.
void move_entries(const fs::path& staging, const fs::path& target) {
    std::set<std::string> names = entry_names(staging);
    const bool has_index = names.erase(safetensors_index_name) > 0;
    std::vector<std::string> order(names.begin(), names.end());
    if (has_index) order.push_back(safetensors_index_name);
    for (const auto& name : order) {
        std::error_code ec;
        fs::rename(staging / name, target / name, ec);
        if (ec)
            throw Error(ErrorKind::io, "cannot move the finished checkpoint into place: " + ec.message(),
                        {.file = (target / name).string(), .code = "WriteFailed"});
    }
    sync_folder(target);
}

}  // namespace

int run_synth_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string family, preset = "tiny", dtype = "bf16", layout, out, statistics = "iid";
    std::string activations;
    std::int64_t seed = 42, samples = 8, sample_tokens = 64;
    bool overwrite = false;
    po::options_description options("Options");
    options.add_options()
        ("family", po::value(&family)->value_name("F"),
         "family adapter id, model_type or release (e.g. deepseek_v3, kimi_k2, mixtral; releases: minimax_m27 "
         "MiniMax-M2.7, kimi_k26 Kimi-K2.6; `moequant plugins` lists them)")
        ("preset", po::value(&preset)->value_name("tiny|small|full")->default_value("tiny"),
         "model size; full (deepseek_v3): the released sizes, every value zero, written as sparse files that take "
         "almost no disk, for --dry-run's memory and time estimates")
        ("dtype", po::value(&dtype)->value_name("D")->default_value("bf16"),
         "bf16; fp16: the same in F16 (torch_dtype float16); fp8: FP8 E4M3 with 128x128 block scales (weight_scale_inv); fp8-channel: "
         "compressed-tensors FP8 with per-channel BF16 scales (weight_scale) and input_scale; int4-ct: routed "
         "experts compressed-tensors pack-quantized INT4, group 32 (Kimi-K2-Thinking); mxfp4: routed experts "
         "MXFP4 as DeepSeek-V4-Flash stores them (.weight I8 + .scale E8M0; deepseek_v4 also writes its attention and "
         "shared experts block FP8 with E8M0 .scale, as the release); mxfp8: every quantizable linear "
         "MXFP8 E4M3 with a U8 (E8M0) weight_scale_inv per 32 elements of a row (MiniMax-M3); gptq: every quantizable linear "
         "AutoGPTQ INT4 (qweight, qzeros, scales, g_idx), group 32; awq: every quantizable linear AutoAWQ INT4 "
         "in the GEMM packing (qweight, qzeros, scales), group 32, zero points")
        ("layout", po::value(&layout)->value_name("L"),
         "expert layout where the family has variants: per-expert (default), fused-linear, fused-bmm, mistral-native")
        ("seed", po::value(&seed)->default_value(42), "random seed (the output is deterministic for a seed)")
        ("statistics", po::value(&statistics)->value_name("iid|trained")->default_value("iid"),
         "iid: every value an independent draw (the inputs of every linear nearly isotropic); trained: token "
         "embeddings of low rank and RMSNorm gains spread across channels, as in trained models (correlated "
         "inputs, what calibration is measured on)")
        ("out", po::value(&out)->value_name("DIR"), "output folder (must not exist, unless --overwrite)")
        ("activations", po::value(&activations)->value_name("FILE"),
         "also write calibration activations for gptq --calibration-activations (random hidden states)")
        ("samples", po::value(&samples)->default_value(8), "calibration samples in --activations")
        ("sample-tokens", po::value(&sample_tokens)->default_value(64), "tokens per calibration sample")
        ("overwrite", po::bool_switch(&overwrite),
         "replace an existing output folder (only what synth or a conversion writes) and --activations file");
    if (!parse_command(args, options, globals,
                       {"moequant synth --family F [--preset tiny|small|full] [--dtype D] [--seed N] --out DIR",
                        "Writes a random checkpoint in the family's exact on-disk conventions: config.json\n"
                        "with the real field names, shards named as the real model names them, an index,\n"
                        "FP8 block scales (edge blocks included, one scale in another shard than its\n"
                        "weight), MTP layers, buffers, dense and shared-expert layers, a working\n"
                        "tokenizer.json. Sizes are small but meet the AMX and GPU kernels' rules;\n"
                        "--preset full (deepseek_v3) writes the released sizes, every value zero, as\n"
                        "sparse files: a 688 GB checkpoint in a few MB of disk, to plan a full-size\n"
                        "run with --dry-run."}))
        return 0;
    if (family.empty()) throw_usage_error("synth needs --family", {.hint = "moequant synth --help"});
    if (out.empty()) throw_usage_error("synth needs --out DIR");
    if (samples < 1 || sample_tokens < 1) throw_usage_error("--samples and --sample-tokens must be at least 1");
    // The activations are built in memory; they are test data, not a model's worth of tokens.
    constexpr std::int64_t max_synth_tokens = 1 << 20;
    if (samples > max_synth_tokens / sample_tokens)
        throw_usage_error("--samples x --sample-tokens must be at most " + std::to_string(max_synth_tokens) + " tokens");

    Registry registry;
    load_plugins(registry, globals);
    const SynthTarget synth_target = find_synth_target(registry, family);
    const ModelAdapter* adapter = synth_target.adapter;

    Options synth_options;
    synth_options.set("model_type", synth_target.model_type);
    if (synth_target.release) synth_options.set("release", synth_target.release->name);
    synth_options.set("preset", preset);
    synth_options.set("dtype", dtype);
    synth_options.set("seed", std::to_string(seed));
    if (!layout.empty()) synth_options.set("layout", layout);
    synth_options.set("statistics", statistics);

    // The real folder (a symlinked --out is replaced where it points), checked before any file.
    const fs::path target = resolved_path(out);
    check_output_folder(target, {}, overwrite);
    // Never inside the checkpoint: loaders take every *.safetensors they find there.
    if (!activations.empty()) check_output_file(activations, {.folders = {target}}, overwrite);
    std::error_code ec;
    const bool replacing = fs::exists(fs::symlink_status(target, ec));
    if (replacing && !overwrite)
        throw Error(ErrorKind::io, "the output folder already exists", {.file = target.string(), .code = "OutputExists",
                                                                        .hint = "choose another --out or pass --overwrite"});
    if (replacing && !fs::is_directory(target, ec))
        throw Error(ErrorKind::io, "the output path exists and is not a folder", {.file = target.string(), .code = "OutputExists"});
    // A folder being replaced is locked like any output folder: a conversion running into it
    // stops this run (OutputLocked), never the other way round.
    const std::unique_ptr<OutputFolderLock> target_lock = replacing ? std::make_unique<OutputFolderLock>(target) : nullptr;
    const fs::path staging = partial_path_for(target);
    const std::unique_ptr<OutputFolderLock> lock = prepare_staging(staging);
    try {
        adapter->synthesize(staging, synth_options);
        write_file_atomically(staging / synth_marker_name, synth_marker(*adapter, synth_options));
        if (replacing) {
            // Only a checkpoint synth wrote (it has the marker), and only the names this synth
            // writes: a downloaded model or a conversion's output under --out keeps every file.
            refuse_unless_synthesized(target);
            clear_for_overwrite(target, {.conversion_output = false, .names = entry_names(staging)});
            move_entries(staging, target);
            fs::remove(staging, ec);
        } else {
            fs::rename(staging, target, ec);
            if (ec)
                throw Error(ErrorKind::io, "cannot move the finished checkpoint into place: " + ec.message(),
                            {.file = target.string(), .code = "WriteFailed"});
        }
    } catch (...) {
        fs::remove_all(staging, ec);
        throw;
    }

    Checkpoint written = Checkpoint::open(target);
    std::uint64_t bytes = 0;
    for (const auto& s : written.shard_names()) bytes += written.shard(s).file_size();
    std::cout << "wrote " << target.string() << ": " << adapter->id() << " (" << synth_target.model_type
              << (synth_target.release ? " release " + synth_target.release->name : "") << ", " << preset << ", " << dtype << "), " << written.shard_names().size() << " shards, "
              << with_commas(written.tensor_count()) << " tensors, " << human_bytes(bytes) << "\n";
    if (!activations.empty()) {
        const PlannedSource planned = open_planned_source(registry, target.string(), std::string(adapter->id()));
        write_synthetic_activations(activations, planned.plan, samples, sample_tokens, static_cast<std::uint64_t>(seed));
        std::cout << "wrote " << activations << ": " << samples << " sample(s) of " << sample_tokens << " token(s) for "
                  << planned.plan.moe_layers.size() << " MoE layer(s)\n";
    }
    return 0;
}

}  // namespace moequant::cli
