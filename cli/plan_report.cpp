#include "plan_report.hpp"

#include "human_format.hpp"

#include <moequant/printable.hpp>

#include <boost/json.hpp>

#include <map>
#include <set>

namespace moequant::cli {

namespace json = boost::json;

namespace {

// "1-3,5,7-8"
std::string layer_ranges(const std::vector<std::int64_t>& layers) {
    std::string out;
    for (std::size_t i = 0; i < layers.size();) {
        std::size_t j = i;
        while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
        out += (out.empty() ? "" : ",") + std::to_string(layers[i]);
        if (j > i) out += "-" + std::to_string(layers[j]);
        i = j + 1;
    }
    return out;
}

std::vector<std::int64_t> moe_layer_indices(const ModelPlan& plan) {
    std::vector<std::int64_t> layers;
    for (const auto& l : plan.moe_layers) layers.push_back(l.layer);
    return layers;
}

// Distinct encodings per projection over all experts (normally one each), as their summaries.
std::map<Projection, std::set<std::string>> expert_encodings(const PlanReport& report) {
    std::map<Projection, std::set<std::string>> out;
    for (const auto& layer : report.plan.moe_layers)
        for (const auto& e : layer.experts)
            for (Projection p : expert_projections)
                out[p].insert(report.source.weight(e.weights[static_cast<int>(p)].tensor).summary);
    return out;
}

std::map<TensorRole, std::size_t> role_counts(const ModelPlan& plan) {
    std::map<TensorRole, std::size_t> counts;
    for (const auto& [name, role] : plan.roles) ++counts[role];
    return counts;
}

std::string skipped_mtp_reason(const ModelPlan& plan) {
    return "multi-token-prediction tensors (layer index >= num_hidden_layers " +
           std::to_string(plan.num_hidden_layers) + ", or top-level mtp.*)";
}

json::object encoding_json(const EncodedWeight& w) {
    json::object tensors;
    for (const auto& [role, tensor] : w.tensors) tensors[role] = tensor;
    json::object parameters;
    for (const auto& [key, value] : w.parameters.items()) parameters[key] = value;
    return {{"id", w.encoding}, {"input_type", w.input_type}, {"summary", w.summary},
            {"tensors", std::move(tensors)}, {"parameters", std::move(parameters)}};
}

json::object source_json(const Checkpoint& source, const ExpertWeightSource& s) {
    json::object o{{"tensor", s.tensor},
                   {"shape", json::array{s.rows, s.cols}},
                   {"encoding", encoding_json(source.weight(s.tensor))}};
    if (s.slice)
        o["slice"] = json::object{{"expert", s.slice->expert},
                                  {"offset", s.slice->offset},
                                  {"length", s.slice->length},
                                  {"step", s.slice->step},
                                  {"along_columns", s.slice->along_columns},
                                  {"transposed", s.slice->transposed}};
    return o;
}

}  // namespace

void print_plan_text(std::ostream& out, const PlanReport& report, bool full) {
    const ModelPlan& p = report.plan;
    out << "\nfamily: " << p.family << " (model_type " << (p.model_type.empty() ? "(none)" : printable_name(p.model_type))
        << (report.overridden ? ", chosen with --family" : "") << ")\n";
    auto layers = moe_layer_indices(p);
    out << "MoE plan: " << layers.size() << " of " << p.num_hidden_layers
        << " decoder layers carry routed experts: layers " << layer_ranges(layers) << "\n";
    out << "  " << p.num_experts << " routed experts per layer, top-" << p.experts_per_token << ", layout "
        << expert_layout_name(p.layout) << ", hidden_size " << p.hidden_size << ", expert intermediate size "
        << p.expert_intermediate_size << "\n";
    out << "  router: " << describe_router(p.router) << "\n";
    if (p.expert_activation.kind != GatedActivationKind::silu)
        out << "  expert activation: " << describe_activation(p.expert_activation) << "\n";
    auto encodings = expert_encodings(report);
    for (Projection proj : expert_projections) {
        const auto& first = p.moe_layers.front().experts.front().weights[static_cast<int>(proj)];
        std::string ds;
        for (const auto& d : encodings[proj]) ds += (ds.empty() ? "" : " / ") + d;
        out << "  " << projection_name(proj) << ": [" << first.rows << "," << first.cols << "] " << ds << "\n";
    }

    auto counts = role_counts(p);
    std::string roles_line;
    for (const auto& [role, count] : counts)
        roles_line += (roles_line.empty() ? " " : ", ") + std::string(tensor_role_name(role)) + " " + with_commas(count);
    out << "tensor roles:" << roles_line << "\n";
    if (counts.count(TensorRole::skipped_mtp) || counts.count(TensorRole::skipped_buffer)) {
        out << "skipped (never converted or copied):\n";
        if (counts.count(TensorRole::skipped_mtp))
            out << "  " << counts[TensorRole::skipped_mtp] << " " << skipped_mtp_reason(p) << "\n";
        if (counts.count(TensorRole::skipped_buffer))
            out << "  " << counts[TensorRole::skipped_buffer] << " non-parameter buffers (rotary_emb.inv_freq)\n";
    }
    for (const auto& w : p.warnings) out << "warning: " << printable_text(w) << "\n";
    if (!full) return;
    out << "\nexperts:\n";
    for (const auto& layer : p.moe_layers)
        for (const auto& e : layer.experts)
            for (Projection proj : expert_projections) {
                const auto& s = e.weights[static_cast<int>(proj)];
                out << "  layer " << layer.layer << " expert " << e.expert << " " << projection_name(proj) << ": "
                    << printable_name(s.tensor);
                if (s.slice)
                    out << " [expert " << s.slice->expert << ", " << (s.slice->along_columns ? "columns " : "rows ")
                        << s.slice->offset << ".." << s.slice->offset + s.slice->length
                        << (s.slice->step > 1 ? ", step " + std::to_string(s.slice->step) : "")
                        << (s.slice->transposed ? ", transposed" : "") << "]";
                const EncodedWeight& w = report.source.weight(s.tensor);
                out << " " << w.encoding;
                for (const auto& [role, tensor] : w.tensors)
                    if (tensor != s.tensor) out << " " << role << " " << printable_name(tensor);
                out << "\n";
            }
    out << "\nroles:\n";
    for (const auto& [name, role] : p.roles) out << "  " << printable_name(name) << " " << tensor_role_name(role) << "\n";
}

json::object plan_json(const PlanReport& report, bool full) {
    const ModelPlan& p = report.plan;
    json::object o{{"family", p.family},
                   {"chosen_with_family_option", report.overridden},
                   {"model_type", p.model_type},
                   {"num_hidden_layers", p.num_hidden_layers},
                   {"hidden_size", p.hidden_size},
                   {"expert_intermediate_size", p.expert_intermediate_size},
                   {"num_experts", p.num_experts},
                   {"experts_per_token", p.experts_per_token},
                   {"layout", expert_layout_name(p.layout)},
                   {"expert_activation", describe_activation(p.expert_activation)},
                   {"router", json::object{{"scoring", router_scoring_name(p.router.scoring)},
                                           {"top_k", p.router.top_k},
                                           {"normalize", p.router.normalize},
                                           {"scaling", p.router.scaling},
                                           {"groups", p.router.groups},
                                           {"groups_kept", p.router.groups_kept},
                                           {"bias", p.router.uses_bias}}}};
    json::array layers;
    for (auto l : moe_layer_indices(p)) layers.push_back(l);
    o["moe_layers"] = std::move(layers);
    json::object weights;
    auto encodings = expert_encodings(report);
    for (Projection proj : expert_projections) {
        const auto& first = p.moe_layers.front().experts.front().weights[static_cast<int>(proj)];
        const EncodedWeight& w = report.source.weight(first.tensor);
        json::array ds;
        for (const auto& d : encodings[proj]) ds.push_back(json::value(d));
        weights[std::string(projection_name(proj))] = json::object{{"shape", json::array{first.rows, first.cols}},
                                                                   {"encodings", std::move(ds)},
                                                                   {"encoding", encoding_json(w)}};
    }
    o["expert_weights"] = std::move(weights);
    json::object roles;
    for (const auto& [role, count] : role_counts(p)) roles[std::string(tensor_role_name(role))] = count;
    o["role_counts"] = std::move(roles);
    json::array warnings;
    for (const auto& w : p.warnings) warnings.push_back(json::value(w));
    o["warnings"] = std::move(warnings);
    if (full) {
        json::array layer_list;
        for (const auto& layer : p.moe_layers) {
            json::array experts;
            for (const auto& e : layer.experts) {
                json::object eo{{"expert", e.expert}};
                for (Projection proj : expert_projections)
                    eo[std::string(projection_name(proj))] = source_json(report.source, e.weights[static_cast<int>(proj)]);
                experts.push_back(std::move(eo));
            }
            layer_list.push_back(json::object{{"layer", layer.layer},
                                              {"router_weight", layer.router_weight},
                                              {"router_bias", layer.router_bias},
                                              {"experts", std::move(experts)}});
        }
        o["layers"] = std::move(layer_list);
        json::object tensor_roles;
        for (const auto& [name, role] : p.roles) tensor_roles[name] = std::string(tensor_role_name(role));
        o["tensor_roles"] = std::move(tensor_roles);
    }
    return o;
}

}  // namespace moequant::cli
