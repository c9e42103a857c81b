// Looking keys up in GGUF metadata made in memory (the vocab suites).
#pragma once

#include "gguf_container.hpp"

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

}  // namespace moequant::test
