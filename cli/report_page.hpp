// The report page (`--report FILE` of plan and eval; report.html of hybrid): one self-contained
// HTML file, readable offline — no network, no external script or style. Its data is one JSON
// object embedded in the page, drawn by the page's own script into SVG:
//   title                 the page's heading
//   commands              [string]: the command lines that made it
//   usage (optional)      {tokens, layers: [{layer, routed_tokens: [per expert], gpu_experts_mask?: [bool]}]}:
//                         the expert-usage heat map (layers x experts, GPU experts outlined)
//   outputs (optional)    [{name, kl_mean, kl_p99, top1_agreement, perplexity_source,
//                         perplexity_quantized, tokens, layers: [{layer, relative_output_error}],
//                         coverage: [{layer, tokens_per_expert}]}]: eval's numbers of each output
//                         compared, the per-layer error chart and the coverage
//   sizes (optional)      [{what, bytes}]
// docs/report-page.md.
#pragma once

#include <boost/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace moequant::cli {

// The page for `data`.
std::string report_page_html(const boost::json::object& data);

// Writes the page atomically (Error(io) naming the file when it cannot).
void write_report_page(const std::filesystem::path& file, const boost::json::object& data);

// "moequant COMMAND ARG ..." with each argument quoted as a shell needs it.
std::string command_line_text(const std::string& command, const std::vector<std::string>& args);

}  // namespace moequant::cli
