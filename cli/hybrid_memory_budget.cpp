#include "hybrid_memory_budget.hpp"

#include "human_format.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

namespace moequant::cli {
namespace {

std::uint64_t tensor_bytes(const TensorInfo& info) {
    std::uint64_t n = 1;
    for (std::int64_t d : info.shape) n *= static_cast<std::uint64_t>(d);
    return dtype_byte_size(info.dtype, n).value_or(0);  // the reader checked each tensor's size
}

// Module name -> index of its MoE layer in the plan, for every routed expert matrix.
std::map<std::string, std::size_t> expert_modules(const ModelPlan& plan) {
    std::map<std::string, std::size_t> modules;
    for (std::size_t l = 0; l < plan.moe_layers.size(); ++l)
        for (const ExpertPlan& e : plan.moe_layers[l].experts)
            for (Projection p : expert_projections)
                modules.emplace(expert_module_name(e.weights[static_cast<std::size_t>(p)], e.expert, p), l);
    return modules;
}

}  // namespace

std::uint64_t parse_memory_size(const std::string& text, const std::string& option) {
    auto bad = [&]() -> std::uint64_t {
        throw Error(ErrorKind::usage, option + " '" + text + "' is not a size (e.g. 24GiB, 24GB, 512MiB)", {.code = "BadOption"});
    };
    std::size_t used = 0;
    double value = 0;
    try {
        value = std::stod(text, &used);
    } catch (const std::exception&) {
        return bad();
    }
    std::string unit = text.substr(used);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    static const std::map<std::string, double> units = {
        {"", 1},        {"B", 1},           {"K", 1024.0},       {"KIB", 1024.0},       {"KB", 1e3},
        {"M", 1048576}, {"MIB", 1048576.0}, {"MB", 1e6},         {"G", 1073741824.0},   {"GIB", 1073741824.0},
        {"GB", 1e9},    {"T", 1099511627776.0}, {"TIB", 1099511627776.0}, {"TB", 1e12}};
    const auto it = units.find(unit);
    if (it == units.end() || !std::isfinite(value) || value <= 0) return bad();
    const double bytes = value * it->second;
    if (bytes < 1 || bytes > std::ldexp(1.0, 60)) return bad();
    return static_cast<std::uint64_t>(bytes);
}

std::uint64_t GpuWeightBytes::expert_row() const {
    std::uint64_t sum = 0;
    for (std::uint64_t b : expert_per_layer) sum += b;
    return sum;
}

std::int64_t GpuWeightBytes::experts_per_layer(std::uint64_t budget, std::int64_t experts) const {
    if (budget < fixed)
        throw Error(ErrorKind::usage,
                    "--gpu-memory " + human_bytes(budget) + " does not hold the GPU checkpoint's weights outside the routed experts (" +
                        human_bytes(fixed) + ", which SGLang keeps on the GPU)",
                    {.code = "GpuMemoryTooSmall", .hint = "give more --gpu-memory"});
    const std::uint64_t row = expert_row();
    if (row == 0) return experts;
    return std::min<std::int64_t>(experts, static_cast<std::int64_t>((budget - fixed) / row));
}

GpuWeightBytes measured_gpu_weight_bytes(const Checkpoint& gpu_output, const ModelPlan& plan) {
    const auto modules = expert_modules(plan);
    GpuWeightBytes bytes;
    bytes.measured = true;
    std::vector<std::uint64_t> per_layer(plan.moe_layers.size(), 0);
    for (const std::string& name : gpu_output.tensor_names()) {
        const std::uint64_t size = tensor_bytes(gpu_output.info(name));
        const std::size_t dot = name.rfind('.');
        const auto it = dot == std::string::npos ? modules.end() : modules.find(name.substr(0, dot));
        if (it == modules.end()) bytes.fixed += size;
        else per_layer[it->second] += size;
    }
    for (std::size_t l = 0; l < plan.moe_layers.size(); ++l) {
        const auto experts = static_cast<std::uint64_t>(std::max<std::size_t>(1, plan.moe_layers[l].experts.size()));
        bytes.expert_per_layer.push_back(per_layer[l] / experts);
    }
    return bytes;
}

GpuWeightBytes estimated_gpu_weight_bytes(const Checkpoint& source, const ModelPlan& plan, std::int64_t group_size) {
    GpuWeightBytes bytes;
    for (const auto& [name, role] : plan.roles) {
        if (role == TensorRole::routed_expert || role == TensorRole::routed_expert_scale || role == TensorRole::skipped_mtp ||
            role == TensorRole::skipped_buffer)
            continue;
        if (!source.contains(name)) continue;
        const TensorInfo& info = source.info(name);
        std::uint64_t elements = 1;
        for (std::int64_t d : info.shape) elements *= static_cast<std::uint64_t>(d);
        bytes.fixed += elements * 2;  // BF16
    }
    for (const MoeLayerPlan& layer : plan.moe_layers) {
        std::uint64_t expert = 0;
        if (!layer.experts.empty())
            for (const ExpertWeightSource& w : layer.experts.front().weights) {
                const auto out = static_cast<std::uint64_t>(w.rows), in = static_cast<std::uint64_t>(w.cols);
                const std::uint64_t groups = (in + static_cast<std::uint64_t>(group_size) - 1) / static_cast<std::uint64_t>(group_size);
                expert += out * in / 2 + out * groups * 2 + 16;  // packed INT4, BF16 scales, I64 [2] shape
            }
        bytes.expert_per_layer.push_back(expert);
    }
    return bytes;
}

std::uint64_t CpuExpertBytes::expert_row() const {
    std::uint64_t sum = 0;
    for (std::uint64_t b : expert_per_layer) sum += b;
    return sum;
}

std::int64_t CpuExpertBytes::fewest_gpu_experts(std::uint64_t budget) const {
    const std::uint64_t row = expert_row();
    if (row == 0) return 0;
    return std::max<std::int64_t>(0, experts - static_cast<std::int64_t>(std::min<std::uint64_t>(budget / row, static_cast<std::uint64_t>(experts))));
}

CpuExpertBytes measured_cpu_expert_bytes(const Checkpoint& cpu_output, const ModelPlan& plan) {
    CpuExpertBytes bytes;
    bytes.experts = plan.num_experts;
    std::map<std::int64_t, std::size_t> layer_index;
    for (std::size_t l = 0; l < plan.moe_layers.size(); ++l) layer_index[plan.moe_layers[l].layer] = l;
    std::vector<std::uint64_t> per_layer(plan.moe_layers.size(), 0);
    for (const std::string& name : cpu_output.tensor_names()) {
        // blk.{L}.ffn_{gate,up,down}_exps.{E}.numa.{n}.{weight,scale}: kt-kernel's expert tensors.
        long long layer = -1;
        int used = 0;
        if (std::sscanf(name.c_str(), "blk.%lld.ffn_%*[a-z]_exps.%*d.%n", &layer, &used) < 1 || used == 0) continue;
        if (auto it = layer_index.find(layer); it != layer_index.end()) per_layer[it->second] += tensor_bytes(cpu_output.info(name));
    }
    for (std::size_t l = 0; l < per_layer.size(); ++l)
        bytes.expert_per_layer.push_back(per_layer[l] / static_cast<std::uint64_t>(std::max<std::int64_t>(1, plan.num_experts)));
    return bytes;
}

CpuExpertBytes estimated_cpu_expert_bytes(const ModelPlan& plan, int bits) {
    CpuExpertBytes bytes;
    bytes.experts = plan.num_experts;
    for (const MoeLayerPlan& layer : plan.moe_layers) {
        std::uint64_t expert = 0;
        if (!layer.experts.empty())
            for (const ExpertWeightSource& w : layer.experts.front().weights)
                expert += static_cast<std::uint64_t>(w.rows) * static_cast<std::uint64_t>(w.cols) * static_cast<std::uint64_t>(bits) / 8 +
                          static_cast<std::uint64_t>(w.rows) * 4;
        bytes.expert_per_layer.push_back(expert);
    }
    return bytes;
}

}  // namespace moequant::cli
