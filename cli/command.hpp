// A sub-command of the moequant host.
#pragma once

#include "global_options.hpp"

#include <string>
#include <vector>

namespace moequant::cli {

struct Command {
    const char* name;
    const char* summary;
    // Parses the command's own arguments (global options may appear among them) and runs it;
    // returns the process exit code. Throws moequant::Error for failures.
    int (*run)(const std::vector<std::string>& args, GlobalOptions globals);
};

int run_plugins_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_inspect_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_convert_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_synth_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_gptq_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_record_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_plan_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_eval_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_hybrid_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_verify_command(const std::vector<std::string>& args, GlobalOptions globals);
int run_completion_command(const std::vector<std::string>& args, GlobalOptions globals);

// The names of the commands, in the order `moequant --help` lists them (defined with the table
// in host_main.cpp).
std::vector<std::string> command_names();

}  // namespace moequant::cli
