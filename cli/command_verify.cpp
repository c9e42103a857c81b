// `moequant verify`: proves a converted output complete and numerically right against its
// source (--source SRC --converted OUT), or compares two outputs byte for byte (OUT_A OUT_B).
// Exit 0 when everything passes, 6 (verification) when something does not.

#include "command.hpp"
#include "family_selection.hpp"
#include "global_options.hpp"
#include "human_format.hpp"
#include "option_values.hpp"
#include "runtime_check_report.hpp"
#include "saturated_rows_warning.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/output_comparison.hpp>
#include <moequant/engine/source_bound_quantizer.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>
#include <moequant/printable.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

namespace moequant::cli {

namespace po = boost::program_options;
namespace json = boost::json;

namespace {

std::string key_text(const StoredPartKey& k) {
    return "blk." + std::to_string(k.layer) + " expert " + std::to_string(k.expert) + " " +
           std::string(projection_name(k.projection)) + " part " + std::to_string(k.part);
}

// The file (or shard:tensor) of a part's codes, from its list of locations "a, b".
std::string codes_location(const std::string& locations) {
    std::size_t start = 0;
    while (true) {
        const std::size_t end = locations.find(", ", start);
        const std::string one = locations.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (one.find("scale") == std::string::npos || end == std::string::npos) return one;
        start = end + 2;
    }
}

std::string number(double v, const char* format = "%.3g") {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[32];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

json::value json_number(double v) { return std::isfinite(v) ? json::value(v) : json::value(nullptr); }

// What `verify --source --converted` was asked.
struct VerifyRequest {
    std::string source, converted;
    std::string quantizer_id;  // --quantizer: for an output that does not record it
    std::string family;        // --family: the source's adapter instead of detecting it
    std::string activations;   // --calibration-activations FILE
    bool routed_only = false;
    bool gemv = false;
    bool as_json = false, quiet = false;
    std::size_t worst = 10;
    std::string runtime_check;  // --for NAME: the format's runtime check that must pass; empty for none
};

// Per layer: the worst value of each measure over its parts.
struct LayerSummary {
    std::size_t parts = 0, failed = 0;
    double max_abs_error = 0, max_rel_rms = 0, min_snr = INFINITY, max_bound_use = 0, max_gemv = 0;
    std::int64_t non_finite = 0;
    bool gemv = false;
    bool calibrated = false;  // output errors on calibration data were measured
    double max_output_error = 0, max_reference_error = 0;
};

std::map<std::int64_t, LayerSummary> summarise(const VerificationReport& report) {
    std::map<std::int64_t, LayerSummary> layers;
    for (const auto& c : report.checks) {
        LayerSummary& s = layers[c.key.layer];
        ++s.parts;
        if (!c.problem.empty()) ++s.failed;
        s.max_abs_error = std::max(s.max_abs_error, c.max_abs_error);
        s.max_rel_rms = std::max(s.max_rel_rms, c.rel_rms_error);
        if (c.rows > 0) s.min_snr = std::min(s.min_snr, c.snr_db);
        s.max_bound_use = std::max(s.max_bound_use, c.bound_use);
        s.non_finite += c.nan + c.inf;
        if (c.gemv_rel_error) {
            s.gemv = true;
            s.max_gemv = std::max(s.max_gemv, *c.gemv_rel_error);
        }
        if (c.output_error) {
            s.calibrated = true;
            s.max_output_error = std::max(s.max_output_error, *c.output_error);
            if (c.reference_output_error) s.max_reference_error = std::max(s.max_reference_error, *c.reference_output_error);
        }
    }
    return layers;
}

// The parts with the largest relative RMS error, worst first.
std::vector<const PartCheck*> worst_parts(const VerificationReport& report, std::size_t count) {
    std::vector<const PartCheck*> parts;
    for (const auto& c : report.checks)
        if (c.rows > 0) parts.push_back(&c);
    std::sort(parts.begin(), parts.end(), [](const PartCheck* a, const PartCheck* b) { return a->rel_rms_error > b->rel_rms_error; });
    if (parts.size() > count) parts.resize(count);
    return parts;
}

// A stored part's key, the first fields of each part's JSON object.
json::object part_key_json(const StoredPartKey& key) {
    return {{"layer", key.layer}, {"expert", key.expert}, {"projection", projection_name(key.projection)}, {"part", key.part}};
}

json::object check_json(const PartCheck& c) {
    json::object o = part_key_json(c.key);
    o.insert({{"location", c.location},
              {"source_tensor", c.source_tensor},
              {"rows", c.rows},
              {"cols", c.cols},
              {"max_abs_error", c.max_abs_error},
              {"rel_rms_error", c.rel_rms_error},
              {"snr_db", json_number(c.snr_db)},
              {"bound_use", c.has_bound ? json_number(c.bound_use) : json::value(nullptr)},
              {"beyond_bound", c.beyond_bound},
              {"nan", c.nan},
              {"inf", c.inf},
              {"passed", c.problem.empty()}});
    if (c.output_error) o["output_error"] = *c.output_error;
    if (c.reference_output_error) o["reference_output_error"] = *c.reference_output_error;
    if (c.gemv_rel_error) {
        o["gemv_rel_error"] = *c.gemv_rel_error;
        o["gemv_rows_beyond_bound"] = c.gemv_rows_beyond_bound;
    }
    if (!c.saturated_rows.empty()) o["saturated_rows"] = json::value_from(c.saturated_rows);
    if (!c.problem.empty()) o["problem"] = c.problem;
    return o;
}

void print_report_json(const VerificationReport& report, const OpenedOutput& output,
                       const std::vector<RuntimeCheckResult>& runtime_checks, bool passed) {
    json::object root{{"passed", passed},
                      {"format", output.format->id()},
                      {"quantizer", report.quantizer},
                      {"parts", report.parts}};
    json::array problems;
    for (const auto& p : report.problems) problems.push_back(json::value(p));
    root["problems"] = std::move(problems);
    json::array layers;
    for (const auto& [layer, s] : summarise(report)) {
        json::object o{{"layer", layer},
                       {"parts", s.parts},
                       {"failed", s.failed},
                       {"max_abs_error", s.max_abs_error},
                       {"max_rel_rms_error", s.max_rel_rms},
                       {"min_snr_db", json_number(s.min_snr)},
                       {"max_bound_use", s.max_bound_use},
                       {"non_finite", s.non_finite}};
        if (s.gemv) o["max_gemv_rel_error"] = s.max_gemv;
        if (s.calibrated) {
            o["max_output_error"] = s.max_output_error;
            o["max_reference_output_error"] = s.max_reference_error;
        }
        layers.push_back(std::move(o));
    }
    root["layers"] = std::move(layers);
    json::array parts;
    for (const auto& c : report.checks) parts.push_back(check_json(c));
    root["tensors"] = std::move(parts);
    for (const auto& c : runtime_checks) root[runtime_check_json_key(c.check)] = runtime_check_json(c.check, c.report);
    std::cout << json::serialize(root) << "\n";
}

void print_report_text(const VerificationReport& report, const OpenedOutput& output, std::size_t worst,
                       const std::vector<RuntimeCheckResult>& runtime_checks) {
    std::cout << "verify: " << output.format->id() << " output of " << report.quantizer << ", " << report.parts
              << " part(s) per expert matrix, " << report.checks.size() << " quantized parts\n\n";
    const auto layers = summarise(report);
    const bool gemv = std::any_of(layers.begin(), layers.end(), [](const auto& l) { return l.second.gemv; });
    const bool calibrated = std::any_of(layers.begin(), layers.end(), [](const auto& l) { return l.second.calibrated; });
    const bool bounded = std::any_of(report.checks.begin(), report.checks.end(), [](const PartCheck& c) { return c.has_bound; });
    if (!bounded && !report.checks.empty())
        std::cout << "note: " << report.quantizer
                  << " chooses codes by error feedback, so per-element error bounds do not apply; checked are the layout, the "
                     "codes' decoding and what the quantizer can check of its stored parts"
                  << (calibrated ? "" : "; --calibration-activations FILE also compares each part's output error with its reference's")
                  << "\n\n";
    std::cout << std::flush;  // the table below is printed with printf
    std::printf("%6s %6s %7s %11s %11s %9s %10s %10s", "layer", "parts", "failed", "max |err|", "max relRMS", "min SNR",
                "bound use", "non-finite");
    if (gemv) std::printf(" %11s", "gemv relerr");
    if (calibrated) std::printf(" %11s %11s", "out err", "ref out err");
    std::printf("\n");
    for (const auto& [layer, s] : layers) {
        std::printf("%6lld %6zu %7zu %11s %11s %9s %10s %10lld", static_cast<long long>(layer), s.parts, s.failed,
                    number(s.max_abs_error).c_str(), number(s.max_rel_rms).c_str(), number(s.min_snr, "%.1f").c_str(),
                    number(s.max_bound_use, "%.4f").c_str(), static_cast<long long>(s.non_finite));
        if (gemv) std::printf(" %11s", number(s.max_gemv).c_str());
        if (calibrated) std::printf(" %11s %11s", number(s.max_output_error).c_str(), number(s.max_reference_error).c_str());
        std::printf("\n");
    }
    std::fflush(stdout);
    if (worst > 0) {
        std::cout << "\nworst parts by relative RMS error:\n";
        for (const PartCheck* c : worst_parts(report, worst))
            std::cout << "  " << key_text(c->key) << "  relRMS " << number(c->rel_rms_error) << "  SNR "
                      << number(c->snr_db, "%.1f") << " dB  max |err| " << number(c->max_abs_error) << "  ("
                      << printable_name(codes_location(c->location)) << ")\n";
    }
    std::size_t failed = 0;
    for (const auto& c : report.checks)
        if (!c.problem.empty()) ++failed;
    if (!report.problems.empty() || failed) {
        std::cout << "\nproblems:\n";
        // Locations are the output's tensor names; problems quote them.
        for (const auto& p : report.problems) std::cout << "  " << printable_text(p) << "\n";
        std::size_t shown = 0;
        for (const auto& c : report.checks)
            if (!c.problem.empty() && shown++ < 50)
                std::cout << "  " << key_text(c.key) << " ("
                          << printable_name(c.location.empty() ? c.source_tensor : c.location)
                          << "): " << printable_text(c.problem) << "\n";
        if (shown > 50) std::cout << "  ... and " << shown - 50 << " more failed parts\n";
    }
    for (const auto& c : runtime_checks) print_runtime_check(c.check, c.report, c.required, std::cout);
    std::cout << "\n"
              << (report.passed() && required_checks_pass(runtime_checks) ? "PASSED" : "FAILED") << ": "
              << report.checks.size() - failed << " of " << report.checks.size() << " parts within the bounds";
    if (!report.problems.empty()) std::cout << ", " << report.problems.size() << " structural problem(s)";
    for (const auto& c : runtime_checks)
        if (c.required)
            std::cout << ", " << c.check.runtime << " "
                      << (c.report.usable() ? "usable" : "not usable (" + c.report.problems.front().rule + ")");
    std::cout << "\n";
}

int verify_against_source(const VerifyRequest& request, const GlobalOptions& globals) {
    Registry registry;
    load_plugins(registry, globals);
    if (!request.runtime_check.empty()) require_known_runtime_check(registry, request.runtime_check);
    OpenedOutput output = open_converted_output(registry, request.converted);
    if (!request.runtime_check.empty()) require_runtime_check_of(registry, output, request.runtime_check, request.converted);
    const PlannedSource source = open_planned_source(registry, request.source, request.family);
    // A quantizer that carries stored codes (kt's awq) reads the output in the source's form.
    const std::shared_ptr<const Quantizer> quantizer = source_bound_quantizer(
        output_quantizer(registry, *output.reader, request.quantizer_id), source.checkpoint, source.plan);
    // Output errors on calibration data, next to the reference quantizer's of the same scheme
    // (for GPTQ: RTN's, the bar it must clear).
    std::optional<CalibrationActivations> calibration;
    std::shared_ptr<const Quantizer> reference;
    if (!request.activations.empty()) {
        calibration.emplace(CalibrationActivations::open(request.activations));
        calibration->check_plan(source.plan);
        calibration->set_routed_only(request.routed_only);
        if (const Quantizer* named = registry.quantizer(quantizer->facts().get_string("verify.reference", "")))
            reference = configured_quantizer(*named, output.reader->recorded());
    }

    VerificationJob job;
    job.source = &source.checkpoint;
    job.plan = &source.plan;
    job.quantizer = quantizer.get();
    job.output = output.reader.get();
    job.gemv = request.gemv;
    job.calibration = calibration ? &*calibration : nullptr;
    job.reference = reference.get();
    StreamProgress progress(stderr);
    SilentProgress silent;
    const VerificationReport report =
        verify_output(job, request.quiet || request.as_json ? static_cast<ProgressSink&>(silent) : progress);
    const std::vector<RuntimeCheckResult> runtime_checks = run_runtime_checks(output, source.plan, request.runtime_check);
    const bool passed = report.passed() && required_checks_pass(runtime_checks);
    if (request.as_json) print_report_json(report, output, runtime_checks, passed);
    else print_report_text(report, output, request.worst, runtime_checks);
    // The same warning convert printed when it wrote them: such rows pass, as convert accepted them.
    SaturatedRowLog saturated;
    for (const auto& c : report.checks)
        saturated.add(c.source_tensor, c.key.projection, c.key.part, report.parts, c.rows, c.saturated_rows);
    warn_about_saturated_rows(saturated);
    return passed ? 0 : exit_code(ErrorKind::verification);
}

int compare_two_outputs(const std::string& a_path, const std::string& b_path, bool as_json, const GlobalOptions& globals) {
    Registry registry;
    load_plugins(registry, globals);
    OpenedOutput a = open_converted_output(registry, a_path);
    OpenedOutput b = open_converted_output(registry, b_path);
    const ComparisonReport report = compare_outputs(*a.reader, *b.reader);
    if (as_json) {
        json::array differences;
        for (const auto& d : report.differences) {
            json::object o = part_key_json(d.key);
            o.insert({{"tensor", d.tensor},
                      {"location_a", d.location_a},
                      {"location_b", d.location_b},
                      {"bytes", d.bytes},
                      {"differing_bytes", d.differing_bytes},
                      {"first_difference", d.first_difference},
                      {"problem", d.problem}});
            differences.push_back(std::move(o));
        }
        std::cout << json::serialize(json::object{{"identical", report.identical()},
                                                  {"format_a", a.format->id()},
                                                  {"format_b", b.format->id()},
                                                  {"method", report.method},
                                                  {"parts", report.parts},
                                                  {"parts_compared", report.parts_compared},
                                                  {"bytes_compared", report.bytes_compared},
                                                  {"differences", std::move(differences)}})
                  << "\n";
    } else {
        std::cout << "compare: " << a.format->id() << " (" << printable_name(a_path) << ") vs " << b.format->id() << " ("
                  << printable_name(b_path) << "), " << printable_name(report.method) << ", " << report.parts << " part(s)\n";
        std::size_t shown = 0;
        for (const auto& d : report.differences) {
            if (shown++ >= 50) break;
            std::cout << "  " << key_text(d.key) << (d.tensor.empty() ? "" : " " + printable_name(d.tensor)) << ": "
                      << printable_text(d.problem);
            if (d.differing_bytes)
                std::cout << " (" << with_commas(d.differing_bytes) << " of " << with_commas(d.bytes)
                          << " bytes, first at byte " << d.first_difference << ")";
            std::cout << "\n";
        }
        if (report.differences.size() > 50) std::cout << "  ... and " << report.differences.size() - 50 << " more\n";
        std::cout << (report.identical() ? "IDENTICAL" : "DIFFERENT") << ": " << report.parts_compared
                  << " parts in both, " << human_bytes(report.bytes_compared) << " compared, "
                  << report.differences.size() << " difference(s)\n";
    }
    return report.identical() ? 0 : exit_code(ErrorKind::verification);
}

}  // namespace

int run_verify_command(const std::vector<std::string>& args, GlobalOptions globals) {
    VerifyRequest request;
    std::vector<std::string> outputs;
    std::size_t threads = 0;
    bool help = false;
    po::options_description options("Options");
    options.add_options()
        ("source", po::value(&request.source)->value_name("MODEL"), "the checkpoint the output was converted from")
        ("converted", po::value(&request.converted)->value_name("DIR"),
         "the converted output to check: its folder, or a GGUF model file (a split one by its first part)")
        ("gemv", po::bool_switch(&request.gemv), "also compute y = W x straight from the packed layout and check it")
        ("for", po::value(&request.runtime_check)->value_name("kt-rawint4|kt-llamafile"),
         "also require what this runtime needs: kt-rawint4 = kt-kernel's --kt-method RAWINT4 CPU experts reading the folder "
         "(compressed-tensors), kt-llamafile = its --kt-method LLAMAFILE reading the folder's GGUF files (gguf)")
        ("calibration-activations", po::value(&request.activations)->value_name("FILE"),
         "measure each part's output error on these recorded MoE inputs; GPTQ must not do worse than RTN")
        ("routed-only", po::bool_switch(&request.routed_only),
         "measure each expert on the tokens its router sends it (for outputs made with gptq --routed-only)")
        ("quantizer", po::value(&request.quantizer_id)->value_name("ID"),
         "the quantizer that made the output, when it does not record it (e.g. amx-int4)")
        ("family", po::value(&request.family)->value_name("NAME"), "use this adapter for the source instead of detecting it")
        ("worst", po::value(&request.worst)->default_value(10), "list this many worst parts")
        ("threads", po::value(&threads), "worker threads (default: all cores)")
        ("json", po::bool_switch(&request.as_json), "print the report as JSON")
        ("quiet,q", po::bool_switch(&request.quiet), "no progress output")
        ("help,h", po::bool_switch(&help), "show this help")
        ("outputs", po::value(&outputs)->composing(), "two outputs to compare");
    options.add(global_option_group(globals));
    po::positional_options_description positional;
    positional.add("outputs", -1);
    require_positive(parse_command_line(args, options, positional), {"threads"});
    if (help) {
        print_command_help(
            "moequant verify --source MODEL --converted OUT [--gemv] [--for kt-rawint4|kt-llamafile] [--json]\n"
            "       moequant verify OUT_A OUT_B [--json]",
            "With --source: checks that the converted output holds exactly the expected quantized parts with\n"
            "the right sizes, decodes every part from its packed bytes and compares it with the source weight\n"
            "(max |error|, relative RMS error, SNR, NaN/Inf) against the quantizer's per-element bound.\n"
            "A compressed-tensors output's report also says whether kt-kernel's RAWINT4 CPU experts can read it,\n"
            "a gguf output's whether its LLAMAFILE method can;\n"
            "--for kt-rawint4 (compressed-tensors) or kt-llamafile (gguf) makes that part of passing, listing\n"
            "every problem and which kt backend runs it.\n"
            "With two outputs: compares their quantized parts byte for byte (merged or tree, any mix).\n"
            "Exit 0 when everything passes, 6 when something does not.",
            options);
        return 0;
    }
    if (threads > 0) set_max_threads(threads);
    if (!outputs.empty()) {
        if (!request.runtime_check.empty()) throw_usage_error("--for checks one output against its source, not a comparison of two");
        if (!request.source.empty() || !request.converted.empty())
            throw_usage_error("give either --source and --converted, or two outputs to compare, not both");
        if (outputs.size() != 2) throw_usage_error("comparing needs exactly two outputs, got " + std::to_string(outputs.size()));
        return compare_two_outputs(outputs[0], outputs[1], request.as_json, globals);
    }
    if (request.source.empty() || request.converted.empty())
        throw_usage_error("verify needs --source and --converted (or two outputs to compare)",
                          {.hint = "moequant verify --help"});
    if (request.routed_only && request.activations.empty())
        throw_usage_error("--routed-only chooses the calibration tokens; it needs --calibration-activations");
    return verify_against_source(request, globals);
}

}  // namespace moequant::cli
