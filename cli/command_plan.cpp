// `moequant plan`: which routed experts to keep on the GPU. Runs the model's routers on
// recorded MoE inputs (the recorded-activation format: layers.L.moe_input + sample_lengths),
// counts how often each expert is chosen, and places --num-gpu-experts experts on the GPU
// (kt-kernel's strategies: frequency over all layers, uniform per layer, front-loading). Writes
// the placement as JSON: per layer the GPU experts, the mask and the routing counts.

#include "command.hpp"
#include "command_line.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "report_page.hpp"

#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/expert_placement.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/engine/progress.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/parallel.hpp>

#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;
namespace json = boost::json;

namespace {

PlacementStrategy parse_strategy(const std::string& name) {
    if (name == "frequency") return PlacementStrategy::frequency;
    if (name == "uniform") return PlacementStrategy::uniform;
    if (name == "front-loading") return PlacementStrategy::front_loading;
    throw_usage_error("--strategy must be frequency, uniform or front-loading, not '" + name + "'");
}

// Fraction of the layer's expert choices that land on GPU experts.
double coverage(const ExpertActivity& a, std::size_t layer, const std::vector<bool>& gpu) {
    std::int64_t hit = 0, all = 0;
    for (std::size_t e = 0; e < gpu.size(); ++e) {
        all += a.counts[layer][e];
        if (gpu[e]) hit += a.counts[layer][e];
    }
    return all > 0 ? static_cast<double>(hit) / static_cast<double>(all) : 0.0;
}

json::object placement_json(const ModelPlan& plan, const ExpertActivity& a, const std::vector<std::vector<bool>>& gpu,
                            std::int64_t gpu_experts, PlacementStrategy strategy, const CalibrationActivations& calibration) {
    json::object o;
    o["family"] = plan.family;
    o["model_type"] = plan.model_type;
    o["num_gpu_experts"] = gpu_experts;
    o["strategy"] = std::string(placement_strategy_name(strategy));
    o["router"] = describe_router(plan.router);
    o["calibration"] = json::object{{"samples", calibration.samples()}, {"tokens", a.tokens}};
    o["experts_per_layer"] = a.experts;
    json::array layers;
    std::int64_t hit = 0, all = 0;
    for (std::size_t l = 0; l < a.layers.size(); ++l) {
        json::array ids, mask, counts;
        for (std::size_t e = 0; e < gpu[l].size(); ++e) {
            if (gpu[l][e]) ids.push_back(static_cast<std::int64_t>(e));
            mask.push_back(static_cast<bool>(gpu[l][e]));
            counts.push_back(a.counts[l][e]);
            all += a.counts[l][e];
            if (gpu[l][e]) hit += a.counts[l][e];
        }
        layers.push_back(json::object{{"layer", a.layers[l]},
                                      {"gpu_experts", std::move(ids)},
                                      {"gpu_experts_mask", std::move(mask)},
                                      {"routed_tokens", std::move(counts)},
                                      {"gpu_coverage", coverage(a, l, gpu[l])}});
    }
    o["gpu_coverage"] = all > 0 ? static_cast<double>(hit) / static_cast<double>(all) : 0.0;
    o["layers"] = std::move(layers);
    return o;
}

}  // namespace

int run_plan_command(const std::vector<std::string>& args, GlobalOptions globals) {
    std::string input, activations, output, strategy_name = "frequency", family, report_file;
    std::int64_t gpu_experts = -1, samples = 0, max_length = 0;
    std::size_t threads = 0;
    bool as_json = false, overwrite = false, quiet = false;
    po::options_description options("Options");
    options.add_options()
        ("model_id", po::value(&input)->value_name("PATH"), "model folder (a safetensors or pytorch_model.bin index or single file), or a GGUF model file")
        ("input-path,i", po::value(&input)->value_name("PATH"), "same as --model_id")
        ("activations", po::value(&activations)->value_name("FILE"),
         "recorded MoE inputs: layers.L.moe_input [tokens, hidden] and sample_lengths (safetensors)")
        ("num-gpu-experts", po::value(&gpu_experts), "experts to keep on the GPU, over all MoE layers")
        ("strategy", po::value(&strategy_name)->value_name("NAME")->default_value("frequency"),
         "frequency (most chosen over all layers), uniform (same count per layer), front-loading (first layers first)")
        ("num_calibration_samples", po::value(&samples), "use the first N samples of the activations (default: all)")
        ("max_sequence_length", po::value(&max_length), "use at most this many tokens of each sample (default: all)")
        ("output,o", po::value(&output)->value_name("FILE"), "write the placement JSON here")
        ("report", po::value(&report_file)->value_name("FILE"),
         "also write the report page: one self-contained HTML file with the experts' use as a heat map, the GPU experts marked")
        ("overwrite", po::bool_switch(&overwrite), "replace an existing --output or --report file")
        ("json", po::bool_switch(&as_json), "print the placement JSON instead of the summary")
        ("family", po::value(&family)->value_name("NAME"), "use this adapter (id, model_type or synth release) instead of detecting it")
        ("threads", po::value(&threads), "worker threads (default: all cores)")
        ("quiet,q", po::bool_switch(&quiet), "no progress output");
    if (!parse_command(args, options, globals,
                       {"moequant plan --model_id MODEL --activations FILE --num-gpu-experts N [--strategy frequency|uniform|front-loading]\n"
                        "              [--output placement.json]",
                        "Runs the model's routers on recorded MoE inputs and places the N most used routed experts on the\n"
                        "GPU (kt-kernel's gpu_experts_mask; N counts over all MoE layers, SGLang's --kt-num-gpu-experts per\n"
                        "layer), the others on the CPU. Prints per layer the GPU experts and the share of expert choices\n"
                        "they serve."},
                       {"threads", "num_calibration_samples", "max_sequence_length"}))
        return 0;
    if (input.empty()) throw_usage_error("plan needs --model_id", {.hint = "moequant plan --help"});
    if (activations.empty()) throw_usage_error("plan needs --activations (recorded MoE inputs)");
    if (gpu_experts < 0) throw_usage_error("plan needs --num-gpu-experts N (N >= 0)");
    const PlacementStrategy strategy = parse_strategy(strategy_name);
    if (threads > 0) set_max_threads(threads);

    Registry registry;
    load_plugins(registry, globals);
    const PlannedSource source = open_planned_source(registry, input, family);
    if (!output.empty())
        check_output_file(output, {.folders = {source.checkpoint.directory()}, .files = {activations}}, overwrite);
    if (!report_file.empty())
        check_output_file(report_file, {.folders = {source.checkpoint.directory()}, .files = {activations, output}}, overwrite);
    CalibrationActivations calibration = CalibrationActivations::open(activations);
    calibration.select(samples, max_length);
    StreamProgress progress(stderr);
    const ExpertActivity activity = measure_expert_activity(calibration, source.plan, source.checkpoint, quiet ? nullptr : &progress);
    const auto gpu = place_gpu_experts(activity, gpu_experts, strategy);
    const json::object placement = placement_json(source.plan, activity, gpu, gpu_experts, strategy, calibration);
    if (!output.empty()) write_file_atomically(output, json::serialize(placement) + "\n");
    if (!report_file.empty())
        write_report_page(report_file, {{"title", "moequant plan: " + source.plan.family + ", " + std::to_string(gpu_experts) +
                                                      " expert(s) on the GPU (" + std::string(placement_strategy_name(strategy)) + ")"},
                                        {"commands", json::array{json::string(command_line_text("plan", args))}},
                                        {"usage", json::object{{"tokens", activity.tokens}, {"layers", placement.at("layers")}}}});
    if (as_json) {
        std::cout << json::serialize(placement) << "\n";
        return 0;
    }
    std::cout << source.plan.family << ": " << activity.layers.size() << " MoE layers x " << activity.experts
              << " experts, router " << describe_router(source.plan.router) << "; " << activity.tokens << " token(s) in "
              << calibration.samples() << " sample(s)\n";
    for (std::size_t l = 0; l < activity.layers.size(); ++l) {
        std::string ids;
        std::size_t n = 0;
        for (std::size_t e = 0; e < gpu[l].size(); ++e)
            if (gpu[l][e]) {
                if (n++ < 16) ids += (ids.empty() ? "" : " ") + std::to_string(e);
            }
        if (n > 16) ids += " ...";
        char line[64];
        std::snprintf(line, sizeof line, "%5.1f%%", 100.0 * coverage(activity, l, gpu[l]));
        std::cout << "  layer " << activity.layers[l] << ": " << n << " on GPU, serving " << line << " of expert choices"
                  << (n ? " (" + ids + ")" : std::string()) << "\n";
    }
    std::printf("%lld expert(s) on GPU (%s) serve %.1f%% of all expert choices%s\n", static_cast<long long>(gpu_experts),
                std::string(placement_strategy_name(strategy)).c_str(), 100.0 * placement.at("gpu_coverage").as_double(),
                output.empty() ? "" : ("; placement written to " + output).c_str());
    return 0;
}

}  // namespace moequant::cli
