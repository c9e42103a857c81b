#define PCRE2_CODE_UNIT_WIDTH 8
#include "unicode_regex.hpp"

#include <moequant/error.hpp>

#include <pcre2.h>

namespace moequant::tokenization {

struct UnicodeRegex::Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
};

UnicodeRegex::UnicodeRegex(const std::string& pattern, const std::string& where) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto code = std::make_shared<Code>();
    code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                               &offset, nullptr);
    if (!code->code) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        throw Error(ErrorKind::input,
                    where + ": the regular expression does not compile at offset " + std::to_string(offset) + ": " +
                        reinterpret_cast<const char*>(message),
                    {.code = "BadTokenizer"});
    }
    pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
    code_ = std::move(code);
}

void UnicodeRegex::for_each_match(std::string_view text,
                                  const std::function<void(std::size_t, std::size_t)>& found) const {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(code_->code, nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t at = 0;
    while (at <= text.size()) {
        // The text was validated as UTF-8 once; the checks would cost a pass per match.
        const int rc = pcre2_match(code_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(match);
            throw Error(ErrorKind::internal, "PCRE2 match failed with code " + std::to_string(rc));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const std::size_t begin = ovector[0], end = ovector[1];
        if (end > begin) {
            found(begin, end);
            at = end;
        } else {  // empty match: step over one UTF-8 character
            at = begin + 1;
            while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
        }
    }
    pcre2_match_data_free(match);
}

}  // namespace moequant::tokenization
