#include "command_line.hpp"

#include "option_values.hpp"

namespace moequant::cli {

namespace po = boost::program_options;

std::optional<po::variables_map> parse_command(const std::vector<std::string>& args, po::options_description& options,
                                               GlobalOptions& globals, const CommandHelp& help,
                                               std::initializer_list<const char*> positive,
                                               const po::positional_options_description& positional) {
    options.add_options()("help,h", po::bool_switch(), "show this help");
    options.add(global_option_group(globals));
    po::variables_map given = parse_command_line(args, options, positional);
    require_positive(given, positive);
    if (!given["help"].as<bool>()) return given;
    print_command_help(help.usage, help.description, options);
    return std::nullopt;
}

}  // namespace moequant::cli
