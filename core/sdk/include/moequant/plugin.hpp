// Writing a moequant plugin: the entry point, its descriptor and the registrar.
//
// A plugin is a shared-library module (built with moequant_add_plugin() from the installed
// CMake package) containing exactly one MOEQUANT_PLUGIN block:
//
//     #include <moequant/plugin.hpp>
//     MOEQUANT_PLUGIN("my_quant", "1.0.0", MOEQUANT_KIND_QUANTIZER, "what it does") {
//         registrar.add(std::make_unique<MyQuantizer>());
//     }
//
// The macro exports one C symbol, `moequant_plugin_v1`, in the ELF section "moequant" (through
// Boost.DLL's alias), pointing at a function that returns a moequant_plugin_descriptor. The
// host finds the symbol without running any plugin code, loads the module, and checks the
// descriptor (ABI integer, SDK version, toolchain fingerprint) before it calls anything else
// in the plugin. A plugin that fails a check is skipped with a one-line reason
// (`moequant plugins --all`). Plugins are never unloaded.
//
// Rules for plugin code: no work in static initialisers (they run at load time, before any
// check); vector code only in functions called after a run-time CPU check; parallel work
// through moequant::parallel_for; only moequant::Error (or std exceptions) may leave the
// plugin's objects.
#pragma once

#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/output_format.hpp>
#include <moequant/quantizer.hpp>
#include <moequant/source_encoding.hpp>
#include <moequant/version.hpp>

#include <boost/dll/alias.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

// The binary contract between host and plugins. Bump it with EVERY change to a public
// interface (a virtual function, a struct crossing the boundary, the descriptor), keep one
// changelog line per bump here, and rebuild all first-party plugins with the host. Since 8 the
// SDK's minor version is the ABI (CMakeLists.txt refuses a mismatch), and the unit test
// abi_digest fails when the plugin-facing headers no longer match MOEQUANT_PLUGIN_ABI_DIGEST:
// a change to a declaration cannot land without a bump.
//   1 (0.1.0): first drafts of ModelAdapter, Quantizer, OutputFormat; descriptor generation v1.
//   2 (0.1.0): ModelAdapter gains model_types() and synthesize(); ModelPlan gains model_type,
//              layer counts, layout and warnings; ExpertWeightSource gains dtype and matrix shape.
//   3 (0.1.0): Tensor::uninitialized().
//   4 (0.1.0): Quantizer::output_layout(); OutputFormat writes layers through LayerSink
//              (thread-safe, committed per layer), adopts completed layers, finish() returns files;
//              SafetensorsFile / Checkpoint::release_pages(); ShardedSafetensorsWriter::open_shard
//              takes per-shard metadata.
//   5 (0.1.0): Quantizer::error_bounds() and packed_gemv(); OutputFormat::open() returns an
//              OutputReader (stored parts and recorded facts of a converted output), for verify;
//              OutputFile::Durability.
//   6 (0.1.0): Quantizer::configure(), settings(), uses_calibration(), prepare_calibration()
//              and quantize_calibrated() with PreparedCalibration (the GPU path's GPTQ),
//              stored_problem(); OutputFormat::check().
//   7 (0.1.0): ModelPlan gains the router (RouterSpec, router.hpp) and MoeLayerPlan its router
//              tensors; CalibrationActivations gains routed_only(); OutputContext gains
//              unquantized_layers (OutputFormat::check() refuses them by default);
//              expert_module_name(); Tokenizer (tokenizer.hpp); ModelAdapter::chat_template()
//              (chat_template.hpp); calibration_dataset.hpp; expert_placement.hpp; layer_ops.hpp.
//   8 (0.8.0): ModelAdapter::decoder_forward() (decoder_forward.hpp; added under 7 without a
//              bump); OutputFile gains the identity of its partial (layout change), partial names
//              carry ".moequant.partial" (partial_marker, is_partial_name()); output_location.hpp,
//              output_lock.hpp, output_overwrite.hpp; RunManifest records source shards
//              (ManifestShard); ConversionJob::input_files; Quantizer::saturated_rows() (rows
//              whose codes saturate; convert and verify warn about them); printable.hpp
//              (printable_name(), printable_text()); saturated_rows.hpp; input_file.hpp (InputFile,
//              require_regular_file, read_small_file and the input size limits); checked_math.hpp
//              (checked_mul, checked_add); fault_handler.hpp (install_mapped_file_fault_handler());
//              copy_file_atomically() refuses sources that are not regular files or exceed
//              tokenizer_file_limit; rope/yarn_inverse_frequencies() refuse a rotary dimension
//              outside 0..65536; set_max_threads() caps at the core count.
//   9 (0.9.0): the SDK is its own library, libmoequant_sdk (moequant::sdk, was moequant::core), and
//              only its headers are the ABI: registry, conversion, verification, comparison,
//              run manifest, progress, calibration, tokenizer, placement, saturated-rows report
//              and output location/lock/overwrite headers moved to the host's engine
//              (<moequant/engine/...>, not installed); embedded_text.hpp (embedded_calibration_text(),
//              was in calibration_dataset.hpp), file_identity.hpp (names_same_file()) and utf8.hpp
//              (utf8_sequence(), find_invalid_utf8()) are public; expert_projections and
//              ModelPlan::moe_layer().
//  10 (0.10.0): narrower interfaces. Quantizer: facts() (QuantizerFacts: kt method and file
//              prefix, scheme, verify reference) replaces recognition by id; unusable_reason()
//              removed; quantize(weight) loses its ignored Options; the calibration hooks move
//              to the optional facet QuantizerCalibration (calibration(); prepare_calibration(),
//              quantize_calibrated() without Options; uses_calibration() removed).
//              ModelAdapter::plan(config, checkpoint) loses its ignored Options. QuantizedTensor
//              gains `unquantized` (kept BF16 matrices), replacing the "BF16" method sentinel.
//              TensorSpec moves from safetensors_writer.hpp to tensor.hpp; quantizer.hpp no longer
//              includes the writer.
//  11 (0.11.0): source encodings, the fourth plugin kind (source_encoding.hpp: SourceEncoding,
//              EncodedWeight, DecodeWindow, DecodeTarget; MOEQUANT_KIND_ENCODING;
//              PluginRegistrar::add(unique_ptr<SourceEncoding>)); Checkpoint::use_encodings(),
//              weight(), find_weight(), weight_holding(); ExpertWeightSource loses dtype and
//              scale_tensor (the weight's encoding knows them), FusedSlice gains step;
//              ModelPlan::fp8_block removed; load_expert_matrix() takes a DecodeTarget,
//              decode_weight() and decode_matrix(); layer_input_bytes() takes the checkpoint;
//              load_f32() loses its block size.
//  12 (0.12.0): PyTorch .bin checkpoints: SafetensorsFile::open_pytorch() and
//              pytorch_from_bytes() (a zip checkpoint read with the restricted unpickler; its
//              offsets are relative to the file start, so data_start() is no longer inline).
//  13 (0.13.0): DecoderForward::logits() (final norm + lm_head, tied embeddings), for eval;
//              its default refuses with NoForward, so older adapters still build.
//  14 (0.14.0): OutputContext::calibration (what a calibrated quantizer learned from, for
//              formats to record; convert --calibrate's amx-int4-gptq / amx-int8-gptq).
//  15 (0.15.0): OutputFormat::planned_files() (every file a job writes, sized without writing:
//              --dry-run and the free-disk check), PlannedFile (output_file.hpp),
//              safetensors_file_size() and ShardedSafetensorsPlan.
//  16 (0.16.0): compute_dtype.hpp (ComputeDtype, set_compute_dtype(), cpu_has_bf16_products(),
//              bf16_products_available(), bf16_product_isa(), bf16_product()): layer_ops'
//              products in BF16 through oneDNN when the host asks for it (--compute-dtype), the
//              routers' logits kept FP32; the SDK links libdnnl.
//  17 (0.17.0): remove_on_fault() / forget_on_fault() and install_termination_cleanup()
//              (fault_handler.hpp): paths the mapped-input fault handler and the SIGTERM, SIGINT
//              and SIGHUP handlers remove before the process ends (the output lock, partial files
//              and folders, scratch folders); OutputFile gains its slot (layout change).
#define MOEQUANT_PLUGIN_ABI_VERSION 17
// Digest of the normalized plugin-facing headers at this ABI (tests/unit/abi_digest_test.cpp).
#define MOEQUANT_PLUGIN_ABI_DIGEST "6f63711d8093895b"

// Kinds of objects a plugin registers (a bit set in the descriptor).
#define MOEQUANT_KIND_ADAPTER 1u
#define MOEQUANT_KIND_QUANTIZER 2u
#define MOEQUANT_KIND_FORMAT 4u
#define MOEQUANT_KIND_ENCODING 8u

#define MOEQUANT_DETAIL_STR2(x) #x
#define MOEQUANT_DETAIL_STR(x) MOEQUANT_DETAIL_STR2(x)

// Compiler family and major version: C++ interfaces cross the boundary, so host and plugins
// must come from the same compiler and standard library ABI.
#if defined(__clang__)
#define MOEQUANT_DETAIL_COMPILER "clang-" MOEQUANT_DETAIL_STR(__clang_major__)
#elif defined(__GNUC__)
#define MOEQUANT_DETAIL_COMPILER "gcc-" MOEQUANT_DETAIL_STR(__GNUC__)
#else
#define MOEQUANT_DETAIL_COMPILER "unknown-compiler"
#endif
#if defined(_LIBCPP_VERSION)
#define MOEQUANT_DETAIL_STDLIB "libc++"
#elif defined(__GLIBCXX__)
#define MOEQUANT_DETAIL_STDLIB "libstdc++-cxx11abi" MOEQUANT_DETAIL_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define MOEQUANT_DETAIL_STDLIB "unknown-stdlib"
#endif
#if defined(_GLIBCXX_DEBUG)
#define MOEQUANT_DETAIL_STDLIB_MODE "-debug"
#else
#define MOEQUANT_DETAIL_STDLIB_MODE ""
#endif
#if defined(__x86_64__)
#define MOEQUANT_DETAIL_ARCH "x86_64"
#elif defined(__aarch64__)
#define MOEQUANT_DETAIL_ARCH "aarch64"
#else
#define MOEQUANT_DETAIL_ARCH "unknown-arch"
#endif

// The same macros compiled into host and plugin; the host compares the two strings.
#define MOEQUANT_TOOLCHAIN_FINGERPRINT \
    MOEQUANT_DETAIL_COMPILER "/" MOEQUANT_DETAIL_STDLIB MOEQUANT_DETAIL_STDLIB_MODE "/" MOEQUANT_DETAIL_ARCH

extern "C" {

// What a plugin tells the host about itself. Plain C layout; fields are only ever appended
// (struct_size tells the host which ones the plugin knows).
struct moequant_plugin_descriptor {
    std::uint32_t struct_size;    // sizeof(moequant_plugin_descriptor) when the plugin was built
    std::uint32_t abi_version;    // MOEQUANT_PLUGIN_ABI_VERSION seen by the plugin
    std::uint32_t sdk_version;    // MOEQUANT_SDK_VERSION (MMmmpp) seen by the plugin
    const char* toolchain;        // MOEQUANT_TOOLCHAIN_FINGERPRINT seen by the plugin
    const char* id;               // plugin id, [a-z0-9_]+ (the module's folder name)
    const char* version;          // the plugin's own version
    const char* description;      // one line
    std::uint32_t kinds;          // MOEQUANT_KIND_* bits of the objects it registers
    // Optional: > 0 when usable on this machine; 0 = unusable, with the reason written to
    // `reason` (NUL-terminated, at most reason_size bytes). Must not throw.
    int (*probe)(char* reason, std::size_t reason_size);
    // Adds the plugin's objects to `registrar` (a moequant::PluginRegistrar*). Returns 0, or
    // non-zero with a message in `error`. Must not throw.
    int (*register_objects)(void* registrar, char* error, std::size_t error_size);
};

}  // extern "C"

namespace moequant {

// Handed to a plugin's registration body; the host checks ids, kinds and duplicates.
class MOEQUANT_API PluginRegistrar {
public:
    virtual void add(std::unique_ptr<ModelAdapter> adapter) = 0;
    virtual void add(std::unique_ptr<Quantizer> quantizer) = 0;
    virtual void add(std::unique_ptr<OutputFormat> format) = 0;
    virtual void add(std::unique_ptr<SourceEncoding> encoding) = 0;

protected:
    ~PluginRegistrar() = default;
};

namespace plugin_detail {

// Copies a message into a C buffer, always NUL-terminated.
inline void copy_message(const char* message, char* out, std::size_t size) noexcept {
    if (!out || size == 0) return;
    std::size_t n = std::strlen(message);
    if (n >= size) n = size - 1;
    std::memcpy(out, message, n);
    out[n] = '\0';
}

// Runs a registration body; no exception leaves the plugin through the C entry.
inline int run_registration(void (*body)(PluginRegistrar&), void* registrar, char* error,
                            std::size_t error_size) noexcept {
    try {
        body(*static_cast<PluginRegistrar*>(registrar));
        return 0;
    } catch (const std::exception& e) {
        copy_message(e.what(), error, error_size);
    } catch (...) {
        copy_message("unknown exception", error, error_size);
    }
    return 1;
}

// Runs a probe written as `int probe(std::string& reason)`.
inline int run_probe(int (*probe)(std::string&), char* reason, std::size_t reason_size) noexcept {
    try {
        std::string why;
        int score = probe(why);
        if (score <= 0) copy_message(why.empty() ? "unusable" : why.c_str(), reason, reason_size);
        return score > 0 ? score : 0;
    } catch (const std::exception& e) {
        copy_message(e.what(), reason, reason_size);
    } catch (...) {
        copy_message("probe threw an unknown exception", reason, reason_size);
    }
    return 0;
}

}  // namespace plugin_detail
}  // namespace moequant

// Declares the plugin with a CPU/machine probe: PROBE is `int probe(std::string& reason)`
// returning > 0 when usable (higher = better) and 0 with a reason otherwise.
#define MOEQUANT_PLUGIN_WITH_PROBE(ID, VERSION, KINDS, DESCRIPTION, PROBE)                      \
    static void moequant_plugin_register_body(::moequant::PluginRegistrar& registrar);        \
    namespace moequant_plugin_entry_detail {                                                   \
    static int register_objects(void* r, char* error, std::size_t error_size) noexcept {      \
        return ::moequant::plugin_detail::run_registration(&moequant_plugin_register_body, r,  \
                                                           error, error_size);               \
    }                                                                                         \
    static constexpr int (*probe_function)(std::string&) = PROBE;                                   \
    static int probe(char* reason, std::size_t reason_size) noexcept {                        \
        return ::moequant::plugin_detail::run_probe(probe_function, reason, reason_size);     \
    }                                                                                         \
    static const ::moequant_plugin_descriptor descriptor = {                                  \
        sizeof(::moequant_plugin_descriptor), MOEQUANT_PLUGIN_ABI_VERSION,                    \
        MOEQUANT_SDK_VERSION, MOEQUANT_TOOLCHAIN_FINGERPRINT, ID, VERSION, DESCRIPTION, KINDS, \
        probe_function ? &probe : nullptr, &register_objects};                                 \
    static const ::moequant_plugin_descriptor* entry() noexcept { return &descriptor; }      \
    }                                                                                         \
    BOOST_DLL_ALIAS_SECTIONED(moequant_plugin_entry_detail::entry, moequant_plugin_v1, moequant) \
    static void moequant_plugin_register_body([[maybe_unused]] ::moequant::PluginRegistrar& registrar)

// Declares the plugin; the block that follows registers its objects through `registrar`.
#define MOEQUANT_PLUGIN(ID, VERSION, KINDS, DESCRIPTION) \
    MOEQUANT_PLUGIN_WITH_PROBE(ID, VERSION, KINDS, DESCRIPTION, nullptr)
