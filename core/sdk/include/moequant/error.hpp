// moequant::Error: the one exception type that crosses the plugin boundary.
//
// An Error carries what went wrong plus where (file, tensor, layer, plugin) and an optional
// hint, and a kind that maps to the documented process exit code. what() is a single line
// such as:
//   model-00002-of-00004.safetensors: tensor 'w': data_offsets [0,4] hold 4 bytes but
//   F32 [2,2] needs 16 (TensorInvalidInfo)
#pragma once

#include <moequant/export.hpp>

#include <optional>
#include <stdexcept>
#include <string>

namespace moequant {

// Error classes and their process exit codes (docs/cli.md, "Exit codes").
enum class ErrorKind : int {
    internal = 1,      // a bug or an unexpected condition
    usage = 2,         // bad command line
    input = 3,         // bad input data: checkpoint, safetensors file, config.json
    plugin = 4,        // plugin missing, incompatible or failing
    io = 5,            // cannot write output: permissions, disk full, file size limit
    verification = 6,  // an output failed verification
};

// Process exit code for an error kind (the enum value).
constexpr int exit_code(ErrorKind kind) noexcept { return static_cast<int>(kind); }

// Where an error happened. Every field is optional; empty strings are left out of the message.
struct ErrorContext {
    std::string file;    // the file involved (a shard, config.json, a plugin module)
    std::string tensor;  // tensor name
    std::optional<long long> layer;  // decoder layer index
    std::string plugin;  // plugin id
    std::string code;    // stable machine-readable reason, e.g. "InvalidOffset"
    std::string hint;    // what the user can do about it
};

class MOEQUANT_API Error : public std::runtime_error {
public:
    Error(ErrorKind kind, const std::string& message, ErrorContext context = {});

    ErrorKind kind() const noexcept { return kind_; }
    const std::string& message() const noexcept { return message_; }
    const ErrorContext& context() const noexcept { return context_; }
    // The stable reason code (context().code), e.g. "HeaderTooLarge"; may be empty.
    const std::string& code() const noexcept { return context_.code; }

    // A copy with missing context fields filled from `outer` (inner fields win). Used when an
    // error travels up through a layer that knows more (e.g. the shard a tensor came from).
    Error with_context(const ErrorContext& outer) const;

private:
    ErrorKind kind_;
    std::string message_;
    ErrorContext context_;
};

// Short helpers for the common kinds.
[[noreturn]] MOEQUANT_API void throw_input_error(const std::string& message, ErrorContext context = {});
[[noreturn]] MOEQUANT_API void throw_io_error(const std::string& message, ErrorContext context = {});
[[noreturn]] MOEQUANT_API void throw_usage_error(const std::string& message, ErrorContext context = {});

}  // namespace moequant
