// Names as the terminal may show them. Tensor, file and key names come from the checkpoint and
// can hold anything: an ESC sequence that clears the screen, a CR that overwrites a line with a
// fake "PASSED", invalid UTF-8. Every name printed for a person goes through printable_name();
// JSON output is escaped by its serializer instead.
#pragma once

#include <moequant/export.hpp>

#include <string>
#include <string_view>

namespace moequant {

// `name` with every byte or character a terminal would act on replaced by a visible escape:
// C0 controls (ESC, CR, LF, ...) and DEL as \xNN, bytes that are not well-formed UTF-8 as \xNN
// (each), C1 controls and the Unicode line/paragraph separators and bidirectional overrides as
// \u{NNNN}, and the backslash itself as \\ so an escape cannot be faked. Printable UTF-8 (e.g.
// CJK) is kept as it is.
MOEQUANT_API std::string printable_name(std::string_view name);

// The same for prose that quotes names (an error message, a hint): everything printable_name()
// escapes except the backslash, which messages use for themselves (regexes, escapes already
// made by printable_name()). Applying it to printable_name()'s result changes nothing.
MOEQUANT_API std::string printable_text(std::string_view text);

}  // namespace moequant
