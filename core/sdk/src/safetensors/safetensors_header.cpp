// Parsing and validating a safetensors header.
//
// A streaming (SAX) handler on Boost.JSON's basic_parser instead of a DOM: it sees duplicate
// keys (a DOM silently keeps one of them), rejects unknown fields and wrong types with the
// tensor's name, and never builds a tree for headers that can be ~100 MB.

#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/utf8.hpp>

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace moequant {
namespace {

namespace json = boost::json;

// The error a handler callback reports; the parser stops at the first one.
struct HeaderProblem {
    std::string message;
    std::string tensor;
    std::string code;
};

class HeaderHandler {
public:
    static constexpr std::size_t max_object_size = std::numeric_limits<std::size_t>::max();
    static constexpr std::size_t max_array_size = std::numeric_limits<std::size_t>::max();
    static constexpr std::size_t max_key_size = std::numeric_limits<std::size_t>::max();
    static constexpr std::size_t max_string_size = std::numeric_limits<std::size_t>::max();

    SafetensorsHeader result;
    std::optional<HeaderProblem> problem;

    bool on_document_begin(json::error_code&) { return true; }
    bool on_document_end(json::error_code&) { return true; }

    bool on_object_begin(json::error_code& ec) {
        ++depth_;
        if (depth_ == 1) return true;  // the header object
        if (depth_ == 2) {
            if (key_ == "__metadata__") {
                in_metadata_ = true;
                result.has_metadata = true;
                metadata_keys_.clear();
                return true;
            }
            entry_ = Entry{};
            entry_.info.name = key_;
            return true;
        }
        if (in_metadata_)
            return fail(ec, "__metadata__ value for key '" + field_ + "' is an object, not a string");
        return fail(ec, "field '" + field_ + "' holds an object", key_);
    }

    bool on_object_end(std::size_t, json::error_code& ec) {
        --depth_;
        if (depth_ == 1) {
            if (in_metadata_) {
                in_metadata_ = false;
                return true;
            }
            return finish_entry(ec);
        }
        return true;
    }

    bool on_array_begin(json::error_code& ec) {
        ++depth_;
        if (depth_ == 1) return fail(ec, "the header is a JSON array, not an object");
        if (depth_ == 2) {
            if (key_ == "__metadata__") return fail(ec, "__metadata__ is not an object");
            return fail(ec, "the entry is not an object", key_);
        }
        if (in_metadata_)
            return fail(ec, "__metadata__ value for key '" + field_ + "' is not a string");
        if (depth_ == 3 && (field_ == "shape" || field_ == "data_offsets")) {
            array_field_ = field_;
            return true;
        }
        return fail(ec, "field '" + field_ + "' must not be an array", key_);
    }

    bool on_array_end(std::size_t, json::error_code& ec) {
        --depth_;
        if (array_field_ == "data_offsets" && offsets_seen_ != 2)
            return fail(ec, "data_offsets must hold exactly 2 integers, found " + std::to_string(offsets_seen_),
                        key_);
        array_field_.clear();
        return true;
    }

    bool on_key_part(json::string_view s, std::size_t, json::error_code&) { return add_part(s); }

    bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
        std::string key = whole_text(s);
        if (depth_ == 1) {
            // Duplicate tensor names are found after parsing, without a copy of every name.
            if (key == "__metadata__") {
                if (seen_metadata_) return fail(ec, "__metadata__ appears twice", "", "DuplicateKey");
                seen_metadata_ = true;
            }
            key_ = std::move(key);
            return true;
        }
        if (in_metadata_) {
            if (!metadata_keys_.insert(key).second)
                return fail(ec, "__metadata__ key '" + key + "' appears twice", "", "DuplicateKey");
            field_ = std::move(key);
            return true;
        }
        // A field of a tensor entry.
        int bit;
        if (key == "dtype") bit = 1;
        else if (key == "shape") bit = 2;
        else if (key == "data_offsets") bit = 4;
        else return fail(ec, "unknown field '" + key + "' (allowed: dtype, shape, data_offsets)", key_, "UnknownField");
        if (entry_.fields & bit) return fail(ec, "field '" + key + "' appears twice", key_, "DuplicateKey");
        entry_.fields |= bit;
        field_ = std::move(key);
        if (bit == 4) offsets_seen_ = 0;
        return true;
    }

    bool on_string_part(json::string_view s, std::size_t, json::error_code&) { return add_part(s); }

    bool on_string(json::string_view s, std::size_t, json::error_code& ec) {
        std::string value = whole_text(s);
        if (depth_ == 0) return fail(ec, "the header is a JSON string, not an object");
        if (depth_ == 1) {
            if (key_ == "__metadata__") return fail(ec, "__metadata__ is not an object");
            return fail(ec, "the entry is not an object", key_);
        }
        if (in_metadata_) {
            result.metadata.emplace_back(field_, std::move(value));
            return true;
        }
        if (depth_ == 2 && field_ == "dtype") {
            auto dtype = dtype_from_name(value);
            if (!dtype) return fail(ec, "unknown dtype '" + value + "'", key_, "UnknownDtype");
            entry_.info.dtype = *dtype;
            return true;
        }
        return fail(ec, "field '" + field_ + "' must not be a string", key_);
    }

    bool on_number_part(json::string_view, json::error_code&) { return true; }

    bool on_int64(std::int64_t v, json::string_view, json::error_code& ec) {
        if (v < 0) return fail_number(ec, "a negative number (" + std::to_string(v) + ")");
        return on_integer(static_cast<std::uint64_t>(v), ec);
    }
    bool on_uint64(std::uint64_t v, json::string_view, json::error_code& ec) { return on_integer(v, ec); }
    bool on_double(double, json::string_view text, json::error_code& ec) {
        return fail_number(ec, "'" + std::string(text) + "', which is not a non-negative 64-bit integer");
    }
    bool on_bool(bool, json::error_code& ec) { return fail_scalar(ec, "a boolean"); }
    bool on_null(json::error_code& ec) { return fail_scalar(ec, "null"); }
    bool on_comment_part(json::string_view, json::error_code&) { return true; }
    bool on_comment(json::string_view, json::error_code&) { return true; }

private:
    struct Entry {
        TensorInfo info;
        int fields = 0;  // bit set of the fields seen: 1 dtype, 2 shape, 4 data_offsets
    };

    bool fail(json::error_code& ec, std::string message, std::string tensor = {},
              std::string code = "InvalidHeaderDeserialization") {
        problem = HeaderProblem{std::move(message), std::move(tensor), std::move(code)};
        ec = json::error::syntax;  // any code stops the parser; the problem says what it was
        return false;
    }

    bool fail_scalar(json::error_code& ec, const std::string& what) {
        if (depth_ == 0) return fail(ec, "the header is " + what + ", not an object");
        if (depth_ == 1) return fail(ec, "the entry is " + what + ", not an object", key_);
        if (in_metadata_) return fail(ec, "__metadata__ value for key '" + field_ + "' is " + what + ", not a string");
        return fail(ec, "field '" + field_ + "' must not be " + what, key_);
    }

    bool fail_number(json::error_code& ec, const std::string& what) {
        if (depth_ == 3 && !array_field_.empty())
            return fail(ec, array_field_ + " holds " + what, key_);
        return fail_scalar(ec, "a number");
    }

    bool on_integer(std::uint64_t v, json::error_code& ec) {
        if (depth_ != 3 || array_field_.empty()) return fail_scalar(ec, "a number");
        if (array_field_ == "shape") {
            if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
                return fail(ec, "shape dimension " + std::to_string(v) + " is too large", key_,
                            "ValidationOverflow");
            entry_.info.shape.push_back(static_cast<std::int64_t>(v));
            return true;
        }
        if (offsets_seen_ == 0) entry_.info.begin = v;
        else if (offsets_seen_ == 1) entry_.info.end = v;
        ++offsets_seen_;
        return true;
    }

    // A key or string arrives in parts where escapes split it: collected in part_.
    bool add_part(json::string_view s) {
        part_.append(s.data(), s.size());
        return true;
    }

    std::string whole_text(json::string_view last) {
        add_part(last);
        std::string text = std::move(part_);
        part_.clear();
        return text;
    }

    bool finish_entry(json::error_code& ec) {
        static constexpr const char* names[] = {"dtype", "shape", "data_offsets"};
        for (int i = 0; i < 3; ++i)
            if (!(entry_.fields & (1 << i)))
                return fail(ec, std::string("missing field '") + names[i] + "'", key_, "MissingField");
        result.tensors.push_back(std::move(entry_.info));
        return true;
    }

    int depth_ = 0;
    bool in_metadata_ = false;
    std::string key_;          // current top-level key (tensor name or __metadata__)
    std::string field_;        // current key inside an entry or inside __metadata__
    std::string array_field_;  // "shape" or "data_offsets" while inside that array
    std::size_t offsets_seen_ = 0;
    std::string part_;         // pieces of a key or string split by escapes
    Entry entry_;
    bool seen_metadata_ = false;
    std::unordered_set<std::string> metadata_keys_;
};

[[noreturn]] void reject(const std::string& file, const std::string& message, std::string code,
                         std::string tensor = {}) {
    throw Error(ErrorKind::input, message,
                ErrorContext{.file = file, .tensor = std::move(tensor), .code = std::move(code)});
}

void reject_duplicate_names(const std::vector<TensorInfo>& tensors, const std::string& file) {
    std::unordered_set<std::string_view> names;
    names.reserve(tensors.size());
    for (const auto& t : tensors)
        if (!names.insert(t.name).second)
            reject(file, "tensor name appears twice in the header", "DuplicateTensorName", t.name);
}

// The reference's Metadata::validate plus the final buffer-length check.
void validate_layout(SafetensorsHeader& header, std::uint64_t data_size, const std::string& file) {
    auto& tensors = header.tensors;
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::uint64_t start = 0;
    for (const auto& t : tensors) {
        if (t.begin != start || t.end < t.begin) {
            std::string why = t.end < t.begin
                ? "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) + "] end before they begin"
                : t.begin < start
                    ? "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) +
                          "] overlap the previous tensor, which ends at " + std::to_string(start)
                    : "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) +
                          "] leave a hole: the previous tensor ends at " + std::to_string(start);
            reject(file, why, "InvalidOffset", t.name);
        }
        start = t.end;
        auto elements = shape_elements(t.shape);
        std::uint64_t bits = 0;
        if (!elements || __builtin_mul_overflow(*elements, static_cast<std::uint64_t>(dtype_bits(t.dtype)), &bits))
            reject(file, "the size of shape " + shape_to_string(t.shape) + " overflows 64 bits",
                   "ValidationOverflow", t.name);
        if (bits % 8 != 0)
            reject(file, std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape) + " is " +
                             std::to_string(bits) + " bits, not a whole number of bytes",
                   "MisalignedSlice", t.name);
        if (t.end - t.begin != bits / 8)
            reject(file, "data_offsets [" + std::to_string(t.begin) + "," + std::to_string(t.end) + "] hold " +
                             std::to_string(t.end - t.begin) + " bytes but " + std::string(dtype_name(t.dtype)) +
                             " " + shape_to_string(t.shape) + " needs " + std::to_string(bits / 8),
                   "TensorInvalidInfo", t.name);
    }
    if (start != data_size)
        reject(file,
               start < data_size
                   ? "the data buffer has " + std::to_string(data_size - start) +
                         " bytes after the last tensor (the header indexes " + std::to_string(start) +
                         " of " + std::to_string(data_size) + " data bytes)"
                   : "the file ends " + std::to_string(start - data_size) +
                         " bytes before the last tensor does (the header indexes " + std::to_string(start) +
                         " data bytes, the file holds " + std::to_string(data_size) + ")",
               "MetadataIncompleteBuffer");
    header.data_size = start;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(std::string_view header_json, std::uint64_t data_size,
                                           const std::string& file) {
    if (auto bad = find_invalid_utf8(header_json))
        reject(file, "the header is not valid UTF-8 (byte " + std::to_string(*bad) + " of the header)",
               "InvalidHeader");

    json::parse_options options;
    options.max_depth = 8;  // the deepest valid header is 3 levels
    json::basic_parser<HeaderHandler> parser(options);
    json::error_code ec;
    std::size_t consumed = parser.write_some(false, header_json.data(), header_json.size(), ec);
    if (!ec && !parser.done()) ec = json::error::incomplete;
    // write_some stops after one complete value; only whitespace (padding) may follow it.
    if (!ec && header_json.substr(consumed).find_first_not_of(" \t\r\n") != std::string_view::npos)
        reject(file, "the header has data after its JSON object (at byte " + std::to_string(consumed) + ")",
               "InvalidHeaderDeserialization");
    if (ec) {
        if (auto& problem = parser.handler().problem)
            reject(file, problem->message, problem->code, problem->tensor);
        reject(file, "the header is not valid JSON: " + ec.message() + " (at byte " + std::to_string(consumed) +
                         " of " + std::to_string(header_json.size()) + ")",
               "InvalidHeaderDeserialization");
    }
    SafetensorsHeader header = std::move(parser.handler().result);
    reject_duplicate_names(header.tensors, file);
    validate_layout(header, data_size, file);
    return header;
}

}  // namespace moequant
