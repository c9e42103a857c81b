// Options every sub-command accepts (before or after the sub-command name), and building the
// plugin registry from them.
#pragma once

#include <moequant/engine/plugin_registry.hpp>

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace moequant::cli {

struct GlobalOptions {
    std::vector<std::string> plugin_files;  // --plugin
    std::vector<std::string> plugin_dirs;   // --plugin-dir
    bool no_default_plugins = false;        // --no-default-plugins
};

// The option group, bound to `target`.
boost::program_options::options_description global_option_group(GlobalOptions& target);

// True for global options that take a value (so the value is not mistaken for a command).
bool global_option_takes_value(const std::string& arg);

// Parses `args` with the command's options plus the global group; positional arguments go to
// `positional` (may be empty). Throws Error(usage) with a one-line message on bad input.
boost::program_options::variables_map parse_command_line(
    const std::vector<std::string>& args, const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional);

// Loads plugins in the documented discovery order. When `fail_on_explicit` is set, a module
// named with --plugin (or a folder named with --plugin-dir) that was rejected is an
// Error(plugin).
void load_plugins(Registry& registry, const GlobalOptions& globals, bool fail_on_explicit = true);

// Throws Error(plugin) if a --plugin file or --plugin-dir folder was rejected.
void check_explicit_plugins(const Registry& registry);

// One warning line when modules found by scanning were rejected (explicitly named ones are
// reported as errors instead).
void warn_about_rejections(const Registry& registry);

// Prints "moequant <command> [options] ..." help for a command.
void print_command_help(const char* usage, const char* description,
                        const boost::program_options::options_description& options);

}  // namespace moequant::cli
