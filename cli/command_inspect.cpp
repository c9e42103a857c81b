// `moequant inspect PATH`: shards, tensor count, dtypes, bytes, largest tensors. Only headers
// are read, so the time is proportional to the header bytes, not to the model size.

#include "command.hpp"
#include "command_line.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "output_inspection.hpp"
#include "plan_report.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/printable.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>

namespace moequant::cli {

namespace po = boost::program_options;
namespace json = boost::json;

namespace {

struct TensorRow {
    const TensorInfo* info;
    const std::string* shard;
};

struct Summary {
    std::uint64_t data_bytes = 0;
    std::uint64_t header_bytes = 0;
    std::uint64_t file_bytes = 0;
    std::map<DType, std::pair<std::uint64_t, std::uint64_t>> by_dtype;  // tensors, bytes
    std::vector<TensorRow> rows;
};

// Largest first; ties by name so the output is stable. Only the first `count` rows are
// ordered (a full sort of ~100k rows would dominate the run time).
void order_rows(std::vector<TensorRow>& rows, std::size_t count) {
    auto larger = [](const TensorRow& a, const TensorRow& b) {
        if (a.info->size_bytes() != b.info->size_bytes()) return a.info->size_bytes() > b.info->size_bytes();
        return a.info->name < b.info->name;
    };
    count = std::min(count, rows.size());
    std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(count), rows.end(), larger);
}

Summary summarise(const Checkpoint& checkpoint) {
    checkpoint.validate_all();
    Summary s;
    for (const auto& shard_name : checkpoint.shard_names()) {
        const SafetensorsFile& shard = checkpoint.shard(shard_name);
        s.header_bytes += shard.header_length();
        s.file_bytes += shard.file_size();
        for (const auto& t : shard.tensors()) {
            s.data_bytes += t.size_bytes();
            auto& [count, bytes] = s.by_dtype[t.dtype];
            ++count;
            bytes += t.size_bytes();
            s.rows.push_back({&t, &shard_name});
        }
    }
    return s;
}

// The checkpoint's weights grouped by how they are stored (source_encoding.hpp): one line per
// distinct encoding summary, with the number of weights and their stored bytes.
struct EncodingRow {
    std::string encoding, input_type;
    std::uint64_t weights = 0, bytes = 0;
};
struct EncodingSummary {
    std::map<std::string, EncodingRow> by_summary;
    std::map<const TensorInfo*, const EncodedWeight*> holder;  // per tensor (null: no weight)
    std::uint64_t other_tensors = 0;
    // Tensors an encoding recognised but refuses to decode (convert would stop on them): inspect
    // is the tool to find them, so it reports them instead of failing.
    std::vector<std::pair<std::string, Error>> refused;
};

EncodingSummary summarise_encodings(const Checkpoint& checkpoint, const Summary& s) {
    EncodingSummary out;
    std::set<const EncodedWeight*> seen;
    for (const auto& row : s.rows) {
        const EncodedWeight* w = nullptr;
        try {
            w = checkpoint.weight_holding(row.info->name);
        } catch (const Error& e) {
            if (e.kind() != ErrorKind::input) throw;
            out.refused.emplace_back(row.info->name, e);
        }
        out.holder[row.info] = w;
        if (!w) {
            ++out.other_tensors;
            continue;
        }
        if (!seen.insert(w).second) continue;
        EncodingRow& r = out.by_summary[w->summary];
        r.encoding = w->encoding;
        r.input_type = w->input_type;
        ++r.weights;
        r.bytes += w->stored_bytes;
    }
    return out;
}

json::array shape_json(const Shape& shape) {
    json::array a;
    for (auto d : shape) a.push_back(d);
    return a;
}

// The family and MoE plan, when the checkpoint has a config.json (or --family is given).
struct PlanResult {
    std::optional<ModelPlan> plan;
    bool overridden = false;
    std::string reason_absent;  // why there is no plan
};

PlanResult make_plan(const Registry& registry, const Checkpoint& checkpoint, const std::string& family) {
    PlanResult r;
    if (!checkpoint.has_config()) {
        if (!family.empty())
            throw Error(ErrorKind::input, "--family needs the model's config.json, which is missing",
                        {.file = (checkpoint.directory() / "config.json").string(), .code = "MissingConfig"});
        r.reason_absent = "no config.json next to the weights: family not detected";
        return r;
    }
    ModelConfig config = checkpoint.config();
    SelectedAdapter selected = select_adapter(registry, config, checkpoint, family);
    r.plan = selected.adapter->plan(config, checkpoint);
    r.overridden = selected.overridden;
    return r;
}

void print_json(const Checkpoint& c, const Summary& s, const std::optional<EncodingSummary>& encodings, std::size_t top,
                bool all_tensors, const PlanResult& plan, bool full_plan) {
    json::object root;
    root["path"] = c.directory().string();
    root["index"] = c.index_path() ? json::value(c.index_path()->filename().string()) : json::value(nullptr);
    root["shards"] = c.shard_names().size();
    root["tensors"] = s.rows.size();
    root["data_bytes"] = s.data_bytes;
    root["header_bytes"] = s.header_bytes;
    root["file_bytes"] = s.file_bytes;
    json::object dtypes;
    for (const auto& [dtype, cb] : s.by_dtype)
        dtypes[std::string(dtype_name(dtype))] = json::object{{"tensors", cb.first}, {"bytes", cb.second}};
    root["dtypes"] = std::move(dtypes);
    if (encodings) {
        json::array list;
        for (const auto& [summary, r] : encodings->by_summary)
            list.push_back(json::object{{"encoding", r.encoding}, {"input_type", r.input_type}, {"summary", summary},
                                        {"weights", r.weights}, {"bytes", r.bytes}});
        root["encodings"] = std::move(list);
        root["tensors_of_no_weight"] = encodings->other_tensors;
        json::array refused;
        for (const auto& [tensor, e] : encodings->refused)
            refused.push_back(json::object{{"tensor", tensor}, {"code", e.code()}, {"message", e.what()}});
        root["undecodable"] = std::move(refused);
    }
    if (c.has_config()) {
        ModelConfig config = c.config();
        root["model_type"] = config.model_type();
    }
    json::array rows;
    std::size_t n = all_tensors ? s.rows.size() : std::min(top, s.rows.size());
    for (std::size_t i = 0; i < n; ++i) {
        const auto& r = s.rows[i];
        json::object row{{"name", r.info->name},
                         {"dtype", std::string(dtype_name(r.info->dtype))},
                         {"shape", shape_json(r.info->shape)},
                         {"bytes", r.info->size_bytes()},
                         {"shard", *r.shard}};
        if (encodings)
            if (const EncodedWeight* w = encodings->holder.at(r.info)) {
                row["weight"] = w->name;
                row["encoding"] = w->encoding;
            }
        rows.push_back(std::move(row));
    }
    root[all_tensors ? "tensor_list" : "largest"] = std::move(rows);
    if (c.shard_names().size() == 1) {
        const SafetensorsFile& f = c.shard(c.shard_names().front());
        if (f.header().has_metadata) {
            json::object meta;
            for (const auto& [k, v] : f.header().metadata) meta[k] = v;
            root["metadata"] = std::move(meta);
        }
    }
    if (plan.plan) root["plan"] = plan_json({*plan.plan, c, plan.overridden}, full_plan);
    else root["plan"] = nullptr;
    std::cout << json::serialize(root) << "\n";
}

void print_text(const Checkpoint& c, const Summary& s, const std::optional<EncodingSummary>& encodings, std::size_t top,
                bool all_tensors, const PlanResult& plan, bool full_plan) {
    // Every name below comes from the checkpoint's files: printed through printable_name().
    std::cout << "checkpoint: " << printable_name(c.directory().string());
    if (c.index_path()) std::cout << " (index " << printable_name(c.index_path()->filename().string()) << ")";
    else std::cout << " (single file " << printable_name(c.shard_names().front()) << ")";
    std::cout << "\n";
    if (c.has_config()) {
        ModelConfig config = c.config();
        std::cout << "model_type: " << (config.model_type().empty() ? "(none)" : printable_name(config.model_type()));
        auto arch = config.architectures();
        if (!arch.empty()) std::cout << "  architectures: " << printable_name(arch.front());
        std::cout << "\n";
    }
    std::cout << "shards: " << c.shard_names().size() << "  tensors: " << with_commas(s.rows.size())
              << "  data: " << with_commas(s.data_bytes) << " bytes (" << human_bytes(s.data_bytes) << ")"
              << "  headers: " << with_commas(s.header_bytes) << " bytes\n";
    if (c.shard_names().size() == 1) {
        const SafetensorsFile& f = c.shard(c.shard_names().front());
        if (f.header().has_metadata) {
            std::cout << "metadata:";
            for (const auto& [k, v] : f.header().metadata) std::cout << " " << printable_name(k) << "=" << printable_name(v);
            std::cout << "\n";
        }
    }
    std::cout << "\ndtypes:\n";
    for (const auto& [dtype, cb] : s.by_dtype)
        std::cout << "  " << std::left << std::setw(12) << dtype_name(dtype) << std::right << std::setw(10)
                  << with_commas(cb.first) << " tensors " << std::setw(20) << with_commas(cb.second) << " bytes\n";
    if (encodings) {
        std::cout << "\nweights by encoding:\n";
        for (const auto& [summary, r] : encodings->by_summary)
            std::cout << "  " << std::left << std::setw(8) << r.encoding << " " << std::setw(44) << printable_text(summary)
                      << std::right << std::setw(10) << with_commas(r.weights) << " weights " << std::setw(20)
                      << with_commas(r.bytes) << " bytes\n";
        if (encodings->other_tensors)
            std::cout << "  " << with_commas(encodings->other_tensors) << " tensor(s) belong to no weight an encoding reads\n";
        if (!encodings->refused.empty())
            std::cout << "  " << with_commas(encodings->refused.size())
                      << " tensor(s) cannot be decoded, e.g. " << printable_text(encodings->refused.front().second.what()) << "\n";
    }
    std::size_t n = all_tensors ? s.rows.size() : std::min(top, s.rows.size());
    if (n > 0) std::cout << "\n" << (all_tensors ? "tensors (largest first):\n" : "largest tensors:\n");
    for (std::size_t i = 0; i < n; ++i) {
        const auto& r = s.rows[i];
        std::cout << "  " << std::left << std::setw(48) << printable_name(r.info->name) << " " << std::setw(8)
                  << dtype_name(r.info->dtype) << " " << std::setw(18) << shape_to_string(r.info->shape) << " "
                  << std::right << std::setw(12) << human_bytes(r.info->size_bytes()) << "  " << printable_name(*r.shard);
        if (encodings)
            if (const EncodedWeight* w = encodings->holder.at(r.info)) std::cout << "  " << w->encoding;
        std::cout << "\n";
    }
    if (plan.plan) print_plan_text(std::cout, {*plan.plan, c, plan.overridden}, full_plan);
    else if (!plan.reason_absent.empty()) std::cout << "\n" << plan.reason_absent << "\n";
}

}  // namespace

int run_inspect_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string path;
    std::size_t top = 10;
    std::string family;
    bool as_json = false, all_tensors = false, full_plan = false, headers_only = false;
    po::options_description options("Options");
    options.add_options()
        ("path", po::value(&path)->value_name("PATH"),
         "model folder (with model.safetensors.index.json or model.safetensors, else pytorch_model.bin.index.json or "
         "pytorch_model.bin), an index file, a .safetensors or .bin file, or a converted output folder (gguf, kt tree)")
        ("top", po::value(&top)->value_name("N")->default_value(10), "how many of the largest tensors to list")
        ("tensors", po::bool_switch(&all_tensors), "list every tensor")
        ("family", po::value(&family)->value_name("NAME"),
         "use this adapter (id, model_type or synth release) instead of detecting the family from config.json")
        ("plan", po::bool_switch(&full_plan), "print the whole MoE plan: every expert's source and every tensor's role")
        ("headers-only", po::bool_switch(&headers_only), "only summarise the safetensors headers (no family, no plan)")
        ("json", po::bool_switch(&as_json), "print JSON instead of text");
    po::positional_options_description positional;
    positional.add("path", 1);
    if (!parse_command(args, options, globals,
                       {"moequant inspect PATH [--top N] [--tensors] [--family NAME] [--plan] [--json]",
                        "Validates every shard header (as the reference safetensors reader does, and\n"
                        "stricter) and summarises the checkpoint. With a config.json next to the weights\n"
                        "it also detects the model family and prints the MoE plan: which layers hold\n"
                        "routed experts, their shapes and encodings, the role of every tensor, what\n"
                        "is skipped and why; and how each weight is stored (its encoding). Tensor data\n"
                        "is never read. A converted output (a folder, or a GGUF model file: a split one by\n"
                        "its first part) is summarised as one: its files, expert matrices, recorded facts."},
                       {}, positional))
        return 0;
    if (path.empty()) throw_usage_error("inspect needs a PATH", {.hint = "moequant inspect --help"});

    Registry registry;
    load_plugins(registry, globals);

    std::optional<Checkpoint> opened;
    try {
        opened.emplace(Checkpoint::open(path));
    } catch (const Error& e) {
        // No checkpoint here: a converted output (a gguf or kt-tree folder, a .gguf file) is
        // summarised as one.
        std::error_code ec;
        const bool output = (e.code() == "NoCheckpoint" && std::filesystem::is_directory(path, ec)) || e.code() == "GgufNotSafetensors";
        if (!output) throw;
        try {
            inspect_converted_output(registry, path, as_json);
        } catch (const Error& unknown) {
            if (unknown.code() == "UnknownOutput") throw e;
            throw;
        }
        return 0;
    }
    Checkpoint& checkpoint = *opened;
    attach_encodings(checkpoint, registry);
    Summary summary = summarise(checkpoint);
    order_rows(summary.rows, all_tensors ? summary.rows.size() : top);
    // Everything is computed before anything is printed: a failure is one error line.
    std::optional<EncodingSummary> encodings;
    if (!headers_only) encodings = summarise_encodings(checkpoint, summary);
    PlanResult plan = headers_only ? PlanResult{} : make_plan(registry, checkpoint, family);
    if (as_json) print_json(checkpoint, summary, encodings, top, all_tensors, plan, full_plan);
    else print_text(checkpoint, summary, encodings, top, all_tensors, plan, full_plan);
    warn_about_rejections(registry);
    return 0;
}

}  // namespace moequant::cli
