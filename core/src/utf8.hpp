// UTF-8 validation (private to the core): the reference reader rejects a header that is not
// valid UTF-8 before it parses any JSON (InvalidHeader).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace moequant::detail {

// Offset of the first byte that does not start a well-formed UTF-8 sequence (overlong forms,
// surrogates and code points above U+10FFFF are ill-formed), or nullopt if all is valid.
std::optional<std::size_t> find_invalid_utf8(std::string_view text) noexcept;

}  // namespace moequant::detail
