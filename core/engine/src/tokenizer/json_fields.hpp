// Reading tokenizer.json fields with errors that name the component and the key.
#pragma once

#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <string>

namespace moequant::tokenization {

[[noreturn]] inline void bad_tokenizer(const std::string& what) {
    throw Error(ErrorKind::input, what, {.code = "BadTokenizer"});
}

inline const boost::json::object& as_object(const boost::json::value& v, const std::string& where) {
    if (!v.is_object()) bad_tokenizer(where + " must be an object");
    return v.get_object();
}

inline std::string string_field(const boost::json::object& o, const char* key, const std::string& where,
                                const std::string& fallback = {}, bool required = false) {
    const auto* v = o.if_contains(key);
    if (!v || v->is_null()) {
        if (required) bad_tokenizer(where + " has no '" + key + "'");
        return fallback;
    }
    if (!v->is_string()) bad_tokenizer(where + "." + key + " must be a string");
    return std::string(v->get_string());
}

inline bool bool_field(const boost::json::object& o, const char* key, bool fallback) {
    const auto* v = o.if_contains(key);
    return v && v->is_bool() ? v->get_bool() : fallback;
}

// The "type" of a component object.
inline std::string type_of(const boost::json::value& v, const std::string& where) {
    return string_field(as_object(v, where), "type", where, {}, true);
}

// A {"String": s} or {"Regex": r} pattern: the regex source (a String is escaped).
std::string pattern_regex(const boost::json::value& pattern, const std::string& where);

}  // namespace moequant::tokenization
