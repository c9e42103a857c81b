#include <moequant/error.hpp>
#include <moequant/input_file.hpp>
#include <moequant/model_config.hpp>

#include <boost/json.hpp>

#include <cmath>

namespace moequant {

namespace json = boost::json;

struct ConfigValue::Document {
    std::string source;
    std::string raw;
    json::value root;
};

namespace {

const json::value& as_json(const void* p) { return *static_cast<const json::value*>(p); }

const char* kind_name(const json::value& v) {
    switch (v.kind()) {
        case json::kind::null: return "null";
        case json::kind::bool_: return "a boolean";
        case json::kind::int64:
        case json::kind::uint64: return "an integer";
        case json::kind::double_: return "a number";
        case json::kind::string: return "a string";
        case json::kind::array: return "an array";
        case json::kind::object: return "an object";
    }
    return "a value";
}

}  // namespace

ConfigValue::ConfigValue(std::shared_ptr<const Document> doc, const void* value, std::string path)
    : doc_(std::move(doc)), value_(value), path_(std::move(path)) {}

void ConfigValue::type_error(const char* expected) const {
    throw Error(ErrorKind::input,
                "'" + path_ + "' must be " + expected + ", but it is " + kind_name(as_json(value_)) + " (" +
                    to_json() + ")",
                {.file = doc_->source, .code = "InvalidConfig"});
}

bool ConfigValue::is_null() const noexcept { return as_json(value_).is_null(); }
bool ConfigValue::is_bool() const noexcept { return as_json(value_).is_bool(); }
bool ConfigValue::is_number() const noexcept { return as_json(value_).is_number(); }
bool ConfigValue::is_string() const noexcept { return as_json(value_).is_string(); }
bool ConfigValue::is_array() const noexcept { return as_json(value_).is_array(); }
bool ConfigValue::is_object() const noexcept { return as_json(value_).is_object(); }

std::int64_t ConfigValue::as_int() const {
    const auto& v = as_json(value_);
    if (v.is_int64()) return v.get_int64();
    if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
        return static_cast<std::int64_t>(v.get_uint64());
    if (v.is_double()) {
        double d = v.get_double();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) return static_cast<std::int64_t>(d);
    }
    type_error("an integer");
}

double ConfigValue::as_double() const {
    const auto& v = as_json(value_);
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    type_error("a number");
}

bool ConfigValue::as_bool() const {
    const auto& v = as_json(value_);
    if (!v.is_bool()) type_error("a boolean");
    return v.get_bool();
}

std::string ConfigValue::as_string() const {
    const auto& v = as_json(value_);
    if (!v.is_string()) type_error("a string");
    return std::string(v.get_string());
}

std::vector<std::int64_t> ConfigValue::as_int_array() const {
    if (!is_array()) type_error("an array of integers");
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < size(); ++i) out.push_back(at(i).as_int());
    return out;
}

std::optional<ConfigValue> ConfigValue::get(std::string_view key) const {
    const auto& v = as_json(value_);
    if (!v.is_object()) return std::nullopt;
    const json::value* member = v.get_object().if_contains(key);
    if (!member) return std::nullopt;
    return ConfigValue(doc_, member, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

std::vector<std::string> ConfigValue::keys() const {
    std::vector<std::string> out;
    const auto& v = as_json(value_);
    if (v.is_object())
        for (const auto& kv : v.get_object()) out.emplace_back(kv.key());
    return out;
}

std::size_t ConfigValue::size() const noexcept {
    const auto& v = as_json(value_);
    return v.is_array() ? v.get_array().size() : 0;
}

ConfigValue ConfigValue::at(std::size_t index) const {
    const auto& v = as_json(value_);
    if (!v.is_array() || index >= v.get_array().size()) type_error(("an array with an element " + std::to_string(index)).c_str());
    return ConfigValue(doc_, &v.get_array()[index], path_ + "[" + std::to_string(index) + "]");
}

std::string ConfigValue::to_json() const { return json::serialize(as_json(value_)); }

ModelConfig ModelConfig::load(const std::filesystem::path& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec))
        throw Error(ErrorKind::input, "cannot read the model config", {.file = file.string(), .code = "MissingConfig"});
    return parse(read_small_file(file, json_file_limit), file.string());
}

ModelConfig ModelConfig::parse(std::string_view json_text, const std::string& source) {
    auto doc = std::make_shared<ConfigValue::Document>();
    doc->source = source;
    doc->raw = std::string(json_text);
    json::error_code ec;
    json::parse_options options;
    options.allow_invalid_utf8 = false;
    doc->root = json::parse(doc->raw, ec, {}, options);
    if (ec) throw Error(ErrorKind::input, "not valid JSON: " + ec.message(), {.file = source, .code = "InvalidConfig"});
    if (!doc->root.is_object())
        throw Error(ErrorKind::input, "the top level is not a JSON object", {.file = source, .code = "InvalidConfig"});
    ModelConfig config;
    config.doc_ = std::move(doc);
    return config;
}

ConfigValue ModelConfig::root() const { return ConfigValue(doc_, &doc_->root, ""); }

bool ModelConfig::has_text_config() const {
    auto t = root().get("text_config");
    return t && t->is_object();
}

ConfigValue ModelConfig::text() const {
    if (auto t = root().get("text_config"); t && t->is_object()) return *t;
    return root();
}

std::optional<ConfigValue> ModelConfig::find(std::string_view dotted_path) const {
    auto walk = [&](ConfigValue v) -> std::optional<ConfigValue> {
        std::string_view rest = dotted_path;
        while (!rest.empty()) {
            auto dot = rest.find('.');
            auto next = v.get(rest.substr(0, dot));
            if (!next) return std::nullopt;
            v = *next;
            rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
        }
        return v;
    };
    if (has_text_config())
        if (auto found = walk(text())) return found;
    return walk(root());
}

ConfigValue ModelConfig::require(std::string_view dotted_path) const {
    if (auto v = find(dotted_path)) return *v;
    throw Error(ErrorKind::input, "missing required key '" + std::string(dotted_path) + "'",
                {.file = doc_->source, .code = "InvalidConfig"});
}

std::int64_t ModelConfig::int_or(std::string_view dotted_path, std::int64_t fallback) const {
    auto v = find(dotted_path);
    return v && !v->is_null() ? v->as_int() : fallback;
}

std::string ModelConfig::string_or(std::string_view dotted_path, const std::string& fallback) const {
    auto v = find(dotted_path);
    return v && !v->is_null() ? v->as_string() : fallback;
}

std::string ModelConfig::model_type() const { return string_or("model_type", ""); }

std::vector<std::string> ModelConfig::architectures() const {
    std::vector<std::string> out;
    if (auto v = find("architectures"); v && v->is_array())
        for (std::size_t i = 0; i < v->size(); ++i) out.push_back(v->at(i).as_string());
    return out;
}

const std::string& ModelConfig::source() const noexcept { return doc_->source; }
const std::string& ModelConfig::raw_json() const noexcept { return doc_->raw; }

}  // namespace moequant
