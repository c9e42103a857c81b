#include "global_options.hpp"
#include "option_values.hpp"

#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <cctype>
#include <iostream>

namespace moequant::cli {

namespace po = boost::program_options;

po::options_description global_option_group(GlobalOptions& target) {
    po::options_description group("Plugin options (accepted by every command)");
    group.add_options()
        ("plugin", po::value(&target.plugin_files)->composing()->value_name("FILE"),
         "load this plugin module (repeatable); a rejected one is an error")
        ("plugin-dir", po::value(&target.plugin_dirs)->composing()->value_name("DIR"),
         "load every moequant-*.so in DIR (repeatable)")
        ("no-default-plugins", po::bool_switch(&target.no_default_plugins),
         "ignore MOEQUANT_PLUGIN_PATH and the plugin folder next to the executable");
    return group;
}

bool global_option_takes_value(const std::string& arg) { return arg == "--plugin" || arg == "--plugin-dir"; }

namespace {

bool looks_negative_number(const std::string& token) {
    return token.size() > 1 && token[0] == '-' && (std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');
}

// `--name -1` as `--name=-1` when --name takes a value: Boost would read "-1" as a short option
// and say the value is missing (`gptq --group_size -1` means channel; elsewhere the value check
// then names what is wrong with a negative number).
std::vector<std::string> with_negative_values_joined(const std::vector<std::string>& args, const po::options_description& options) {
    std::vector<std::string> joined;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& arg = args[i];
        if (arg.starts_with("--") && arg.find('=') == std::string::npos && i + 1 < args.size() && looks_negative_number(args[i + 1]))
            if (const po::option_description* o = options.find_nothrow(arg.substr(2), true); o && o->semantic()->max_tokens() > 0) {
                joined.push_back(arg + "=" + args[++i]);
                continue;
            }
        joined.push_back(arg);
    }
    return joined;
}

}  // namespace

po::variables_map parse_command_line(const std::vector<std::string>& args, const po::options_description& options,
                                     const po::positional_options_description& positional) {
    po::variables_map vm;
    try {
        const po::parsed_options parsed =
            po::command_line_parser(with_negative_values_joined(args, options)).options(options).positional(positional).run();
        po::store(parsed, vm);
        check_numeric_options(parsed, vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw_usage_error(e.what(), {.hint = "see --help"});
    }
    return vm;
}

namespace {

bool is_explicit(const PluginRejection& r) {
    return r.origin == PluginOrigin::explicit_file ||
           (r.origin == PluginOrigin::plugin_dir && r.reason == "plugin folder does not exist");
}

}  // namespace

void warn_about_rejections(const Registry& registry) {
    std::size_t scanned = 0;
    for (const auto& r : registry.rejections())
        if (!is_explicit(r)) ++scanned;
    if (scanned > 0)
        std::cerr << "moequant: warning: " << scanned << " plugin candidate" << (scanned == 1 ? " was" : "s were")
                  << " rejected; run 'moequant plugins --all'\n";
}

void load_plugins(Registry& registry, const GlobalOptions& globals, bool fail_on_explicit) {
    PluginSearch search;
    for (const auto& f : globals.plugin_files) {
        // A named FIFO, device or folder is bad input, refused before the loader sees it; a
        // missing file stays a plugin error.
        std::error_code ec;
        if (std::filesystem::exists(f, ec)) require_regular_file(f);
        search.files.emplace_back(f);
    }
    for (const auto& d : globals.plugin_dirs) search.dirs.emplace_back(d);
    search.use_environment = !globals.no_default_plugins;
    search.use_default_dir = !globals.no_default_plugins;
    registry.discover(search);
    if (fail_on_explicit) check_explicit_plugins(registry);
}

void check_explicit_plugins(const Registry& registry) {
    for (const auto& r : registry.rejections())
        if (is_explicit(r))
            throw Error(ErrorKind::plugin, "plugin rejected: " + r.reason,
                        {.file = r.file.string(), .hint = r.hint});
}

void print_command_help(const char* usage, const char* description, const po::options_description& options) {
    std::cout << "Usage: " << usage << "\n\n" << description << "\n\n" << options << "\n";
}

}  // namespace moequant::cli
