// A sub-command's command line: its options with --help and the global options added, parsed,
// and --help answered with the command's usage, description and options.
#pragma once

#include "global_options.hpp"

#include <boost/program_options.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace moequant::cli {

// What `moequant COMMAND --help` prints above the options.
struct CommandHelp {
    const char* usage;        // the line(s) after "Usage: "
    const char* description;  // what the command does
};

// Adds -h/--help (last of `options`' own, before its groups) and the global options (bound to
// `globals`), parses `args` (parse_command_line), then requires the options named in `positive`
// to be non-zero when given. Returns the values, or nullopt after printing the help when --help
// was given: the command then exits 0.
std::optional<boost::program_options::variables_map> parse_command(
    const std::vector<std::string>& args, boost::program_options::options_description& options, GlobalOptions& globals,
    const CommandHelp& help, std::initializer_list<const char*> positive = {},
    const boost::program_options::positional_options_description& positional = {});

}  // namespace moequant::cli
