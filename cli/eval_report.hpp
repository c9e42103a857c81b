// How `moequant eval` prints its report: the text table, the --json object, and the coverage
// lines (how many eval tokens each routed expert received in the source model, and which
// received none, so that their quantization went unmeasured).
#pragma once

#include <moequant/engine/evaluation.hpp>
#include <moequant/model_adapter.hpp>

#include <boost/json.hpp>

#include <string>

namespace moequant::cli {

// The seven fields of docs/cli.md's eval section, plus "coverage": per MoE layer
// {layer, tokens_per_expert, experts_without_tokens} (expert ids); printed by --json.
boost::json::object eval_json(const EvaluationReport& report, const ModelPlan& plan);
void print_eval_json(const EvaluationReport& report, const ModelPlan& plan);

// The report page's data (report_page.hpp) of one eval: `output` (eval_json() with its "name"),
// the experts' use on the eval text from its coverage, with the GPU experts of `placement_file`
// (plan's JSON; none when empty) marked.
boost::json::object eval_report_data(const std::string& title, const std::string& command, boost::json::object output,
                                     const ModelPlan& plan, const std::string& placement_file);

void print_eval_text(const EvaluationReport& report, const ModelPlan& plan, const std::string& what);

// "moequant: note: eval coverage: ..." on stderr naming the experts no eval token reached; nothing
// when every expert got some. Printed with --json and --quiet too: it qualifies the numbers.
void note_unmeasured_experts(const EvaluationReport& report, const ModelPlan& plan);

}  // namespace moequant::cli
