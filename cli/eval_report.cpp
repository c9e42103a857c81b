#include "eval_report.hpp"

#include "expert_counts.hpp"

#include <moequant/printable.hpp>

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

namespace moequant::cli {

namespace json = boost::json;

namespace {

// The expert ids (not plan positions) of a layer's experts that received no eval token.
std::vector<std::int64_t> unreached_experts(const LayerOutputError& layer, const ModelPlan& plan) {
    std::vector<std::int64_t> ids;
    const MoeLayerPlan* moe = plan.moe_layer(layer.layer);
    for (std::size_t i = 0; moe && i < layer.tokens_per_expert.size() && i < moe->experts.size(); ++i)
        if (layer.tokens_per_expert[i] == 0) ids.push_back(moe->experts[i].expert);
    return ids;
}

// "layer 3: 5,9; layer 7: 1" and the number of experts named.
std::pair<std::string, std::size_t> unreached_list(const EvaluationReport& report, const ModelPlan& plan) {
    std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> layers;
    std::size_t count = 0;
    for (const auto& l : report.layers) {
        layers.emplace_back(l.layer, unreached_experts(l, plan));
        count += layers.back().second.size();
    }
    return {layer_expert_list(layers), count};
}

// "fewest 0, median 41, most 230 eval tokens per expert over 2 MoE layer(s)".
std::string coverage_summary(const EvaluationReport& report) {
    std::vector<std::int64_t> counts;
    for (const auto& l : report.layers) counts.insert(counts.end(), l.tokens_per_expert.begin(), l.tokens_per_expert.end());
    if (counts.empty()) return {};
    return count_spread(std::move(counts)) + " eval tokens per expert over " + std::to_string(report.layers.size()) +
           " MoE layer(s)";
}

}  // namespace

json::object eval_json(const EvaluationReport& r, const ModelPlan& plan) {
    json::array layers, coverage;
    for (const auto& l : r.layers) {
        layers.push_back(json::object{{"layer", l.layer}, {"relative_output_error", l.relative_output_error}});
        json::array tokens(l.tokens_per_expert.begin(), l.tokens_per_expert.end());
        const std::vector<std::int64_t> ids = unreached_experts(l, plan);
        coverage.push_back(json::object{{"layer", l.layer}, {"tokens_per_expert", std::move(tokens)},
                                        {"experts_without_tokens", json::array(ids.begin(), ids.end())}});
    }
    const json::object o{{"perplexity_source", r.perplexity_source}, {"perplexity_quantized", r.perplexity_quantized},
                         {"kl_mean", r.kl_mean}, {"kl_p99", r.kl_p99}, {"top1_agreement", r.top1_agreement},
                         {"tokens", r.tokens}, {"layers", std::move(layers)}, {"coverage", std::move(coverage)}};
    return o;
}

json::object eval_report_data(const std::string& title, const std::string& command, json::object output, const ModelPlan&,
                              const std::string& placement_file) {
    std::map<std::int64_t, json::value> masks;
    if (!placement_file.empty()) {
        std::ifstream in(placement_file);
        std::stringstream text;
        text << in.rdbuf();
        // eval has read and checked this placement already (read_gpu_placement).
        const json::value placement = json::parse(text.str());
        for (const json::value& l : placement.at("layers").as_array())
            masks[l.at("layer").to_number<std::int64_t>()] = l.at("gpu_experts_mask");
    }
    json::array layers;
    for (const json::value& c : output.at("coverage").as_array()) {
        json::object layer{{"layer", c.at("layer")}, {"routed_tokens", c.at("tokens_per_expert")}};
        if (auto it = masks.find(c.at("layer").to_number<std::int64_t>()); it != masks.end()) layer["gpu_experts_mask"] = it->second;
        layers.push_back(std::move(layer));
    }
    json::object usage{{"tokens", output.at("tokens")}, {"layers", std::move(layers)}};
    return {{"title", title}, {"commands", json::array{json::string(command)}}, {"usage", std::move(usage)},
            {"outputs", json::array{std::move(output)}}};
}

void print_eval_json(const EvaluationReport& r, const ModelPlan& plan) { std::cout << json::serialize(eval_json(r, plan)) << "\n"; }

void print_eval_text(const EvaluationReport& r, const ModelPlan& plan, const std::string& what) {
    std::printf("eval of %s on %lld token(s)\n", printable_text(what).c_str(), static_cast<long long>(r.tokens));
    std::printf("  perplexity   source %.6g  quantized %.6g\n", r.perplexity_source, r.perplexity_quantized);
    std::printf("  KL(source || quantized)  mean %.6g  p99 %.6g nats/token\n", r.kl_mean, r.kl_p99);
    std::printf("  top-1 agreement  %.4f\n", r.top1_agreement);
    std::printf("  relative output error per MoE layer (on the source's inputs):\n");
    for (const auto& l : r.layers) std::printf("    layer %3lld  %.6g\n", static_cast<long long>(l.layer), l.relative_output_error);
    if (const std::string summary = coverage_summary(r); !summary.empty())
        std::printf("  coverage  %s; %zu expert(s) received none\n", summary.c_str(), unreached_list(r, plan).second);
    std::fflush(stdout);
}

void note_unmeasured_experts(const EvaluationReport& report, const ModelPlan& plan) {
    const auto [list, count] = unreached_list(report, plan);
    if (count == 0) return;
    std::fprintf(stderr,
                 "moequant: note: eval coverage: %zu expert(s) received no eval token, so the numbers do not measure "
                 "their quantization (%s); more or longer samples reach more experts\n",
                 count, list.c_str());
}

}  // namespace moequant::cli
