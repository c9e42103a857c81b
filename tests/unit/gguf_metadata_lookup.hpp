// Looking keys up in GGUF metadata made in memory (the vocab suites), inside Boost.Test cases.
#pragma once

#include "gguf_container.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace moequant::test {

inline const formats::GgufValue* find(const std::vector<formats::GgufKeyValue>& kvs, std::string_view key) {
    for (const auto& kv : kvs)
        if (kv.key == key) return &kv.value;
    return nullptr;
}

inline std::vector<std::string> keys_of(const std::vector<formats::GgufKeyValue>& kvs) {
    std::vector<std::string> keys;
    for (const auto& kv : kvs) keys.push_back(kv.key);
    return keys;
}

// A string array key the metadata must have.
inline std::vector<std::string> strings_at(const std::vector<formats::GgufKeyValue>& kvs, std::string_view key) {
    const formats::GgufValue* v = find(kvs, key);
    BOOST_TEST_REQUIRE(v != nullptr, key);
    return v->as_strings().value();
}

// tokenizer.ggml.token_type as the i32s it was written from.
inline std::vector<std::int32_t> types_of(const std::vector<formats::GgufKeyValue>& kvs) {
    const formats::GgufValue* v = find(kvs, "tokenizer.ggml.token_type");
    BOOST_TEST_REQUIRE(v != nullptr);
    BOOST_TEST_REQUIRE((v->type == formats::GgufType::array && v->element == formats::GgufType::i32));
    std::vector<std::int32_t> types(v->count);
    BOOST_TEST_REQUIRE(v->bytes.size() == types.size() * sizeof(std::int32_t));
    std::memcpy(types.data(), v->bytes.data(), v->bytes.size());
    return types;
}

}  // namespace moequant::test
