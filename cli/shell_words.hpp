// Text as a POSIX shell reads it back: a word quoted only where the shell needs it.
#pragma once

#include <string>

namespace moequant::cli {

// `text` as one shell word: as it is when it holds only characters no shell treats specially,
// else in single quotes (a quote inside written as '\'').
std::string shell_word(const std::string& text);

}  // namespace moequant::cli
