// The binary contract between host and plugins: the ABI number, the digest of the headers it
// stands for, the toolchain fingerprint and the C descriptor a plugin exports.
//
// The ABI number is the SDK's minor version (project(moequant VERSION 0.N.0) in CMakeLists.txt
// is the one place it is set). Bump it with EVERY change to a plugin-facing header (a virtual
// function, a struct crossing the boundary, the descriptor), record the new digest below (the
// unit test abi_digest prints it and fails until it matches), add one line here and the full
// entry to docs/plugins.md's ABI changelog, and rebuild all first-party plugins with the host.
//   1-7 (0.1): interfaces drafted; 8: decoder forward, partial files, input limits;
//   9: the SDK is its own library; 10: QuantizerFacts, calibration facet; 11: source encodings;
//   12: PyTorch .bin; 13: DecoderForward::logits(); 14: OutputContext::calibration;
//   15: OutputFormat::planned_files(); 16: compute_dtype.hpp; 17: fault and termination cleanup;
//   18: open quantizer facts, runtime checks of formats, optional synthesize(), splitmix64.hpp,
//       plugin_abi.hpp; 19: Quantizer::for_matrix() (MatrixRole), projection.hpp;
//   20: gated_activation.hpp, ModelPlan::expert_activation, activations in layer_ops,
//       ModelAdapter::synth_releases() (SynthRelease); 21: Quantizer::carrier() (StoredCodeCarrier);
//   22: OutputFormat::quantizer_options(); 23: importance.hpp (ExpertImportance),
//       Quantizer::importance() (QuantizerImportance), OutputFormat::expert_importance();
//   24: OutputWriter::folds_layer_files(), PlannedFile::staged;
//   25: stored codes carried per matrix (quantizer_for(role).carrier());
//   26: freed_heap.hpp (return_freed_heap()), Quantizer::takes_float32_source();
//   27: checkpoint_reader.hpp (CheckpointReader, MOEQUANT_KIND_READER), Checkpoint::from_description(),
//       container(), side_file(), SafetensorsFile::open_described();
//   28: blas_kernels.hpp (blas_kernels(), blas_kernels_chosen_by()): BLIS's kernels chosen by ISA;
//       matrix_products.hpp (f32_gemm, bf16_gemm, f32_gemm_kernels): strided oneDNN products;
//   29: layer_ops.hpp ExpertWeights (Tensors) for add_routed_experts() and swiglu_mlp().
//   30: layer_ops.hpp linear_into() (a product into caller memory); Tensor blocks of 16 MiB or
//       more in huge pages of their own.
//   31: vector_exp.hpp exp_values(): std::exp's bits over many floats, vectorized.
#pragma once

#include <moequant/version.hpp>

#include <cstddef>
#include <cstdint>

#define MOEQUANT_PLUGIN_ABI_VERSION MOEQUANT_VERSION_MINOR
// Digest of the normalized plugin-facing headers at this ABI (tests/unit/abi_digest_test.cpp).
#define MOEQUANT_PLUGIN_ABI_DIGEST "a1c50f8d54619b79"

// Kinds of objects a plugin registers (a bit set in the descriptor).
#define MOEQUANT_KIND_ADAPTER 1u
#define MOEQUANT_KIND_QUANTIZER 2u
#define MOEQUANT_KIND_FORMAT 4u
#define MOEQUANT_KIND_ENCODING 8u
#define MOEQUANT_KIND_READER 16u

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
