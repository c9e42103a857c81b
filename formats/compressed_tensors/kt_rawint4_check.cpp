#include "kt_rawint4_check.hpp"
#include "runtime_check_problems.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>
#include <moequant/safetensors_reader.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>

namespace moequant::formats {

namespace fs = std::filesystem;

namespace {

// Every tensor of every *.safetensors under the folder, as kt's loader maps them (it walks the
// folder and opens them all, so a stray file from another run counts too).
class FolderTensors {
public:
    explicit FolderTensors(const fs::path& folder) {
        std::error_code ec;
        std::vector<fs::path> paths;
        for (fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
             it.increment(ec))
            if (it->path().extension() == ".safetensors" && it->is_regular_file(ec)) paths.push_back(it->path());
        if (ec) throw Error(ErrorKind::io, "cannot list " + printable_name(folder.string()) + ": " + ec.message());
        std::sort(paths.begin(), paths.end());
        files_.reserve(paths.size());
        for (const auto& p : paths) {
            try {
                files_.push_back(SafetensorsFile::open(p));
            } catch (const Error& e) {  // kt's loader would stop on it too
                unreadable_.push_back(e.what());
                continue;
            }
            for (const TensorInfo& t : files_.back().tensors()) {
                auto [at, fresh] = where_.try_emplace(t.name, files_.size() - 1, &t);
                if (!fresh)
                    duplicates_.push_back({t.name, relative(files_[at->second.first].path(), folder), relative(p, folder)});
            }
        }
    }
    const TensorInfo* find(const std::string& name) const {
        const auto it = where_.find(name);
        return it == where_.end() ? nullptr : it->second.second;
    }
    const SafetensorsFile& file_of(const std::string& name) const { return files_[where_.at(name).first]; }
    // (tensor, one file, another file) for every name two files hold.
    const std::vector<std::array<std::string, 3>>& duplicates() const { return duplicates_; }
    // Why each *.safetensors file that cannot be read was not.
    const std::vector<std::string>& unreadable() const { return unreadable_; }

private:
    static std::string relative(const fs::path& p, const fs::path& folder) { return p.lexically_relative(folder).string(); }
    std::vector<SafetensorsFile> files_;
    std::map<std::string, std::pair<std::size_t, const TensorInfo*>> where_;
    std::vector<std::array<std::string, 3>> duplicates_;
    std::vector<std::string> unreadable_;
};

using Problems = RuntimeCheckProblems;

// The prefix under which kt finds layer `layer`'s experts: the bases amx.py tries in order, each
// also with "language_model." before it (the loader's fallback), the first whose expert 0 has
// an up_proj.weight_packed. Empty when none.
std::string experts_prefix(const FolderTensors& tensors, std::int64_t layer) {
    const std::string l = std::to_string(layer);
    for (const std::string& base : {"model.layers." + l, "language_model.model.layers." + l, "model.language_model.layers." + l})
        for (const std::string& prefix : {base, "language_model." + base})
            if (tensors.find(prefix + ".mlp.experts.0.up_proj.weight_packed")) return prefix + ".mlp.experts";
    return {};
}

// kt's group size of one projection: its in_features over the scale's columns.
struct ProjectionGroups {
    std::int64_t in_features = 0, scale_columns = 0;
    std::int64_t group() const noexcept { return scale_columns > 0 ? in_features / scale_columns : 0; }
};

std::int64_t stored_shape_value(const FolderTensors& tensors, const std::string& name, int index) {
    const TensorView v = tensors.file_of(name).view(name);
    std::int64_t value = 0;
    std::memcpy(&value, v.bytes.data() + index * 8, 8);
    return value;
}

// Code -8 (nibble 0: compressed-tensors stores code + 8), which kt's amx and amx_blocked
// backends multiply with the wrong sign (docs/kt-arithmetic.md): every one is a problem.
void check_code_range(const FolderTensors& tensors, const std::string& packed_name, Problems& problems) {
    TensorView codes;
    try {
        codes = tensors.file_of(packed_name).view(packed_name);
    } catch (const Error& e) {  // its file cannot be mapped
        problems.add("ReadableFiles", e.what());
        return;
    }
    std::int64_t lowest = 0;
    for (const std::byte b : codes.bytes) lowest += ((static_cast<unsigned>(b) & 0xF) == 0) + ((static_cast<unsigned>(b) >> 4) == 0);
    if (lowest)
        problems.add("Int4Range", printable_name(packed_name) + " holds " + std::to_string(lowest) + " of " +
                                      std::to_string(2 * codes.bytes.size()) +
                                      " codes -8, which kt's amx and amx_blocked backends multiply with the wrong sign "
                                      "(operators/amx/la/amx_quantization.hpp:237-252; quantize with gptq --for kt-rawint4: codes -7..7)");
}

// The checks of one expert projection; returns its scale columns (0 when unreadable).
std::int64_t check_projection(const FolderTensors& tensors, const std::string& module, std::int64_t rows, std::int64_t cols,
                              Problems& problems) {
    const std::string packed_name = module + ".weight_packed", scale_name = module + ".weight_scale";
    const TensorInfo* packed = tensors.find(packed_name);
    const TensorInfo* scale = tensors.find(scale_name);
    if (!packed || !scale) {
        problems.add("ExpertTensors", printable_name(packed ? scale_name : packed_name) + " is missing (kt's loader needs it)");
        return 0;
    }
    if (tensors.find(module + ".weight_g_idx"))
        problems.add("NoGroupIndex", printable_name(module + ".weight_g_idx") +
                                         " is stored (actorder group): kt ignores it and would decode the columns in the wrong groups");
    if (tensors.find(module + ".weight_zero_point"))
        problems.add("Symmetric", printable_name(module + ".weight_zero_point") + " is stored: kt's RAWINT4 has no zero points");
    const bool two_d = packed->shape.size() == 2 && packed->shape[0] == rows;
    if (!two_d || !(packed->dtype == DType::I32 || packed->dtype == DType::U8)) {
        problems.add("Int4Codes", printable_name(packed_name) + " is " + std::string(dtype_name(packed->dtype)) + " " +
                                      shape_to_string(packed->shape) + ", expected I32 [" + std::to_string(rows) + ", " +
                                      std::to_string(cols / 8) + "] (or U8 [" + std::to_string(rows) + ", " +
                                      std::to_string(cols / 2) + "], which kt's loader passes through)");
    } else {
        const std::int64_t codes = packed->shape[1] * (packed->dtype == DType::I32 ? 8 : 2);
        if (codes != cols)
            problems.add("Int4Codes", printable_name(packed_name) + " " + shape_to_string(packed->shape) + " holds " +
                                          (codes == 2 * cols ? "8-bit codes (W8A16)" : "not 4-bit codes") + " of " +
                                          std::to_string(cols) + " columns: kt reads every byte as two 4-bit codes");
        else
            check_code_range(tensors, packed_name, problems);
    }
    if (scale->dtype != DType::BF16)
        problems.add("Bf16Scales", printable_name(scale_name) + " is " + std::string(dtype_name(scale->dtype)) +
                                       ": kt's RAWINT4 reads BF16 scales only");
    if (scale->shape.size() != 2 || scale->shape[0] != rows || scale->shape[1] <= 0 || cols % scale->shape[1] != 0) {
        problems.add("OneGroupSize", printable_name(scale_name) + " " + shape_to_string(scale->shape) + " is not [" +
                                         std::to_string(rows) + ", G] with G dividing the " + std::to_string(cols) + " columns");
        return 0;
    }
    if (const TensorInfo* shape = tensors.find(module + ".weight_shape")) {
        try {
            const bool readable = shape->dtype == DType::I64 && shape->shape == Shape{2};
            if (!readable || stored_shape_value(tensors, module + ".weight_shape", 0) != rows ||
                stored_shape_value(tensors, module + ".weight_shape", 1) != cols)
                problems.add("WeightShape", printable_name(module + ".weight_shape") + " is not I64 [2] holding [" +
                                                std::to_string(rows) + ", " + std::to_string(cols) + "]");
        } catch (const Error& e) {  // its file cannot be mapped
            problems.add("ReadableFiles", e.what());
        }
    }
    return scale->shape[1];
}

// The backends of amx.py's _select_rawint4_backend and what their kernels compute right in kt
// 95009ea6 (docs/kt-rawint4.md, docs/kt-arithmetic.md). Codes -8 are refused before this
// (Int4Range), so what is left is each kernel's group sizes, and the avx2 backend's lifetime bug.
std::vector<RuntimeVerdict> backends_for(std::int64_t group, std::int64_t hidden, std::int64_t intermediate) {
    const bool divides = group > 0 && hidden % group == 0 && intermediate % group == 0;
    const bool words = hidden % 8 == 0 && intermediate % 8 == 0;
    auto verdict = [](bool runs, const std::string& why) { return std::pair{runs, runs ? std::string() : why}; };
    const auto amx = verdict(group == 32 && divides,
                             "its kernel reads two scales per 64 columns (operators/amx/la/amx_kernels.hpp:3443-3445): group 32 "
                             "only; another group reads past the scales: wrong results, or a crash at group 128");
    const auto vnni = verdict(divides && words && group % 32 == 0 && group <= 256,
                              "needs a group size that is a multiple of 32, at most 256, dividing the columns");
    const auto avx2 = verdict(false, "kt 95009ea6 frees the loaded tensors (python/utils/amx.py:939-947) this backend keeps "
                                     "pointers into (operators/avx2/rawint4-moe.hpp:310-339): wrong results whatever the folder holds");
    return {
        {"amx", "the default whenever kt-kernel is built with AVX-512 (AVX512F+BW; AMX not needed)", amx.first, amx.second},
        {"amx_blocked", "chosen only by KT_RAWINT4_BACKEND=amx_blocked; same needs as amx", amx.first, amx.second},
        {"avxvnni", "the default on a kt-kernel built without AVX-512 on a CPU with AVX-VNNI", vnni.first, vnni.second},
        {"avx2", "the last default; any AVX2 CPU; serve with --kt-threadpool-count 1", avx2.first, avx2.second},
    };
}

}  // namespace

RuntimeCheckInfo kt_rawint4_check_info() {
    return {.name = "kt-rawint4",
            .description = "kt-kernel's --kt-method RAWINT4 CPU experts reading the folder",
            .runtime = "kt-kernel RAWINT4",
            .target = "--kt-method RAWINT4 on this folder",
            .target_in_full = "--kt-method RAWINT4 --kt-weight-path on this folder",
            .verdict_kind = "backend",
            .default_chooser = "kt",
            .verdict_setting = "KT_RAWINT4_BACKEND"};
}

RuntimeCheckReport check_kt_rawint4(const fs::path& folder, const ModelPlan& plan) {
    RuntimeCheckReport report;
    std::int64_t group_size = 0;  // kt's hidden_size / gate scale columns; 0 when not found
    Problems problems(report);
    const FolderTensors tensors(folder);
    for (const std::string& why : tensors.unreadable()) problems.add("ReadableFiles", why);
    for (const auto& [name, first, second] : tensors.duplicates())
        problems.add("OneTensorPerName", printable_name(name) + " is in both " + printable_name(first) + " and " +
                                             printable_name(second) + ": kt would read one of them");
    for (const MoeLayerPlan& layer : plan.moe_layers) {
        const std::string prefix = experts_prefix(tensors, layer.layer);
        if (prefix.empty()) {
            const std::string stored = layer.experts.empty() ? std::string()
                                                             : expert_module_name(layer.experts.front().weights[1], layer.experts.front().expert, Projection::up);
            problems.add("ExpertsFound", "kt finds no INT4 experts of layer " + std::to_string(layer.layer) +
                                             ": no model.layers." + std::to_string(layer.layer) +
                                             ".mlp.experts.0.up_proj.weight_packed (nor under the language_model prefixes kt tries); "
                                             "this model's are " + printable_name(stored) +
                                             (tensors.find(stored + ".weight_packed") ? "" : ", not stored as INT4 here"));
            continue;
        }
        std::size_t found = 0;
        while (tensors.find(prefix + "." + std::to_string(found) + ".up_proj.weight_packed")) ++found;
        if (found != layer.experts.size())
            problems.add("ExpertsFound", "kt counts " + std::to_string(found) + " experts under " + printable_name(prefix) +
                                             " (up to the first missing up_proj.weight_packed), the model has " +
                                             std::to_string(layer.experts.size()));
        // kt's wrapper of each layer takes the group size from the layer's expert 0 gate
        // (hidden_size / its scale columns) and uses it for every projection of the layer.
        std::int64_t layer_group = 0;
        for (std::size_t e = 0; e < std::min(found, layer.experts.size()); ++e)
            for (Projection p : expert_projections) {
                const ExpertWeightSource& source = layer.experts[e].weights[static_cast<int>(p)];
                const std::string module = prefix + "." + std::to_string(e) + "." + std::string(projection_name(p)) + "_proj";
                const std::int64_t columns = check_projection(tensors, module, source.rows, source.cols, problems);
                const ProjectionGroups here{source.cols, columns};
                if (e == 0 && p == Projection::gate) layer_group = here.group();
                if (!columns || !layer_group || here.group() == layer_group) continue;
                problems.add("OneGroupSize", printable_name(module + ".weight_scale") + " has " + std::to_string(columns) +
                                                 " groups of " + std::to_string(here.group()) + " columns, but kt takes " +
                                                 std::to_string(layer_group) +
                                                 " (hidden_size / expert 0's gate scale columns) for every projection of the layer" +
                                                 (columns == 1 ? " (one scale per row: kt has no channel mode)" : ""));
            }
        if (!layer_group) continue;
        if (!group_size) group_size = layer_group;
        else if (layer_group != group_size)
            problems.add("OneGroupSize", "layer " + std::to_string(layer.layer) + "'s group size is " + std::to_string(layer_group) +
                                             ", the first layer's " + std::to_string(group_size) +
                                             ": verify holds the model to one (kt would derive each layer's own)");
    }
    if (plan.moe_layers.empty()) problems.add("ExpertsFound", "the model has no routed experts for kt's MoE method");
    report.facts.push_back({.key = "group_size",
                            .value = group_size,
                            .brief = "group",
                            .label = "group size",
                            .derivation = "hidden_size / the gate scale's columns, as kt derives it"});
    if (group_size > 0) {
        report.verdicts = backends_for(group_size, plan.hidden_size, plan.expert_intermediate_size);
        const bool any = std::any_of(report.verdicts.begin(), report.verdicts.end(), [](const auto& b) { return b.runs; });
        if (!any) problems.add("Backend", "no RAWINT4 backend of kt computes group size " + std::to_string(group_size));
        else if (!report.verdicts.front().runs)
            report.warnings.push_back("kt's default RAWINT4 backend (amx, whenever kt-kernel is built with AVX-512) needs group 32 and "
                                      "computes wrong results for group " + std::to_string(group_size) +
                                      " without an error: serve it only with KT_RAWINT4_BACKEND set to a backend that runs it, "
                                      "or quantize with gptq --group_size 32");
    }
    return report;
}

}  // namespace moequant::formats
