#include "gptq_scheme.hpp"

#include <moequant/error.hpp>

namespace moequant::gptq {

Scheme parse_scheme(const Options& options, bool gptq) {
    Scheme s;
    s.uses_calibration = gptq;
    const std::string type = options.get_string("quant_type", "W4A16");
    if (type == "W4A16" || type == "w4a16")
        s.bits = 4;
    else if (type == "W8A16" || type == "w8a16")
        s.bits = 8;
    else
        throw Error(ErrorKind::usage, "--quant_type '" + type + "' is not supported",
                    {.code = "BadOption", .hint = "use W4A16 or W8A16"});
    const std::string strategy = options.get_string("strategy", "group");
    if (strategy == "channel")
        s.group_size = 0;
    else if (strategy != "group")
        throw Error(ErrorKind::usage, "--strategy '" + strategy + "' is not supported",
                    {.code = "BadOption", .hint = "use group or channel"});
    else if (options.has("group_size")) {  // what an output's quantization_config records (verify)
        s.group_size = options.get_int("group_size", s.group_size);
        if (s.group_size <= 0)
            throw Error(ErrorKind::usage, "group_size must be positive, not " + std::to_string(s.group_size), {.code = "BadOption"});
    }
    const std::string range = options.get_string("code_range", "full");
    if (range == "symmetric")
        s.code_range = CodeRange::symmetric;
    else if (range != "full")
        throw Error(ErrorKind::usage, "code_range '" + range + "' is not supported",
                    {.code = "BadOption", .hint = "use full or symmetric"});
    if (!gptq) {
        s.actorder = ActOrder::none;
        return s;
    }
    const std::string order = options.get_string("actorder", "static");
    if (order == "static" || order == "weight")
        s.actorder = ActOrder::static_order;
    else if (order == "group" || order == "dynamic")
        s.actorder = s.group_size ? ActOrder::group : ActOrder::none;  // §2: group on channel falls back to none
    else if (order == "none" || order == "None" || order == "null")
        s.actorder = ActOrder::none;
    else
        throw Error(ErrorKind::usage, "--actorder '" + order + "' is not supported",
                    {.code = "BadOption", .hint = "use static, group or none"});
    s.dampening_frac = options.get_double("dampening_frac", 0.1);
    if (!(s.dampening_frac > 0 && s.dampening_frac < 1))
        throw Error(ErrorKind::usage, "--dampening_frac must lie in (0, 1), not " + options.get_string("dampening_frac", ""),
                    {.code = "BadOption"});
    return s;
}

}  // namespace moequant::gptq
