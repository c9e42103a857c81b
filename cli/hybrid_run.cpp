#include "hybrid_run.hpp"

#include "command.hpp"
#include "family_selection.hpp"
#include "human_format.hpp"
#include "hybrid_memory_budget.hpp"
#include "report_page.hpp"
#include "sglang_launch_line.hpp"
#include "torch_tensor_file.hpp"

#include <moequant/digest.hpp>
#include <moequant/engine/output_location.hpp>
#include <moequant/error.hpp>
#include <moequant/output_file.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

namespace moequant::cli {

namespace json = boost::json;
namespace fs = std::filesystem;

constexpr HybridMethod methods[] = {
    {"AMXINT4", "int4", false}, {"AMXINT8", "int8", false}, {"MOE_INT8", "moe_int8", false}, {"RAWINT4", nullptr, true}};

const HybridMethod& hybrid_method_named(const std::string& name) {
    for (const HybridMethod& m : methods)
        if (name == m.kt_method) return m;
    throw_usage_error("--kt-method must be AMXINT4, AMXINT8, MOE_INT8 or RAWINT4, not '" + name + "'",
                      {.hint = "MOE_INT4 is refused: kt-kernel itself cannot produce it on x86 (docs/kt-moe-int8.md)"});
}

namespace {

constexpr const char* state_file = "hybrid.json";

using Method = HybridMethod;

// std::cout of a step, kept instead of printed (the JSON of plan and eval).
class CapturedStdout {
public:
    CapturedStdout() : previous_(std::cout.rdbuf(text_.rdbuf())) {}
    ~CapturedStdout() { std::cout.rdbuf(previous_); }
    std::string text() const { return text_.str(); }

private:
    std::ostringstream text_;
    std::streambuf* previous_;
};

class Hybrid {
public:
    Hybrid(HybridRequest request, GlobalOptions globals, const Method& method, std::string command_line)
        : r_(std::move(request)),
          globals_(std::move(globals)),
          method_(&method),
          dir_(fs::absolute(r_.output).lexically_normal()),
          command_line_(std::move(command_line)) {}

    int run();

private:
    std::vector<std::string> calibration_text() const {
        return {"--dataset", r_.dataset, "--dataset_split", r_.dataset_split, "--num_calibration_samples", std::to_string(r_.samples),
                "--max_sequence_length", std::to_string(r_.max_length), "--random_seed", std::to_string(r_.seed)};
    }
    std::vector<std::string> common(std::vector<std::string> args) const {
        if (r_.quiet) args.push_back("-q");
        if (r_.threads) args.insert(args.end(), {"--threads", std::to_string(r_.threads)});
        if (!r_.family.empty()) args.insert(args.end(), {"--family", r_.family});
        return args;
    }
    std::vector<std::string> gptq_args() const {
        std::vector<std::string> a = {"--model_id", r_.input, "--output_dir", path("gpu")};
        if (method_->rawint4) a.insert(a.end(), {"--for", "kt-rawint4"});
        else a.insert(a.end(), {"--quant_type", "W4A16"});
        const auto text = calibration_text();
        a.insert(a.end(), text.begin(), text.end());
        return common(a);
    }
    std::vector<std::string> convert_args() const { return convert_args(*method_, cpu_folder_); }
    std::vector<std::string> convert_args(const Method& method, const std::string& folder) const {
        std::vector<std::string> a = {"-i", r_.input, "-o", path(folder), "--quant-method", method.convert_method, "--calibrate",
                                      "--threadpool-count", std::to_string(r_.threadpools)};
        const auto text = calibration_text();
        a.insert(a.end(), text.begin(), text.end());
        return common(a);
    }
    std::vector<std::string> eval_args() const {
        return common({"--model_id", r_.input, "--dataset", r_.eval_dataset, "--num_calibration_samples", std::to_string(r_.eval_samples),
                       "--max_sequence_length", std::to_string(r_.eval_max_length)});
    }
    std::string path(const std::string& name) const { return (dir_ / name).string(); }
    std::string cpu_weights() const { return method_->rawint4 ? path("gpu") : path(cpu_folder_); }

    void note(const std::string& line) const {
        if (!r_.quiet) std::cerr << "hybrid: " << line << "\n";
    }
    int step(int (*command)(const std::vector<std::string>&, GlobalOptions), const std::vector<std::string>& args) const {
        return command(args, globals_);
    }
    // verify of one output, quietly: one line when it passes; its whole report (a second run,
    // in words) when it fails, whose exit code (6) ends the run.
    int verify(const std::string& what, const std::vector<std::string>& args) const {
        std::vector<std::string> quiet = common(args);
        quiet.push_back("--json");
        if (!r_.quiet) quiet.push_back("-q");
        int rc = 0;
        json::object report;
        {
            CapturedStdout out;
            rc = step(&run_verify_command, quiet);
            report = json::parse(out.text()).as_object();
        }
        if (rc != 0) return step(&run_verify_command, common(args));
        note(what + ": passed, " + std::to_string(report.at("tensors").as_array().size()) + " stored parts of " +
             std::string(report.at("quantizer").as_string()) + " checked against the source");
        return rc;
    }
    // A writing step (gptq, convert) done by an earlier run with the same arguments: its folder's
    // run manifest, which it writes last, is the one recorded then. (Calibrated runs start over
    // when rerun, so the step is skipped instead; verify checks the files afterwards.)
    bool done_before(const json::object& state, const std::string& key, const std::vector<std::string>& args, const std::string& folder) const {
        std::error_code ec;
        const fs::path manifest = fs::path(folder) / "moequant-run.json";
        if (!state.contains(key) || !fs::exists(manifest, ec)) return false;
        const json::object& done = state.at(key).as_object();
        return done.contains("args") && done.at("args") == joined(args).c_str() && done.contains("manifest") &&
               done.at("manifest") == file_digest(manifest).c_str();
    }
    void mark_done(json::object& state, const std::string& key, const std::vector<std::string>& args, const std::string& folder) const {
        state[key] = json::object{{"args", joined(args)}, {"manifest", file_digest(fs::path(folder) / "moequant-run.json")}};
        save_state(state);
    }
    static std::string joined(const std::vector<std::string>& args) {
        std::string out;
        for (const std::string& a : args) out += (out.empty() ? "" : " ") + a;
        return out;
    }
    // Runs a writing step unless an earlier run did it.
    void write_step(json::object& state, const std::string& key, const std::string& what,
                    int (*command)(const std::vector<std::string>&, GlobalOptions), const std::vector<std::string>& args,
                    const std::string& folder) const {
        if (done_before(state, key, args, folder)) {
            note(what + ": written by an earlier run with the same arguments, kept");
            return;
        }
        note(what + " -> " + folder);
        step(command, args);
        mark_done(state, key, args, folder);
    }
    // eval of the source against `outputs` on the held-out text: its JSON, named.
    json::object evaluate(const std::string& name, const std::vector<std::string>& outputs) const {
        std::vector<std::string> a = eval_args();
        a.insert(a.end(), outputs.begin(), outputs.end());
        a.push_back("--json");
        json::object result;
        {
            CapturedStdout json_out;
            step(&run_eval_command, a);
            result = json::parse(json_out.text()).as_object();
        }
        result["name"] = name;
        return result;
    }
    // The methods --cpu-memory chooses between: --kt-method when given, else AMXINT8 and AMXINT4.
    std::vector<const Method*> searched_methods() const {
        if (r_.method_given) return {method_};
        return {&hybrid_method_named("AMXINT8"), &hybrid_method_named("AMXINT4")};
    }
    static CpuExpertBytes estimated_cpu_bytes(const Method& m, const ModelPlan& plan) {
        return estimated_cpu_expert_bytes(plan, std::string(m.kt_method).find("INT8") != std::string::npos ? 8 : 4);
    }
    // plan of the `total` most used experts into `file`: its JSON.
    json::object place(std::int64_t total, const std::string& file) const {
        CapturedStdout json_out;
        step(&run_plan_command, common({"--model_id", r_.input, "--activations", path("calibration.safetensors"), "--num-gpu-experts",
                                        std::to_string(total), "--strategy", "frequency", "--output", path(file), "--overwrite", "--json"}));
        return json::parse(json_out.text()).as_object();
    }
    struct Candidate {
        const Method* method = nullptr;
        std::string folder;
        std::int64_t gpu_per_layer = 0;
        std::uint64_t cpu_needed = 0;
        double kl = 0;
    };
    Candidate choose_cpu_method(json::object& state, const ModelPlan& plan, const GpuWeightBytes& gpu, std::int64_t most,
                                std::uint64_t cpu_budget, json::array& evals) const;
    int dry_run(const PlannedSource& source);
    void check_output_folder_is_ours(const PlannedSource& source) const;
    json::object load_state() const;
    void save_state(const json::object& state) const { write_file_atomically(dir_ / state_file, json::serialize(state) + "\n"); }
    void record(json::object& state) const;
    std::string write_expert_location(const json::object& placement, const ModelPlan& plan) const;

    HybridRequest r_;
    GlobalOptions globals_;
    const Method* method_;  // the CPU method: --kt-method, or the one --cpu-memory chose
    std::string cpu_folder_ = "cpu";
    fs::path dir_;
    std::string command_line_;
};

// Bytes of the regular files under `folder`.
std::uint64_t folder_bytes(const fs::path& folder) {
    std::uint64_t total = 0;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        if (it->is_regular_file(ec)) total += it->file_size(ec);
    return total;
}

void Hybrid::check_output_folder_is_ours(const PlannedSource& source) const {
    check_output_folder(dir_, {.folders = {source.checkpoint.directory()}}, false);
    std::error_code ec;
    if (!fs::exists(dir_, ec)) return;
    if (!fs::is_directory(dir_, ec))
        throw Error(ErrorKind::io, "is not a folder", {.file = dir_.string(), .code = "OutputNotAFolder"});
    if (fs::exists(dir_ / state_file, ec) || fs::directory_iterator(dir_, ec) == fs::directory_iterator()) return;
    throw Error(ErrorKind::io, "holds files that no moequant hybrid run wrote (it has no " + std::string(state_file) + ")",
                {.file = dir_.string(), .code = "OutputNotEmpty", .hint = "give an empty or new folder, or the folder of an earlier hybrid run"});
}

json::object Hybrid::load_state() const {
    std::error_code ec;
    if (!fs::exists(dir_ / state_file, ec)) return {};
    std::ifstream in(dir_ / state_file);
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code parse_error;
    json::value v = json::parse(text.str(), parse_error);
    if (parse_error || !v.is_object())
        throw Error(ErrorKind::io, "is not the state of a hybrid run", {.file = (dir_ / state_file).string(), .code = "BadHybridState",
                                                                        .hint = "remove the folder and run again"});
    return v.as_object();
}

// The routing counts on the calibration text: recorded once, reused while the text is the same.
void Hybrid::record(json::object& state) const {
    std::string settings;
    for (const std::string& a : calibration_text()) settings += a + " ";
    settings += r_.input;
    std::error_code ec;
    const fs::path file = dir_ / "calibration.safetensors";
    if (state.contains("recorded") && state.at("recorded") == settings.c_str() && fs::exists(file, ec)) {
        note("[1/7] calibration inputs already recorded: " + file.string());
        return;
    }
    note("[1/7] record the MoE inputs on the calibration text -> " + file.string());
    std::vector<std::string> a = {"--model_id", r_.input, "--output", file.string(), "--overwrite"};
    const auto text = calibration_text();
    a.insert(a.end(), text.begin(), text.end());
    step(&run_record_command, common(a));
    state["recorded"] = settings;
    save_state(state);
}

// SGLang's --init-expert-location for the `frequency` strategy: logical_count [1, layers,
// experts], which it sums over dimension 0 and ranks with torch.topk. The values are each
// expert's place in moequant's placement order (the most routed first; ties to the lower layer,
// then the lower expert), counted down from the number of routed experts, and 0 for layers
// without routed experts: any --kt-num-gpu-experts then keeps exactly moequant's choice, ties
// included, where raw counts would leave ties to topk.
std::string Hybrid::write_expert_location(const json::object& placement, const ModelPlan& plan) const {
    const std::int64_t layers = plan.num_hidden_layers, experts = plan.num_experts;
    struct Entry {
        std::int64_t layer, expert, count;
    };
    std::vector<Entry> entries;
    for (const json::value& l : placement.at("layers").as_array()) {
        const json::array& counts = l.at("routed_tokens").as_array();
        for (std::size_t e = 0; e < counts.size(); ++e)
            entries.push_back({l.at("layer").to_number<std::int64_t>(), static_cast<std::int64_t>(e), counts[e].to_number<std::int64_t>()});
    }
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.count > b.count; });
    std::vector<float> rank(static_cast<std::size_t>(layers * experts), 0.0f);
    for (std::size_t i = 0; i < entries.size(); ++i)
        rank[static_cast<std::size_t>(entries[i].layer * experts + entries[i].expert)] = static_cast<float>(entries.size() - i);
    const fs::path file = dir_ / "activation_stats.pt";
    write_file_atomically(file, torch_tensor_dict_bytes("logical_count", {1, layers, experts}, rank));
    return file.string();
}

// --cpu-memory: each method that fits is written (calibrated, as the final CPU experts are), and
// tried with the fewest GPU experts per layer its CPU bytes allow and with the most the GPU holds:
// more GPU experts move experts from the CPU's codes to GPTQ's W4A16, which lowers the KL under
// AMXINT4 and raises it under AMXINT8, so the best count of each method is one of the two. The
// candidate with the lowest KL on the calibration text (eval's rows of it) is kept.
Hybrid::Candidate Hybrid::choose_cpu_method(json::object& state, const ModelPlan& plan, const GpuWeightBytes& gpu, std::int64_t most,
                                            std::uint64_t cpu_budget, json::array& evals) const {
    const auto layers = static_cast<std::int64_t>(plan.moe_layers.size());
    std::vector<Candidate> candidates;
    for (const Method* m : searched_methods()) {
        std::string folder = "cpu";
        CpuExpertBytes cpu;
        if (m->rawint4) {
            cpu.experts = plan.num_experts;
            cpu.expert_per_layer = gpu.expert_per_layer;  // kt reads the GPU checkpoint's codes
        } else {
            if (estimated_cpu_bytes(*m, plan).fewest_gpu_experts(cpu_budget) > most) {
                note("--cpu-memory: " + std::string(m->kt_method) + " does not fit (estimated)");
                continue;
            }
            if (!r_.method_given) folder += "-" + std::string(m->convert_method);
            write_step(state, folder, "[4/7] the CPU experts: convert --quant-method " + std::string(m->convert_method) + " --calibrate",
                       &run_convert_command, convert_args(*m, folder), path(folder));
            cpu = measured_cpu_expert_bytes(Checkpoint::open(path(folder)), plan);
        }
        const std::int64_t fewest = cpu.fewest_gpu_experts(cpu_budget);
        if (fewest > most) {
            note("--cpu-memory: " + std::string(m->kt_method) + " needs " + std::to_string(fewest) +
                 " GPU experts per layer to leave the rest in it, and the GPU holds " + std::to_string(most));
            continue;
        }
        for (std::int64_t k : {fewest, most})
            if (candidates.empty() || candidates.back().method != m || candidates.back().gpu_per_layer != k)
                candidates.push_back({m, folder, k, cpu.needed(k)});
    }
    if (candidates.empty())
        throw Error(ErrorKind::usage,
                    "--cpu-memory " + human_bytes(cpu_budget) + " does not hold the experts the GPU leaves to the CPU with any method tried",
                    {.code = "MemoryTooSmall", .hint = "give more --cpu-memory or --gpu-memory"});
    const Candidate* best = nullptr;
    for (Candidate& c : candidates) {
        const std::string file = "placement-" + std::to_string(c.gpu_per_layer) + ".json";
        place(c.gpu_per_layer * layers, file);
        const std::string name = std::string(c.method->kt_method) + " with " + std::to_string(c.gpu_per_layer) +
                                 " GPU experts per layer (calibration text)";
        note("--cpu-memory: eval of " + name);
        std::vector<std::string> a = common({"--model_id", r_.input, "--dataset", r_.dataset, "--dataset_split", r_.dataset_split,
                                             "--num_calibration_samples", std::to_string(r_.eval_samples), "--max_sequence_length",
                                             std::to_string(r_.eval_max_length), "--random_seed", std::to_string(r_.seed), "--json"});
        if (c.method->rawint4) a.insert(a.end(), {"--gpu-weights", path("gpu")});
        else a.insert(a.end(), {"--cpu-weights", path(c.folder), "--gpu-weights", path("gpu"), "--placement", path(file)});
        json::object result;
        {
            CapturedStdout json_out;
            step(&run_eval_command, a);
            result = json::parse(json_out.text()).as_object();
        }
        result["name"] = name;
        c.kl = result.at("kl_mean").to_number<double>();
        evals.push_back(result);
        if (!best || c.kl < best->kl) best = &c;
    }
    char kl[32];
    std::snprintf(kl, sizeof kl, "%.3g", best->kl);
    note("--cpu-memory: kept " + std::string(best->method->kt_method) + " with " + std::to_string(best->gpu_per_layer) +
         " GPU experts per layer (KL " + kl + " on the calibration text; CPU experts " + human_bytes(best->cpu_needed) + " of " +
         human_bytes(cpu_budget) + ")");
    return *best;
}

int Hybrid::dry_run(const PlannedSource& source) {
    const std::int64_t group = method_->rawint4 ? 32 : 128;
    const GpuWeightBytes bytes = estimated_gpu_weight_bytes(source.checkpoint, source.plan, group);
    const std::uint64_t budget = parse_memory_size(r_.gpu_memory, "--gpu-memory");
    const std::int64_t per_layer = bytes.experts_per_layer(budget, source.plan.num_experts);
    const auto layers = static_cast<std::int64_t>(source.plan.moe_layers.size());
    std::cout << "hybrid --dry-run: " << source.plan.family << ", " << layers << " MoE layers x " << source.plan.num_experts
              << " routed experts; CPU method " << method_->kt_method << "\n"
              << "GPU weights (estimated): " << human_bytes(bytes.fixed) << " outside the routed experts, "
              << human_bytes(bytes.expert_row()) << " per routed expert of every MoE layer; --gpu-memory " << human_bytes(budget)
              << " holds " << per_layer << " per layer (" << per_layer * layers << " of " << layers * source.plan.num_experts << ")\n";
    if (!r_.cpu_memory.empty()) {
        const std::uint64_t cpu_budget = parse_memory_size(r_.cpu_memory, "--cpu-memory");
        for (const Method* m : searched_methods()) {
            const CpuExpertBytes cpu = estimated_cpu_bytes(*m, source.plan);
            const std::int64_t fewest = cpu.fewest_gpu_experts(cpu_budget);
            std::cout << "--cpu-memory " << human_bytes(cpu_budget) << ", " << m->kt_method << " (estimated " << human_bytes(cpu.expert_row())
                      << " per expert of every layer): "
                      << (fewest > per_layer ? "does not fit (it needs " + std::to_string(fewest) + " GPU experts per layer)"
                                             : "tried with " + std::to_string(fewest) + " and " + std::to_string(per_layer) +
                                                   " GPU experts per layer")
                      << "\n";
        }
    }
    std::cout << "\nGPU checkpoint (moequant gptq):\n";
    std::vector<std::string> gptq = gptq_args();
    gptq.push_back("--dry-run");
    int rc = step(&run_gptq_command, gptq);
    if (method_->convert_method) {
        std::cout << "\nCPU experts (moequant convert):\n";
        std::vector<std::string> convert = convert_args();
        convert.push_back("--dry-run");
        rc = std::max(rc, step(&run_convert_command, convert));
    }
    std::cout << "\nEval of the hybrid model (moequant eval; timed as the source against itself):\n";
    std::vector<std::string> eval = eval_args();
    eval.push_back("--dry-run");
    rc = std::max(rc, step(&run_eval_command, eval));
    std::cout << "\nThen served with:\n"
              << sglang_launch_line({path("gpu"), cpu_weights(), method_->kt_method, r_.cpuinfer, r_.threadpools, per_layer,
                                     path("activation_stats.pt")});
    return rc;
}

int Hybrid::run() {
    Registry registry;
    load_plugins(registry, globals_);
    const PlannedSource source = open_planned_source(registry, r_.input, r_.family);
    if (source.plan.moe_layers.empty())
        throw Error(ErrorKind::input, "has no routed experts to place", {.file = r_.input, .code = "NoExperts"});
    const std::uint64_t budget = parse_memory_size(r_.gpu_memory, "--gpu-memory");
    if (r_.dry_run) return dry_run(source);
    // A budget below the estimated fixed part is refused before hours of GPTQ; the count itself
    // is chosen from the written checkpoint's sizes.
    const std::int64_t most = estimated_gpu_weight_bytes(source.checkpoint, source.plan, method_->rawint4 ? 32 : 128)
                                  .experts_per_layer(budget, source.plan.num_experts);
    const std::uint64_t cpu_budget = r_.cpu_memory.empty() ? 0 : parse_memory_size(r_.cpu_memory, "--cpu-memory");
    if (cpu_budget) {
        std::string fits;
        for (const Method* m : searched_methods())
            if (estimated_cpu_bytes(*m, source.plan).fewest_gpu_experts(cpu_budget) <= most) fits += std::string(fits.empty() ? "" : ", ") + m->kt_method;
        if (fits.empty())
            throw Error(ErrorKind::usage,
                        "--cpu-memory " + human_bytes(cpu_budget) + " and --gpu-memory " + human_bytes(budget) +
                            " do not hold the routed experts together with " + (r_.method_given ? std::string(method_->kt_method) : "AMXINT4") +
                            " (estimated; the GPU holds " + std::to_string(most) + " per MoE layer)",
                        {.code = "MemoryTooSmall", .hint = "give more --cpu-memory or --gpu-memory"});
        note("--cpu-memory " + human_bytes(cpu_budget) + ": by the estimated sizes, " + fits + " can fit");
    }
    check_output_folder_is_ours(source);
    fs::create_directories(dir_);
    json::object state = load_state();
    state["moequant"] = "hybrid";
    state["source"] = r_.input;
    save_state(state);

    record(state);
    write_step(state, "gpu", "[2/7] the GPU checkpoint: gptq " + std::string(method_->rawint4 ? "--for kt-rawint4" : "W4A16"), &run_gptq_command,
               gptq_args(), path("gpu"));

    const Checkpoint gpu = Checkpoint::open(path("gpu"));
    const GpuWeightBytes bytes = measured_gpu_weight_bytes(gpu, source.plan);
    std::int64_t per_layer = bytes.experts_per_layer(budget, source.plan.num_experts);
    const auto layers = static_cast<std::int64_t>(source.plan.moe_layers.size());
    note("[3/7] " + human_bytes(budget) + " of GPU memory holds " + human_bytes(bytes.fixed) + " outside the routed experts and " +
         std::to_string(per_layer) + " routed expert(s) of each of the " + std::to_string(layers) + " MoE layers (" +
         human_bytes(bytes.expert_row()) + " per expert of every layer)");
    json::array candidates;  // --cpu-memory: each candidate's eval on the calibration text
    std::uint64_t cpu_needed = 0;
    if (cpu_budget) {
        const Candidate chosen = choose_cpu_method(state, source.plan, bytes, per_layer, cpu_budget, candidates);
        method_ = chosen.method;
        cpu_folder_ = chosen.folder;
        per_layer = chosen.gpu_per_layer;
        cpu_needed = chosen.cpu_needed;
    }
    note("[3/7] placing the " + std::to_string(per_layer * layers) + " most used experts on the GPU");
    const json::object placement = place(per_layer * layers, "placement.json");
    const std::string location = write_expert_location(placement, source.plan);

    if (method_->convert_method && !cpu_budget) {  // --cpu-memory's search wrote its candidates
        write_step(state, "cpu", "[4/7] the CPU experts: convert --quant-method " + std::string(method_->convert_method) + " --calibrate",
                   &run_convert_command, convert_args(), path(cpu_folder_));
    } else if (!method_->convert_method) {
        note("[4/7] the CPU experts: kt's RAWINT4 reads the GPU checkpoint itself");
    }
    std::vector<std::string> verify_gpu = {"--source", r_.input, "--converted", path("gpu"), "--calibration-activations",
                                           path("calibration.safetensors")};
    if (method_->rawint4) verify_gpu.insert(verify_gpu.end(), {"--for", "kt-rawint4"});
    if (const int rc = verify("[5/7] verify the GPU checkpoint", verify_gpu); rc != 0) return rc;
    if (method_->convert_method)
        if (const int rc = verify("[6/7] verify the CPU experts", {"--source", r_.input, "--converted", path(cpu_folder_), "--calibration-activations",
                                                            path("calibration.safetensors")});
            rc != 0)
            return rc;
    note("[7/7] eval of the hybrid model on " + r_.eval_dataset);
    // RAWINT4's CPU experts are the GPU checkpoint's codes, which kt decodes as Marlin does: every
    // expert of the hybrid is that folder's, wherever it runs.
    const std::string name = "hybrid: " + std::to_string(per_layer) + " GPU experts per layer (" +
                              (method_->rawint4 ? "W4A16 group 32" : "W4A16") + "), the rest " + method_->kt_method;
    json::array outputs{method_->rawint4 ? evaluate(name, {"--gpu-weights", path("gpu")})
                                        : evaluate(name, {"--cpu-weights", cpu_weights(), "--gpu-weights", path("gpu"), "--placement",
                                                          path("placement.json")})};
    const json::object eval = outputs.front().as_object();
    if (r_.compare_outputs && !method_->rawint4) {
        note("[7/7] eval of every expert on the CPU, then of every expert on the GPU, for comparison");
        outputs.push_back(evaluate(std::string("every expert ") + method_->kt_method + " (CPU)", {"--cpu-weights", cpu_weights()}));
        outputs.push_back(evaluate("every expert W4A16 (GPU)", {"--gpu-weights", path("gpu")}));
    }
    for (const json::value& c : candidates) outputs.push_back(c);
    write_file_atomically(dir_ / "eval.json", json::serialize(outputs) + "\n");

    const std::string launch = sglang_launch_line({path("gpu"), cpu_weights(), method_->kt_method, r_.cpuinfer, r_.threadpools, per_layer, location});
    state["kt_method"] = method_->kt_method;
    state["gpu_memory"] = budget;
    state["gpu_weight_bytes"] = json::object{{"fixed", bytes.fixed}, {"per_expert_of_every_layer", bytes.expert_row()},
                                             {"total", bytes.fixed + bytes.expert_row() * static_cast<std::uint64_t>(per_layer)}};
    state["gpu_experts_per_layer"] = per_layer;
    state["cpu_weights"] = cpu_weights();
    if (cpu_budget) state["cpu_memory"] = json::object{{"budget", cpu_budget}, {"experts", cpu_needed}};
    state["gpu_coverage"] = placement.at("gpu_coverage");
    state["eval"] = json::object{{"dataset", r_.eval_dataset}, {"tokens", eval.at("tokens")}, {"kl_mean", eval.at("kl_mean")},
                                 {"top1_agreement", eval.at("top1_agreement")}, {"perplexity_source", eval.at("perplexity_source")},
                                 {"perplexity_quantized", eval.at("perplexity_quantized")}};
    state["launch"] = launch;
    save_state(state);
    json::array sizes{json::object{{"what", "--gpu-memory"}, {"bytes", budget}},
                      json::object{{"what", "GPU weights served: all but the routed experts, and " + std::to_string(per_layer) +
                                                " expert(s) of each MoE layer"},
                                   {"bytes", bytes.fixed + bytes.expert_row() * static_cast<std::uint64_t>(per_layer)}},
                      json::object{{"what", "GPU checkpoint (gpu/, every expert)"}, {"bytes", folder_bytes(path("gpu"))}}};
    if (method_->convert_method)
        sizes.push_back(json::object{{"what", "CPU experts (" + cpu_folder_ + "/, every expert)"}, {"bytes", folder_bytes(path(cpu_folder_))}});
    if (cpu_budget) {
        sizes.push_back(json::object{{"what", "--cpu-memory"}, {"bytes", cpu_budget}});
        sizes.push_back(json::object{{"what", "CPU experts served: the experts not on the GPU"}, {"bytes", cpu_needed}});
    }
    write_report_page(dir_ / "report.html",
                      {{"title", "moequant hybrid: " + source.plan.family + ", " + std::to_string(per_layer) + " of " +
                                     std::to_string(source.plan.num_experts) + " experts per MoE layer on the GPU, the rest " + method_->kt_method},
                       {"commands", json::array{json::string(command_line_), json::string(launch)}},
                       {"usage", json::object{{"tokens", placement.at("calibration").at("tokens")}, {"layers", placement.at("layers")}}},
                       {"outputs", outputs},
                       {"sizes", std::move(sizes)}});

    std::printf("hybrid model in %s: %lld of %lld routed experts per MoE layer on the GPU (%.1f%% of expert choices on the calibration "
                "text), the rest %s on the CPU\n",
                dir_.string().c_str(), static_cast<long long>(per_layer), static_cast<long long>(source.plan.num_experts),
                100.0 * placement.at("gpu_coverage").to_number<double>(), method_->kt_method);
    std::printf("GPU weights %s of %s; eval on %lld held-out tokens: KL %.3g, top-1 %.3f, perplexity %.4g (source %.4g)\n\n",
                human_bytes(bytes.fixed + bytes.expert_row() * static_cast<std::uint64_t>(per_layer)).c_str(), human_bytes(budget).c_str(),
                static_cast<long long>(eval.at("tokens").to_number<std::int64_t>()), eval.at("kl_mean").to_number<double>(),
                eval.at("top1_agreement").to_number<double>(), eval.at("perplexity_quantized").to_number<double>(),
                eval.at("perplexity_source").to_number<double>());
    std::fflush(stdout);
    std::cout << "Report: " << (dir_ / "report.html").string() << "\n\nServe it with:\n" << launch;
    return 0;
}

}  // namespace

int run_hybrid(HybridRequest request, GlobalOptions globals, std::string command_line) {
    const HybridMethod& method = hybrid_method_named(request.kt_method);
    return Hybrid(std::move(request), std::move(globals), method, std::move(command_line)).run();
}

}  // namespace moequant::cli
