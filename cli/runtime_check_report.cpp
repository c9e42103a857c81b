#include "runtime_check_report.hpp"

#include <moequant/error.hpp>
#include <moequant/printable.hpp>

#include <algorithm>
#include <iostream>

namespace moequant::cli {

namespace json = boost::json;

namespace {

std::string joined(const std::vector<std::string>& names, const std::string& separator) {
    std::string text;
    for (const auto& n : names) text += (text.empty() ? "" : separator) + n;
    return text;
}

std::vector<std::string> check_names(const OutputFormat& format) {
    std::vector<std::string> names;
    for (const auto& check : format.runtime_checks()) names.push_back(check.name);
    return names;
}

bool offers(const OutputFormat& format, const std::string& check) {
    const auto names = check_names(format);
    return std::find(names.begin(), names.end(), check) != names.end();
}

std::string verdicts_running(const RuntimeCheckReport& report) {
    std::vector<std::string> names;
    for (const auto& v : report.verdicts)
        if (v.runs) names.push_back(v.name);
    return joined(names, ", ");
}

// "group 32, " for each fact found, as the one-line verdict names them.
std::string brief_facts(const RuntimeCheckReport& report) {
    std::string text;
    for (const auto& f : report.facts) text += f.brief + " " + std::to_string(f.value) + ", ";
    return text;
}

}  // namespace

void require_known_runtime_check(const Registry& registry, const std::string& name) {
    std::vector<std::string> known;
    for (const auto& format : registry.formats())
        for (const auto& check : check_names(*format.object))
            if (std::find(known.begin(), known.end(), check) == known.end()) known.push_back(check);
    if (std::find(known.begin(), known.end(), name) == known.end())
        throw_usage_error("--for '" + name + "' is not a runtime verify knows", {.code = "BadOption", .hint = "use " + joined(known, " or ")});
}

void require_runtime_check_of(const Registry& registry, const OpenedOutput& output, const std::string& name,
                              const std::string& converted) {
    if (offers(*output.format, name)) return;
    std::vector<std::string> formats;
    for (const auto& format : registry.formats())
        if (offers(*format.object, name)) formats.push_back(std::string(format.object->id()));
    const std::string id(output.format->id());
    const auto own = check_names(*output.format);
    throw_usage_error("--for " + name + " checks a " + joined(formats, " or ") + " output; " + printable_name(converted) + " is a " +
                          id + " output",
                      {.hint = own.empty() ? "a " + id + " output offers no --for check" : "a " + id + " output offers --for " + joined(own, ", ")});
}

std::vector<RuntimeCheckResult> run_runtime_checks(const OpenedOutput& output, const ModelPlan& plan, const std::string& required) {
    std::vector<RuntimeCheckResult> results;
    for (const RuntimeCheckInfo& check : output.format->runtime_checks()) {
        const bool is_required = check.name == required;
        try {
            results.push_back({check, output.reader->run_runtime_check(check.name, plan), is_required});
        } catch (const Error& e) {  // only asked for: the verification itself stands without it
            if (is_required) throw;
            std::cerr << "moequant: warning: " << check.runtime << " not checked: " << printable_text(e.what()) << "\n";
        }
    }
    return results;
}

bool required_checks_pass(const std::vector<RuntimeCheckResult>& checks) {
    return std::all_of(checks.begin(), checks.end(), [](const RuntimeCheckResult& c) { return !c.required || c.report.usable(); });
}

void print_runtime_check(const RuntimeCheckInfo& check, const RuntimeCheckReport& report, bool in_full, std::ostream& out) {
    if (!in_full) {
        out << "\n" << check.runtime << " (" << check.target << "): ";
        const bool default_runs = !report.verdicts.empty() && report.verdicts.front().runs;
        if (report.usable() && default_runs)
            out << "usable, " << brief_facts(report) << "on " << verdicts_running(report) << " (" << report.verdicts.front().name
                << " is " << check.default_chooser << "'s default)\n";
        else if (report.usable())
            out << "usable, " << brief_facts(report) << "only with " << check.verdict_setting << " set to one of "
                << verdicts_running(report) << "\n";
        else
            out << "not usable: " << report.problems.front().rule << ": " << printable_text(report.problems.front().message)
                << (report.problem_count > 1 ? " (and " + std::to_string(report.problem_count - 1) +
                                                   " more problem(s); verify --for " + check.name + " shows the first of each rule)"
                                             : "")
                << "\n";
        for (const auto& w : report.warnings) out << "  warning: " << printable_text(w) << "\n";
        return;
    }
    out << "\n" << check.runtime << " (" << check.target_in_full << "):\n";
    for (const auto& f : report.facts)
        if (f.value > 0) out << "  " << f.label << " " << f.value << " (" << f.derivation << ")\n";
    for (const auto& v : report.verdicts)
        out << "  " << check.verdict_setting << "=" << v.name << ": " << (v.runs ? "runs it" : "cannot run it, " + v.why) << " ("
            << v.when << ")\n";
    for (const auto& w : report.warnings) out << "  warning: " << printable_text(w) << "\n";
    for (const auto& p : report.problems) out << "  " << p.rule << ": " << printable_text(p.message) << "\n";
    if (report.problem_count > report.problems.size())
        out << "  ... and " << report.problem_count - report.problems.size() << " more problem(s)\n";
    out << check.runtime
        << (report.usable() ? ": usable\n" : ": NOT usable (" + std::to_string(report.problem_count) + " problem(s))\n");
}

std::string runtime_check_json_key(const RuntimeCheckInfo& check) {
    std::string key = check.name;
    std::replace(key.begin(), key.end(), '-', '_');
    return key;
}

json::object runtime_check_json(const RuntimeCheckInfo& check, const RuntimeCheckReport& report) {
    json::array problems, verdicts, warnings;
    for (const auto& p : report.problems) problems.push_back(json::object{{"rule", p.rule}, {"message", p.message}});
    for (const auto& v : report.verdicts)
        verdicts.push_back(json::object{{check.verdict_kind, v.name}, {"runs", v.runs}, {"when", v.when}, {"why_not", v.why}});
    for (const auto& w : report.warnings) warnings.push_back(json::value(w));
    json::object o{{"usable", report.usable()}};
    for (const auto& f : report.facts) o[f.key] = f.value;
    o["problem_count"] = report.problem_count;
    o["problems"] = std::move(problems);
    o[check.verdict_kind + "s"] = std::move(verdicts);
    o["warnings"] = std::move(warnings);
    return o;
}

}  // namespace moequant::cli
