#include "kt_llamafile_check.hpp"

#include "gguf_container.hpp"
#include "gguf_type_policy.hpp"
#include "runtime_check_problems.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace moequant::formats {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t qk_k = 256;  // kt splits the intermediate size in whole QK_K blocks

// The types kt's llamafile kernels multiply (issue 38's list from kt's operators/llamafile;
// IQ4_NL is in its loader's table but not computed, kt's issue #1884; MXFP4 is in neither).
const std::set<std::uint32_t>& kt_types() {
    static const std::set<std::uint32_t> types = {ggml_type_id::q2_k, ggml_type_id::q3_k, ggml_type_id::q4_k, ggml_type_id::q5_k,
                                                  ggml_type_id::q6_k, ggml_type_id::iq4_xs, 16 /* iq2_xxs */, 19 /* iq1_s */,
                                                  ggml_type_id::q4_0, ggml_type_id::q4_1, ggml_type_id::q5_0, ggml_type_id::q5_1,
                                                  ggml_type_id::q8_0};
    return types;
}

using Problems = RuntimeCheckProblems;

struct FoundTensor {
    std::string file;
    GgufTensorInfo info;
};

}  // namespace

RuntimeCheckInfo kt_llamafile_check_info() {
    return {.name = "kt-llamafile",
            .description = "kt-kernel's --kt-method LLAMAFILE CPU experts reading the folder's GGUF files",
            .runtime = "kt-kernel LLAMAFILE",
            .target = "--kt-method LLAMAFILE on this folder",
            .target_in_full = "--kt-method LLAMAFILE --kt-weight-path on this folder",
            .verdict_kind = "backend",
            .default_chooser = "kt",
            .verdict_setting = "--kt-method"};
}

RuntimeCheckReport check_kt_llamafile(const fs::path& folder, const ModelPlan& plan) {
    RuntimeCheckReport report;
    Problems problems(report);
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(folder, ec))
        if (entry.path().extension() == ".gguf" && entry.is_regular_file(ec)) files.push_back(entry.path());
    if (ec) throw Error(ErrorKind::io, "cannot list " + printable_name(folder.string()) + ": " + ec.message());
    std::sort(files.begin(), files.end());
    std::map<std::string, FoundTensor> tensors;
    for (const auto& f : files) {
        GgufFile header;
        try {
            header = read_gguf_file_header(f.string());
        } catch (const Error& e) {  // kt's loader stops on it too
            problems.add("ReadableFiles", e.what());
            continue;
        }
        for (auto& t : header.tensors) {
            const std::string name = t.name;
            if (!tensors.emplace(name, FoundTensor{f.filename().string(), std::move(t)}).second)
                problems.add("OneTensorPerName", printable_name(name) + " is in two of the folder's GGUF files: kt keeps one of them");
        }
    }
    std::int64_t intermediate = 0;
    for (const MoeLayerPlan& layer : plan.moe_layers) {
        const std::string blk = "blk." + std::to_string(layer.layer) + ".";
        if (tensors.count(blk + "ffn_gate_up_exps.weight"))
            problems.add("SeparateGateUp", printable_name(blk + "ffn_gate_up_exps.weight") +
                                               " is fused: kt's LLAMAFILE loads ffn_gate_exps and ffn_up_exps separately");
        for (Projection p : expert_projections) {
            const std::string name = blk + "ffn_" + std::string(projection_name(p)) + "_exps.weight";
            const auto it = tensors.find(name);
            if (it == tensors.end()) {
                problems.add("ExpertsFound", "kt finds no " + printable_name(name) + " in the folder's GGUF files");
                continue;
            }
            const GgufTensorInfo& t = it->second.info;
            const ExpertWeightSource& s = layer.experts.front().weights[static_cast<int>(p)];
            const std::vector<std::int64_t> expected = {s.cols, s.rows, static_cast<std::int64_t>(layer.experts.size())};
            if (t.ne != expected)
                problems.add("ExpertShapes", printable_name(name) + " (" + it->second.file + ") is not [" +
                                                 std::to_string(expected[2]) + ", " + std::to_string(expected[1]) + ", " +
                                                 std::to_string(expected[0]) + "] as the model's experts");
            if (!kt_types().count(t.type))
                problems.add("KtTypes", printable_name(name) + " is " + std::string(ggml_type_name_of(t.type)) +
                                            ", which kt's llamafile kernels do not multiply" +
                                            (t.type == ggml_type_id::iq4_nl ? " (kt's issue #1884)" : "") +
                                            "; they take Q2_K-Q6_K, IQ4_XS, IQ2_XXS, IQ1_S, Q4_0/1, Q5_0/1, Q8_0");
            if (p == Projection::down) intermediate = s.cols;
        }
    }
    if (intermediate > 0 && intermediate % qk_k != 0)
        problems.add("IntermediateBlocks", "moe_intermediate_size " + std::to_string(intermediate) +
                                               " is not a multiple of 256: kt's LLAMAFILE refuses it (python/utils/llamafile.py:82-100)");
    report.facts.push_back({.key = "max_threadpool_count",
                            .value = intermediate / qk_k,
                            .brief = "max TP",
                            .label = "largest --kt-threadpool-count",
                            .derivation = "moe_intermediate_size / 256: each part takes whole 256-value blocks"});
    if (report.usable())
        report.verdicts.push_back({"LLAMAFILE", "kt's LLAMAFILE method, any x86-64 CPU with AVX2", true, ""});
    return report;
}

}  // namespace moequant::formats
