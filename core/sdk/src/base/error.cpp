#include <moequant/error.hpp>
#include <moequant/printable.hpp>

namespace moequant {
namespace {

// "file: tensor 'x' (layer 3, plugin amx): message (Code); hint: ..." — one line, which stays
// one line on a terminal whatever the names hold: fields are escaped as names, the message and
// hint (which may quote names) as text.
std::string compose(const std::string& message, const ErrorContext& c) {
    std::string out;
    if (!c.plugin.empty()) out.append("plugin '").append(printable_name(c.plugin)).append("': ");
    if (!c.file.empty()) out.append(printable_name(c.file)).append(": ");
    if (c.layer) out.append("layer ").append(std::to_string(*c.layer)).append(": ");
    if (!c.tensor.empty()) out.append("tensor '").append(printable_name(c.tensor)).append("': ");
    out.append(printable_text(message));
    if (!c.code.empty()) out.append(" (").append(printable_name(c.code)).append(")");
    if (!c.hint.empty()) out.append("; hint: ").append(printable_text(c.hint));
    return out;
}

}  // namespace

Error::Error(ErrorKind kind, const std::string& message, ErrorContext context)
    : std::runtime_error(compose(message, context)),
      kind_(kind),
      message_(message),
      context_(std::move(context)) {}

Error Error::with_context(const ErrorContext& outer) const {
    ErrorContext merged = context_;
    if (merged.file.empty()) merged.file = outer.file;
    if (merged.tensor.empty()) merged.tensor = outer.tensor;
    if (!merged.layer) merged.layer = outer.layer;
    if (merged.plugin.empty()) merged.plugin = outer.plugin;
    if (merged.code.empty()) merged.code = outer.code;
    if (merged.hint.empty()) merged.hint = outer.hint;
    return Error(kind_, message_, std::move(merged));
}

void throw_input_error(const std::string& message, ErrorContext context) {
    throw Error(ErrorKind::input, message, std::move(context));
}
void throw_io_error(const std::string& message, ErrorContext context) {
    throw Error(ErrorKind::io, message, std::move(context));
}
void throw_usage_error(const std::string& message, ErrorContext context) {
    throw Error(ErrorKind::usage, message, std::move(context));
}

}  // namespace moequant
