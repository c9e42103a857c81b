// The host's entry (host_main): the command table, --help, --version and error reporting.
//
// The host only parses options and dispatches to sub-commands; model families, quantizers
// and output formats are plugins loaded at run time.

#include "cluster_run.hpp"
#include "command.hpp"
#include "global_options.hpp"
#include "host_main.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/blas_kernels.hpp>
#include <moequant/cpu_isa.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/plugin.hpp>
#include <moequant/printable.hpp>
#include <moequant/version.hpp>

#include <csignal>
#include <cstring>
#include <iostream>

namespace {

using moequant::cli::Command;

const Command commands[] = {
    {"plugins", "list the loaded plugins and what they provide (--all: also rejected modules)",
     &moequant::cli::run_plugins_command},
    {"inspect", "summarise a checkpoint: headers, detected family, MoE plan (reads no tensor data)",
     &moequant::cli::run_inspect_command},
    {"synth", "write a small random checkpoint in a family's exact on-disk conventions",
     &moequant::cli::run_synth_command},
    {"convert", "quantize the routed experts into kt-kernel's AMX INT4/INT8 format (or another format)",
     &moequant::cli::run_convert_command},
    {"gptq", "quantize the routed experts for the GPU (GPTQ or RTN, W4A16/W8A16) into compressed-tensors",
     &moequant::cli::run_gptq_command},
    {"gpu", "same as gptq", &moequant::cli::run_gptq_command},
    {"record", "run the model on text (--dataset) and write every MoE layer's inputs as recorded activations",
     &moequant::cli::run_record_command},
    {"plan", "place the most used routed experts on the GPU from recorded MoE inputs (--num-gpu-experts)",
     &moequant::cli::run_plan_command},
    {"eval", "measure a conversion end to end: perplexity and KL of the quantized model against the source",
     &moequant::cli::run_eval_command},
    {"hybrid", "prepare a model for kt-kernel + SGLang in one run: GPU checkpoint, CPU experts, placement, checks, eval, launch line",
     &moequant::cli::run_hybrid_command},
    {"verify", "check a converted output against its source (--source, --converted), or compare two outputs",
     &moequant::cli::run_verify_command},
    {"completion", "print a shell completion script: moequant completion bash|zsh",
     &moequant::cli::run_completion_command},
};

const char* exit_code_help =
    "Exit codes:\n"
    "  0  success\n"
    "  1  internal error (a bug: please report it)\n"
    "  2  usage error (bad command line)\n"
    "  3  invalid input (checkpoint, safetensors file, config.json)\n"
    "  4  plugin error (missing, incompatible or failing plugin)\n"
    "  5  I/O error writing output (permissions, disk full, file size limit)\n"
    "  6  verification failed\n";

void print_usage(std::ostream& out) {
    out << "moequant " << MOEQUANT_VERSION_STRING
        << " - prepare Mixture-of-Experts checkpoints for CPU-GPU hybrid inference\n\n"
           "Usage: moequant [--plugin FILE] [--plugin-dir DIR] [--no-default-plugins] <command> [options]\n"
           "       moequant <command> --help\n"
           "       moequant --version\n\n"
           "Commands:\n";
    for (const auto& c : commands) out << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.summary << "\n";
    out << "\nPlugins are searched in this order: --plugin files, --plugin-dir folders,\n"
           "MOEQUANT_PLUGIN_PATH (':'-separated folders), then the plugin folder next to the\n"
           "executable (../lib/moequant/plugins). MOEQUANT_PLUGIN_DEBUG=1 traces every candidate.\n\n"
        << exit_code_help;
}

// What a bug report or a plugin author needs: the versions plugins are checked against, the
// kernels this CPU runs (MOEQUANT_ISA may cap them) and those oneDNN and BLIS run for the FP32
// products.
void print_version(std::ostream& out) {
    const moequant::Isa active = moequant::active_isa(), detected = moequant::detected_isa();
    out << "moequant " << MOEQUANT_VERSION_STRING << "\n"
        << "plugin ABI " << MOEQUANT_PLUGIN_ABI_VERSION << ", SDK " << MOEQUANT_VERSION_STRING << " (a plugin needs ABI "
        << MOEQUANT_PLUGIN_ABI_VERSION << " and an SDK " << MOEQUANT_VERSION_MAJOR << ".x no newer than this one)\n"
        << "CPU kernels: " << moequant::isa_name(active);
    if (active != detected) out << " (this CPU has " << moequant::isa_name(detected) << "; capped by MOEQUANT_ISA)";
    out << "\nFP32 products: " << moequant::f32_gemm_kernels() << " (Hessians); " << moequant::blas_kernels() << " (chosen by "
        << moequant::blas_kernels_chosen_by() << "; the factorizations and the other products)\n";
}

int run(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    // The command is the first word that is not an option or the value of a global option.
    std::size_t cmd = 0;
    while (cmd < args.size() && args[cmd].starts_with("-")) {
        if (moequant::cli::global_option_takes_value(args[cmd])) ++cmd;
        ++cmd;
    }
    std::vector<std::string> before(args.begin(), args.begin() + static_cast<long>(std::min(cmd, args.size())));

    moequant::cli::GlobalOptions globals;
    namespace po = boost::program_options;
    po::options_description top("Options");
    top.add_options()("help,h", "show this help")("version", "show the version");
    top.add(moequant::cli::global_option_group(globals));
    auto vm = moequant::cli::parse_command_line(before, top, {});
    if (vm.count("version")) {
        print_version(std::cout);
        return 0;
    }
    if (vm.count("help") || cmd >= args.size()) {
        print_usage(cmd >= args.size() && !vm.count("help") ? std::cerr : std::cout);
        return vm.count("help") ? 0 : moequant::exit_code(moequant::ErrorKind::usage);
    }
    const std::string& name = args[cmd];
    if (name == "help") {
        print_usage(std::cout);
        return 0;
    }
    moequant::cli::agree_on_the_command(name, args);
    for (const auto& c : commands)
        if (name == c.name) return c.run(std::vector<std::string>(args.begin() + static_cast<long>(cmd) + 1, args.end()), globals);
    moequant::throw_usage_error("unknown command '" + name + "'", {.hint = "run 'moequant --help' for the list"});
}

}  // namespace

std::vector<std::string> moequant::cli::command_names() {
    std::vector<std::string> names;
    for (const auto& c : commands) names.emplace_back(c.name);
    return names;
}

int moequant::cli::host_main(int argc, char** argv) {
    // A file-size limit (ulimit -f) must surface as a write error (EFBIG) naming the file, not
    // kill the process half-way through a shard.
    std::signal(SIGXFSZ, SIG_IGN);
    // An input shard truncated while mapped: one error line and exit 3, not a SIGBUS.
    moequant::install_mapped_file_fault_handler();
    std::ios::sync_with_stdio(false);
    // Under mpirun every rank runs this; rank 0 talks, the others only report their errors. An
    // error on one rank ends the whole job at once (the others may be waiting for it), unless
    // every rank found it together.
    auto fail = [](int code, const std::string& line) {
        moequant::cli::restore_rank_output();
        std::cout.flush();
        const moequant::Cluster& cluster = moequant::Cluster::world();
        const std::string rank = moequant::rank_label(cluster);
        std::cerr << "moequant: " << (rank.empty() || moequant::Cluster::failing_together() ? "" : "(" + rank + ") ") << line << "\n";
        std::cerr.flush();
        if (cluster.size() > 1 && !moequant::Cluster::failing_together()) moequant::Cluster::abort(code);
        moequant::Cluster::stop();
        return code;
    };
    try {
        moequant::Cluster::start(argc, argv);
        // After MPI: mpirun ends the other ranks with SIGTERM when one fails, and a run ended
        // from outside leaves no lock, temporaries or scratch files behind either.
        moequant::install_termination_cleanup();
        moequant::cli::quiet_other_ranks();
        const int code = run(argc, argv);
        moequant::Cluster::stop();
        return code;
    } catch (const moequant::RankExit& e) {
        moequant::Cluster::stop();
        return e.code;
    } catch (const moequant::Error& e) {
        return fail(moequant::exit_code(e.kind()), std::string("error: ") + e.what());
    } catch (const std::bad_alloc&) {
        return fail(moequant::exit_code(moequant::ErrorKind::internal), "error: out of memory");
    } catch (const std::exception& e) {
        return fail(moequant::exit_code(moequant::ErrorKind::internal),
                    std::string("internal error: ") + moequant::printable_text(e.what()));  // may quote raw paths
    }
}
