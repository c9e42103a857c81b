// Writing JSON text by hand where the exact bytes matter (private to the SDK).
//
// safetensors headers must be byte-identical to the reference writer (Rust serde_json,
// compact), and index files should look like the ones transformers writes; Boost.JSON's
// serializer fixes neither, so strings are escaped here the way serde_json does it.
#pragma once

#include <string>
#include <string_view>

namespace moequant::detail {

// Appends `text` as a JSON string literal: quotes, backslash and control characters escaped
// (\" \\ \b \f \n \r \t, other controls as \u00XX), everything else (UTF-8) verbatim.
void append_json_string(std::string& out, std::string_view text);

// Returns the JSON string literal for `text`.
std::string json_string(std::string_view text);

}  // namespace moequant::detail
