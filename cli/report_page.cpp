#include "report_page.hpp"

#include "shell_words.hpp"

#include <moequant/output_file.hpp>

namespace moequant::cli {
namespace {

namespace json = boost::json;

// The page around its data: styles, the sections, and the script that draws them. Everything
// is inline; the script writes nothing to the console, so any console line in a browser is a bug.
constexpr const char* page_head = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>moequant report</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; padding: 0 16px; color: #1b1f24; }
  h1 { font-size: 22px; margin-bottom: 4px; }
  h2 { font-size: 17px; margin-top: 28px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
  table { border-collapse: collapse; margin: 8px 0; }
  th, td { border: 1px solid #d0d7de; padding: 4px 10px; text-align: right; }
  th:first-child, td:first-child { text-align: left; }
  pre { background: #f6f8fa; padding: 10px; overflow-x: auto; white-space: pre-wrap; }
  .note { color: #57606a; }
  .legend { font-size: 12px; color: #57606a; }
  svg text { font: 11px system-ui, sans-serif; fill: #1b1f24; }
  rect.gpu { stroke: #d1242f; stroke-width: 2; }
</style>
</head>
<body>
<h1 id="title"></h1>
<section id="usage-section" hidden><h2>Expert usage</h2>
  <p class="note" id="usage-note"></p><div id="heatmap"></div></section>
<section id="quality-section" hidden><h2>Quality</h2>
  <table id="quality"><thead><tr><th>output</th><th>KL mean</th><th>KL p99</th><th>top-1</th><th>perplexity</th><th>source perplexity</th><th>tokens</th></tr></thead><tbody></tbody></table>
  <p class="note">Relative output error of each MoE layer on the source's inputs to it:</p><div id="errors"></div></section>
<section id="coverage-section" hidden><h2>Coverage</h2><p class="note" id="coverage-note"></p><ul id="coverage"></ul></section>
<section id="sizes-section" hidden><h2>Sizes</h2><table id="sizes"><tbody></tbody></table></section>
<section><h2>Commands</h2><pre id="commands"></pre></section>
<script type="application/json" id="data">)HTML";

constexpr const char* page_tail = R"HTML(</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg";
function el(tag, attrs, parent, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function cell(row, text) { const td = document.createElement("td"); td.textContent = text; row.appendChild(td); }
function num(x, digits) { return typeof x === "number" ? x.toPrecision(digits || 3) : "—"; }
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; ++u; }
  return (u ? n.toFixed(1) : String(n)) + " " + units[u];
}
// Light to dark blue by share: 0 -> #f7fbff, 1 -> #08306b.
function shade(t) {
  const a = [247, 251, 255], b = [8, 48, 107];
  return "rgb(" + a.map((x, i) => Math.round(x + (b[i] - x) * Math.min(1, Math.max(0, t)))).join(",") + ")";
}

document.getElementById("title").textContent = data.title || "moequant report";
document.getElementById("commands").textContent = (data.commands || []).join("\n\n");

if (data.usage && data.usage.layers.length) {
  document.getElementById("usage-section").hidden = false;
  const layers = data.usage.layers, experts = layers[0].routed_tokens.length;
  const gpu = layers.some(l => l.gpu_experts_mask);
  document.getElementById("usage-note").textContent =
    "Share of each MoE layer's expert choices (" + data.usage.tokens + " tokens), darker = more used" +
    (gpu ? "; outlined in red: the experts on the GPU." : ".");
  const size = Math.max(4, Math.min(22, Math.floor(1000 / experts))), left = 60, top = 20;
  const svg = el("svg", {id: "heatmap-svg", width: left + experts * size + 10, height: top + layers.length * size + 30}, document.getElementById("heatmap"));
  layers.forEach((l, row) => {
    const total = l.routed_tokens.reduce((a, b) => a + b, 0) || 1;
    const most = Math.max(...l.routed_tokens) / total || 1;
    el("text", {x: 0, y: top + row * size + size * 0.75}, svg, "layer " + l.layer);
    l.routed_tokens.forEach((count, e) => {
      const on = l.gpu_experts_mask && l.gpu_experts_mask[e];
      const r = el("rect", {x: left + e * size, y: top + row * size, width: size - 1, height: size - 1,
                            fill: shade(count / total / most), "class": on ? "cell gpu" : "cell"}, svg);
      el("title", {}, r, "layer " + l.layer + ", expert " + e + ": " + count + " choices (" +
                          (100 * count / total).toFixed(1) + "%)" + (on ? ", on the GPU" : ""));
    });
  });
  el("text", {x: left, y: 12, "class": "legend"}, svg, "experts 0 … " + (experts - 1) + " →");
}

const outputs = data.outputs || [];
if (outputs.length) {
  document.getElementById("quality-section").hidden = false;
  const body = document.querySelector("#quality tbody");
  for (const o of outputs) {
    const row = document.createElement("tr"); body.appendChild(row);
    cell(row, o.name); cell(row, num(o.kl_mean)); cell(row, num(o.kl_p99)); cell(row, num(o.top1_agreement, 4));
    cell(row, num(o.perplexity_quantized, 5)); cell(row, num(o.perplexity_source, 5)); cell(row, String(o.tokens));
  }
  // Grouped bars: one group per MoE layer, one bar per output.
  const layerIds = outputs[0].layers.map(l => l.layer);
  const worst = Math.max(1e-12, ...outputs.flatMap(o => o.layers.map(l => l.relative_output_error)));
  const bar = Math.max(3, Math.min(18, Math.floor(900 / (layerIds.length * (outputs.length + 1))))), h = 180, left = 50, top = 10;
  const colors = ["#0969da", "#d1242f", "#1a7f37", "#8250df", "#bc4c00", "#57606a"];
  const svg = el("svg", {id: "errors-svg", width: left + layerIds.length * (outputs.length + 1) * bar + 20, height: h + top + 24}, document.getElementById("errors"));
  el("line", {x1: left, y1: top + h, x2: left + layerIds.length * (outputs.length + 1) * bar, y2: top + h, stroke: "#57606a"}, svg);
  el("text", {x: 0, y: top + 10}, svg, num(worst, 2));
  el("text", {x: 0, y: top + h}, svg, "0");
  layerIds.forEach((layer, g) => {
    outputs.forEach((o, k) => {
      const v = o.layers[g] ? o.layers[g].relative_output_error : 0;
      const r = el("rect", {x: left + (g * (outputs.length + 1) + k) * bar, y: top + h - h * v / worst, width: bar - 1,
                            height: Math.max(0.5, h * v / worst), fill: colors[k % colors.length], "class": "bar"}, svg);
      el("title", {}, r, o.name + ", layer " + layer + ": " + num(v));
    });
    if (layerIds.length <= 64 || g % Math.ceil(layerIds.length / 64) === 0)
      el("text", {x: left + g * (outputs.length + 1) * bar, y: top + h + 14}, svg, String(layer));
  });
  const legend = document.createElement("p"); legend.className = "legend";
  document.getElementById("errors").appendChild(legend);
  outputs.forEach((o, k) => {
    const swatch = document.createElement("span");
    swatch.style.cssText = "display:inline-block;width:10px;height:10px;margin:0 4px 0 12px;background:" + colors[k % colors.length];
    legend.appendChild(swatch); legend.appendChild(document.createTextNode(o.name));
  });

  // Coverage: the experts the eval text reached least, which its numbers say little about.
  const cov = outputs[0].coverage || [];
  if (cov.length) {
    document.getElementById("coverage-section").hidden = false;
    const list = document.getElementById("coverage");
    let none = 0, few = 0;
    for (const l of cov) {
      const t = l.tokens_per_expert, mean = t.reduce((a, b) => a + b, 0) / t.length;
      const starved = t.map((n, e) => [n, e]).filter(([n]) => n < 0.1 * mean);
      none += starved.filter(([n]) => n === 0).length; few += starved.length;
      if (starved.length) {
        const item = document.createElement("li");
        item.textContent = "layer " + l.layer + ": " + starved.map(([n, e]) => "expert " + e + " (" + n + ")").join(", ");
        list.appendChild(item);
      }
    }
    document.getElementById("coverage-note").textContent = few
      ? few + " expert(s) got under a tenth of their layer's mean share of eval tokens (" + none + " got none): the figures barely measure their quantization."
      : "Every expert got at least a tenth of its layer's mean share of eval tokens.";
  }
}

if (data.sizes && data.sizes.length) {
  document.getElementById("sizes-section").hidden = false;
  const body = document.querySelector("#sizes tbody");
  for (const s of data.sizes) { const row = document.createElement("tr"); body.appendChild(row); cell(row, s.what); cell(row, bytes(s.bytes)); }
}
</script>
</body>
</html>
)HTML";

}  // namespace

std::string report_page_html(const json::object& data) {
    // The JSON sits inside a script element: "</" must not end it early ("<\/" is the same JSON).
    std::string text = json::serialize(data);
    for (std::size_t at = 0; (at = text.find("</", at)) != std::string::npos; at += 3) text.replace(at, 2, "<\\/");
    return std::string(page_head) + text + page_tail;
}

void write_report_page(const std::filesystem::path& file, const json::object& data) {
    write_file_atomically(file, report_page_html(data));
}

std::string command_line_text(const std::string& command, const std::vector<std::string>& args) {
    std::string line = "moequant " + command;
    for (const std::string& a : args) line += " " + shell_word(a);
    return line;
}

}  // namespace moequant::cli
