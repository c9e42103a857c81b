#include "compressed_tensors_reader.hpp"

#include "copied_tensors.hpp"
#include "kt_rawint4_check.hpp"
#include "model_config_file.hpp"
#include "stored_parts.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/error.hpp>
#include <moequant/sharded_writer.hpp>

#include <boost/json.hpp>
#include <boost/regex.hpp>

#include <fstream>
#include <set>
#include <sstream>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

// The pack-quantized tensors of a quantized expert, or the one floating "weight" of one kept
// unquantized (BF16 unless gptq --torch_dtype said otherwise).
constexpr std::array<const char*, 5> part_names = {"weight_packed", "weight_scale", "weight_shape", "weight_g_idx", "weight"};

// "<...>layers.{L}.<...>.experts.{E}.{projection}.{part}" -> key and part; nullopt otherwise.
std::optional<std::pair<StoredPartKey, std::string>> parse_expert_tensor(const std::string& name) {
    const std::size_t last = name.rfind('.');
    if (last == std::string::npos) return std::nullopt;
    const std::string part = name.substr(last + 1);
    if (std::find(part_names.begin(), part_names.end(), part) == part_names.end()) return std::nullopt;
    const std::string module = name.substr(0, last);
    const std::size_t proj_dot = module.rfind('.');
    if (proj_dot == std::string::npos) return std::nullopt;
    const std::string proj = module.substr(proj_dot + 1);
    std::optional<Projection> projection;
    if (proj == "gate_proj" || proj == "w1") projection = Projection::gate;
    if (proj == "up_proj" || proj == "w3") projection = Projection::up;
    if (proj == "down_proj" || proj == "w2") projection = Projection::down;
    const std::string head = module.substr(0, proj_dot);  // "<...>.experts.{E}"
    const std::size_t experts = head.rfind(".experts.");
    const std::int64_t layer = layer_of(name);
    if (!projection || experts == std::string::npos || layer < 0) return std::nullopt;
    auto expert = parse_decimal(std::string_view(head).substr(experts + 9));
    if (!expert) return std::nullopt;
    return std::pair{StoredPartKey{layer, *expert, *projection, 0}, part};
}

// The weight arguments of the one config group, recorded in the options the gptq/rtn quantizers
// are configured with. `type` and `symmetric` are the only values pack-quantized parts without
// a weight_zero_point can have; a strategy and group_size that disagree are not a scheme.
void record_weight_arguments(const json::object& q, Options& recorded) {
    const auto& groups = q.at("config_groups").as_object();
    if (groups.size() != 1) throw std::invalid_argument("expected one config group");
    const auto& weights = groups.begin()->value().at("weights").as_object();
    const std::int64_t bits = weights.at("num_bits").to_number<std::int64_t>();
    if (bits != 4 && bits != 8) throw std::invalid_argument("num_bits must be 4 or 8");
    recorded.set("method", bits == 4 ? "W4A16" : "W8A16");
    recorded.set("quant_type", bits == 4 ? "W4A16" : "W8A16");
    recorded.set("num_bits", std::to_string(bits));
    if (const auto* type = weights.if_contains("type"); type && *type != "int")
        throw std::invalid_argument("type is " + json::serialize(*type) + ", but pack-quantized parts hold int codes");
    if (const auto* symmetric = weights.if_contains("symmetric"); symmetric && *symmetric != true)
        throw std::invalid_argument("symmetric is " + json::serialize(*symmetric) +
                                    ", but the parts carry no weight_zero_point");
    const std::string strategy(weights.at("strategy").as_string());
    recorded.set("strategy", strategy);
    const json::value* group = weights.if_contains("group_size");
    const bool has_group = group && !group->is_null();
    if (strategy == "group") {
        if (!has_group || group->to_number<std::int64_t>() <= 0)
            throw std::invalid_argument("strategy group needs a positive group_size");
        recorded.set("group_size", std::to_string(group->to_number<std::int64_t>()));
    } else if (has_group) {
        throw std::invalid_argument("strategy " + strategy + " has no group_size, got " + json::serialize(*group));
    }
    const auto& order = weights.at("actorder");
    recorded.set("actorder", order.is_string() ? std::string(order.as_string()) : "none");
}

// quantization_config.ignore: module names, or `re:` patterns matched from the start of the
// name (as vLLM matches them, spec §8.1). A missing list ignores nothing. Boost.Regex, not
// std::regex: it gives up on a pattern that backtracks without end, where std::regex would hang
// verify (`re:(.*)*y` over a module name does).
class IgnoreList {
public:
    IgnoreList(const json::object& q, const std::string& where) : where_(where) {
        const json::value* list = q.if_contains("ignore");
        if (!list || list->is_null()) return;
        try {
            for (const auto& n : list->as_array()) {
                const std::string entry(n.as_string());
                if (entry.starts_with("re:")) patterns_.emplace_back(entry.substr(3));  // throws on bad syntax
                else names_.insert(entry);
            }
        } catch (const std::exception& e) {
            throw Error(ErrorKind::input,
                        std::string("quantization_config.ignore is not a list of names and re: patterns: ") + e.what(),
                        {.file = where, .code = "UnsupportedFormat"});
        }
    }
    bool lists(const std::string& module) const {
        if (names_.count(module)) return true;
        for (const auto& p : patterns_) {
            try {
                if (boost::regex_search(module, p, boost::match_continuous)) return true;
            } catch (const std::runtime_error&) {  // the match exceeded Boost.Regex's complexity bound
                throw Error(ErrorKind::input,
                            "quantization_config.ignore pattern 're:" + p.str() + "' is too complex to match",
                            {.file = where_, .tensor = module, .code = "UnsupportedFormat"});
            }
        }
        return false;
    }

private:
    std::string where_;
    std::set<std::string> names_;
    std::vector<boost::regex> patterns_;
};

// What the config states that the stored experts contradict without the source's shapes (those
// checks are verify's, per part): `ignore` must list every BF16 expert and no quantized one
// (vLLM loads an ignored module as a plain weight, spec §8.1), and weight_g_idx is stored
// exactly when actorder is "group" (vLLM reads it only then).
void check_against_config(const StoredPartIndex& index, const Options& recorded, const IgnoreList& ignore,
                          const std::string& where) {
    const std::string actorder = recorded.get_string("actorder", "none");
    const bool group_order = actorder == "group" || actorder == "dynamic";  // "dynamic" is group's alias
    for (const auto& [key, tensors] : index) {
        const std::string& any = tensors.begin()->second;
        const std::string module = any.substr(0, any.rfind('.'));
        if (tensors.count("weight")) {
            if (!ignore.lists(module))
                throw Error(ErrorKind::input,
                            "stores expert '" + module + "' unquantized, but quantization_config.ignore does not list it",
                            {.file = where, .tensor = tensors.at("weight"), .code = "UnlistedUnquantized"});
            continue;
        }
        if (ignore.lists(module))
            throw Error(ErrorKind::input,
                        "quantization_config.ignore lists expert '" + module +
                            "', but the output stores it quantized (vLLM would load it as an unquantized weight)",
                        {.file = where, .tensor = any, .code = "IgnoredButQuantized"});
        if (tensors.count("weight_g_idx") != (group_order ? 1u : 0u)) {
            const std::string why =
                group_order ? "quantization_config.actorder is \"group\", but expert '" + module + "' has no weight_g_idx"
                            : "quantization_config.actorder is " + actorder + ", but expert '" +
                                  module + "' stores a weight_g_idx (read only with actorder \"group\")";
            throw Error(ErrorKind::input, why, {.file = where, .tensor = any, .code = "ConfigContradictsParts"});
        }
    }
}

// A compressed-tensors output, which also says whether kt-kernel's RAWINT4 can read its folder.
class CompressedTensorsReader final : public CheckpointPartReader {
public:
    CompressedTensorsReader(fs::path directory, Checkpoint checkpoint, StoredPartIndex index, Options recorded)
        : CheckpointPartReader(std::move(checkpoint), std::move(index), std::move(recorded)), directory_(std::move(directory)) {}

    RuntimeCheckReport run_runtime_check(std::string_view name, const ModelPlan& plan) const override {
        if (name == kt_rawint4_check_info().name) return check_kt_rawint4(directory_, plan);
        return CheckpointPartReader::run_runtime_check(name, plan);
    }

private:
    fs::path directory_;
};

}  // namespace

std::unique_ptr<OutputReader> open_compressed_tensors(const fs::path& directory) {
    const fs::path config_file = directory / "config.json";
    if (!fs::exists(config_file)) return nullptr;
    const json::value config = read_json_file(config_file);
    const json::object* q = nullptr;
    if (const auto* o = config.if_object())
        if (const auto* v = o->if_contains("quantization_config")) q = v->if_object();
    if (!q || !q->contains("quant_method") || q->at("quant_method") != "compressed-tensors") return nullptr;
    const std::string where = config_file.string();
    if (!q->contains("format") || q->at("format") != "pack-quantized")
        throw Error(ErrorKind::input, "quantization_config.format is not pack-quantized", {.file = where, .code = "UnsupportedFormat"});
    if (!fs::exists(directory / safetensors_index_name))
        throw Error(ErrorKind::input,
                    "the output is incomplete: " + std::string(safetensors_index_name) +
                        " is missing (it is written last, when the conversion finishes)",
                    {.file = directory.string(), .code = "IncompleteOutput", .hint = "rerun the same command to finish it"});
    // The one config group's weight arguments give the scheme verify configures its quantizer with.
    Options recorded;
    recorded.set("experts_on", "gpu");  // vLLM/SGLang's GPU experts
    try {
        record_weight_arguments(*q, recorded);
    } catch (const std::exception& e) {
        throw Error(ErrorKind::input, std::string("quantization_config is not one we read: ") + e.what(),
                    {.file = where, .code = "UnsupportedFormat"});
    }
    Checkpoint checkpoint = Checkpoint::open(directory);
    StoredPartIndex index;
    for (const std::string& name : checkpoint.tensor_names())
        if (auto parsed = parse_expert_tensor(name)) index[parsed->first][parsed->second] = name;
    // Layers whose experts are stored as plain weights (listed in `ignore`): verify compares them
    // with the source as they are.
    std::set<std::int64_t> kept;
    bool quantized = false;
    for (const auto& [key, tensors] : index) {
        if (tensors.count("weight")) kept.insert(key.layer);
        quantized = quantized || tensors.count("weight_packed");
    }
    if (!quantized)
        throw Error(ErrorKind::input, "holds no quantized expert (no *.experts.E.*.weight_packed tensor)",
                    {.file = directory.string(), .code = "NoQuantizedExperts"});
    const IgnoreList ignore(*q, where);
    check_against_config(index, recorded, ignore, where);
    if (!kept.empty()) {
        std::string layers;
        for (std::int64_t l : kept) layers += (layers.empty() ? "" : ",") + std::to_string(l);
        recorded.set("unquantized_layers", layers);
    }
    const auto& first = index.begin()->second.begin()->second;
    const SafetensorsFile& shard = checkpoint.shard(checkpoint.shard_of(first));
    record_shard_metadata(recorded, shard);
    if (auto range = shard.metadata("moequant.quantizer.code_range")) recorded.set("code_range", *range);
    recorded.set("parts", "1");
    return std::make_unique<CompressedTensorsReader>(directory, std::move(checkpoint), std::move(index), std::move(recorded));
}

}  // namespace moequant::formats
