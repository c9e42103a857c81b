// The safetensors reader against third-party files written by the reference implementation,
// every malformed-header case of model-families.md §3.5, and the stricter checks we add.

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>

#include "tensor_bytes.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <cstring>

using namespace moequant;
using namespace moequant::test;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Opens `bytes` both from a file and from memory; both must fail with the same code, and the
// file route's message must name the file. Returns the error of the file route.
Error expect_rejected(const Bytes& bytes, const std::string& code) {
    TempDir dir;
    auto file = dir / "case.safetensors";
    write_bytes(file, bytes);
    std::optional<Error> from_file;
    try {
        SafetensorsFile::open(file);
    } catch (const Error& e) {
        from_file = e;
    }
    BOOST_REQUIRE_MESSAGE(from_file.has_value(), "expected " << code << ", but the file was accepted");
    BOOST_TEST(from_file->code() == code, "got " << from_file->what());
    BOOST_TEST((from_file->kind() == ErrorKind::input));
    BOOST_TEST(std::string(from_file->what()).find(file.string()) != std::string::npos);
    BOOST_TEST(std::string(from_file->what()).find('\n') == std::string::npos);
    try {
        SafetensorsFile::from_bytes(std::as_bytes(std::span<const std::uint8_t>(bytes)), "memory");
        BOOST_ERROR("from_bytes accepted a file that open() rejected");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == code);
    }
    return *from_file;
}

SafetensorsFile open_bytes(const TempDir& dir, const Bytes& bytes, const std::string& name = "ok.safetensors") {
    auto file = dir / name;
    write_bytes(file, bytes);
    return SafetensorsFile::open(file);
}

// 16 zero bytes behind a one-tensor F32 [2,2] header.
const std::string one_tensor_header = R"({"weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";

// Tensor `name` of `f` has `dtype` and holds `codes`, which `decode` turns into `values`.
template <class Code>
void expect_decoded(const SafetensorsFile& f, const std::string& name, DType dtype, const std::array<Code, 3>& codes,
                    const std::array<float, 3>& values, float (*decode)(Code) noexcept) {
    const TensorView view = f.view(name);
    BOOST_TEST((view.dtype == dtype));
    for (std::size_t i = 0; i < codes.size(); ++i) {
        BOOST_TEST(element<Code>(view, i) == codes[i]);
        BOOST_TEST(decode(codes[i]) == values[i]);
    }
}

// The header facts the jl test data's SOURCE.md gives for a file.
void check_header_facts(const SafetensorsFile& f, std::uint64_t file_size, std::uint64_t header_length, std::size_t tensors,
                        std::uint64_t data_size) {
    BOOST_TEST(f.file_size() == file_size);
    BOOST_TEST(f.header_length() == header_length);
    BOOST_TEST(f.tensors().size() == tensors);
    BOOST_TEST(f.header().data_size == data_size);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_reader)

// ---- third-party files written by the reference library (shared/fixtures/third_party) ----

BOOST_AUTO_TEST_CASE(safetensors_cpp_model_loads_with_the_listed_layout) {
    auto f = SafetensorsFile::open(fixtures_dir() / "safetensors_cpp_testdata/gen/model.safetensors");
    BOOST_TEST(f.file_size() == 2704u);
    BOOST_TEST(f.header_length() == 136u);
    BOOST_TEST(!f.header().has_metadata);
    BOOST_TEST_REQUIRE(f.tensors().size() == 2u);
    const auto& w1 = f.info("weight1");
    BOOST_TEST((w1.dtype == DType::F64));
    BOOST_TEST((w1.shape == Shape{8, 8}));
    BOOST_TEST(w1.begin == 0u);
    BOOST_TEST(w1.end == 512u);
    const auto& w2 = f.info("weight2");
    BOOST_TEST((w2.shape == Shape{16, 16}));
    BOOST_TEST(w2.begin == 512u);
    BOOST_TEST(w2.end == 2560u);
    // np.random.rand: every value in [0, 1).
    for (const char* name : {"weight1", "weight2"}) {
        TensorView v = f.view(name);
        for (std::size_t i = 0; i < v.elements(); ++i) {
            double x = element<double>(v, i);
            BOOST_REQUIRE(x >= 0.0);
            BOOST_REQUIRE(x < 1.0);
        }
    }
}

BOOST_AUTO_TEST_CASE(safetensors_cpp_abuse_file_is_rejected_before_parsing) {
    auto path = fixtures_dir() / "safetensors_cpp_testdata/test/safetensors_abuse_attempt_1.safetensors";
    try {
        SafetensorsFile::open(path);
        BOOST_FAIL("the abuse file was accepted");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "InvalidHeaderLength");
        std::string what = e.what();
        BOOST_TEST(what.find("safetensors_abuse_attempt_1.safetensors") != std::string::npos);
        BOOST_TEST(what.find("1000") != std::string::npos);
        BOOST_TEST(what.find("88") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(jl_numpy_file_matches_source_md) {
    auto f = SafetensorsFile::open(fixtures_dir() / "safetensors_jl_testdata/non_sharded/model.numpy.safetensors");
    check_header_facts(f, 5661, 1840, 27, 3813);
    BOOST_TEST(!f.header().has_metadata);
    // Values are arange over the shape; BOOL is arange mod 2.
    TensorView i64 = f.view("int64_357");
    BOOST_TEST((i64.shape == Shape{3, 5, 7}));
    for (std::size_t i = 0; i < 105; ++i) BOOST_REQUIRE(element<std::int64_t>(i64, i) == static_cast<std::int64_t>(i));
    TensorView f32 = f.view("float32_35");
    for (std::size_t i = 0; i < 15; ++i) BOOST_REQUIRE(element<float>(f32, i) == static_cast<float>(i));
    TensorView u8 = f.view("uint8_357");
    for (std::size_t i = 0; i < 105; ++i) BOOST_REQUIRE(element<std::uint8_t>(u8, i) == i);
    TensorView b = f.view("bool_357");
    BOOST_TEST((b.dtype == DType::BOOL));
    for (std::size_t i = 0; i < 105; ++i) BOOST_REQUIRE(element<std::uint8_t>(b, i) == i % 2);
    TensorView f16 = f.view("float16_3");
    BOOST_TEST((f16.dtype == DType::F16));
    for (std::size_t i = 0; i < 3; ++i) BOOST_REQUIRE(f16_to_f32(element<std::uint16_t>(f16, i)) == static_cast<float>(i));
}

BOOST_AUTO_TEST_CASE(jl_torch_file_decodes_fp8_and_bf16_values_of_source_md) {
    auto f = SafetensorsFile::open(fixtures_dir() / "safetensors_jl_testdata/non_sharded/model.safetensors");
    check_header_facts(f, 6841, 2528, 36, 4305);

    expect_decoded<std::uint8_t>(f, "float8_e4m3fn_3", DType::F8_E4M3, {0xae, 0xa9, 0xb8}, {-0.4375f, -0.28125f, -1.0f},
                                 f8_e4m3_to_f32);
    expect_decoded<std::uint8_t>(f, "float8_e5m2_3", DType::F8_E5M2, {0xba, 0xb2, 0xba}, {-0.75f, -0.1875f, -0.75f},
                                 f8_e5m2_to_f32);
    expect_decoded<std::uint16_t>(f, "bfloat16_3", DType::BF16, {0xbf53, 0xbebf, 0x3f58},
                                  {-0.82421875f, -0.373046875f, 0.84375f}, bf16_to_f32);
}

BOOST_AUTO_TEST_CASE(jl_metadata_file_exposes_metadata_in_file_order) {
    auto f = SafetensorsFile::open(fixtures_dir() / "safetensors_jl_testdata/non_sharded/model.with_metadata.safetensors");
    BOOST_TEST(f.file_size() == 6889u);
    BOOST_TEST(f.header_length() == 2576u);
    BOOST_TEST(f.header().has_metadata);
    BOOST_TEST_REQUIRE(f.header().metadata.size() == 2u);
    BOOST_TEST(f.header().metadata[0].first == "test");
    BOOST_TEST(f.metadata("test").value() == "metadata");
    BOOST_TEST(f.metadata("version").value() == "2.2");
    BOOST_TEST(!f.metadata("format").has_value());
    BOOST_TEST(f.tensors().size() == 36u);
}

BOOST_AUTO_TEST_CASE(jl_shards_match_source_md) {
    struct Expect {
        int shard;
        std::uint64_t bytes, header;
        std::size_t tensors;
        std::uint64_t data;
    };
    const Expect expected[] = {{1, 2048, 1272, 19, 768}, {2, 532, 104, 1, 420},   {3, 1129, 176, 2, 945},
                               {4, 1152, 304, 4, 840},   {5, 1464, 544, 7, 912},  {6, 692, 264, 3, 420}};
    for (const auto& e : expected) {
        auto name = "model-0000" + std::to_string(e.shard) + "-of-00006.safetensors";
        auto f = SafetensorsFile::open(fixtures_dir() / "safetensors_jl_testdata/sharded" / name);
        BOOST_TEST(f.file_size() == e.bytes, name);
        BOOST_TEST(f.header_length() == e.header, name);
        BOOST_TEST(f.tensors().size() == e.tensors, name);
        BOOST_TEST(f.header().data_size == e.data, name);
        BOOST_TEST(f.metadata("format").value() == "pt", name);
    }
}

// ---- model-families.md §3.5: bad-input vectors, built here ----

BOOST_AUTO_TEST_CASE(empty_file_is_header_too_small) { expect_rejected({}, "HeaderTooSmall"); }

BOOST_AUTO_TEST_CASE(seven_bytes_is_header_too_small) { expect_rejected(Bytes(7, 0), "HeaderTooSmall"); }

BOOST_AUTO_TEST_CASE(length_only_is_invalid_header_length) {
    expect_rejected(safetensors_bytes("", {}, 60), "InvalidHeaderLength");
}

BOOST_AUTO_TEST_CASE(huge_length_is_header_too_large) {
    Bytes b = safetensors_bytes(one_tensor_header, Bytes(16, 0));
    const std::uint8_t prefix[8] = {0x3c, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff};
    std::copy(prefix, prefix + 8, b.begin());
    Error e = expect_rejected(b, "HeaderTooLarge");
    BOOST_TEST(std::string(e.what()).find("100000000") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(length_beyond_file_is_invalid_header_length) {
    // The attack script's file, rebuilt: a valid 64-byte header whose prefix says 1000.
    std::string header = one_tensor_header + "  ";
    BOOST_REQUIRE(header.size() == 64u);
    Bytes b = safetensors_bytes(header, Bytes(16, 0), 1000);
    BOOST_REQUIRE(b.size() == 88u);
    expect_rejected(b, "InvalidHeaderLength");
}

BOOST_AUTO_TEST_CASE(header_just_above_the_limit_is_too_large) {
    expect_rejected(safetensors_bytes("{}", {}, safetensors_max_header_size + 1), "HeaderTooLarge");
}

BOOST_AUTO_TEST_CASE(non_utf8_header_is_invalid_header) {
    expect_rejected(safetensors_bytes("\xff", {}), "InvalidHeader");
    // An overlong encoding of '{' and a lone surrogate are not UTF-8 either.
    expect_rejected(safetensors_bytes("\xc1\xbb}", {}), "InvalidHeader");
    expect_rejected(safetensors_bytes("{\"\xed\xa0\x80\":1}", {}), "InvalidHeader");
}

BOOST_AUTO_TEST_CASE(non_json_header_is_invalid_header_deserialization) {
    expect_rejected(safetensors_bytes("{", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes("{}x", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes("{,}", {}), "InvalidHeaderDeserialization");
}

BOOST_AUTO_TEST_CASE(size_mismatch_is_tensor_invalid_info) {
    Error e = expect_rejected(
        safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}})", {}),
        "TensorInvalidInfo");
    BOOST_TEST(e.context().tensor == "test");
    BOOST_TEST(std::string(e.what()).find("needs 16") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(shape_overflows_are_validation_overflow) {
    expect_rejected(
        safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})",
                          Bytes(16, 0)),
        "ValidationOverflow");
    expect_rejected(
        safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}})",
                          Bytes(16, 0)),
        "ValidationOverflow");
}

BOOST_AUTO_TEST_CASE(overlapping_tensors_are_invalid_offset) {
    std::string header = "{";
    for (int i = 0; i < 10; ++i)
        header += (i ? "," : "") + std::string("\"weight_") + std::to_string(i) +
                  R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
    header += "}";
    Error e = expect_rejected(safetensors_bytes(header, Bytes(16, 0)), "InvalidOffset");
    BOOST_TEST(std::string(e.what()).find("overlap") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_metadata_incomplete_buffer) {
    std::string polyglot = "extra_bogus_data_for_polyglot_file";
    Bytes data(16, 0);
    for (char c : polyglot) data.push_back(static_cast<std::uint8_t>(c));
    Error e = expect_rejected(safetensors_bytes(one_tensor_header, data), "MetadataIncompleteBuffer");
    BOOST_TEST(std::string(e.what()).find("after the last tensor") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(missing_bytes_are_metadata_incomplete_buffer) {
    expect_rejected(safetensors_bytes(one_tensor_header, Bytes(14, 0)), "MetadataIncompleteBuffer");
}

BOOST_AUTO_TEST_CASE(header_bomb_of_overlapping_entries_is_invalid_offset) {
    // Attack 3: 100,000 entries all at the same offsets.
    std::string header = "{";
    for (int i = 0; i < 100000; ++i)
        header += (i ? "," : "") + std::string("\"t") + std::to_string(i) +
                  R"(":{"dtype":"U8","shape":[4],"data_offsets":[0,4]})";
    header += "}";
    expect_rejected(safetensors_bytes(header, Bytes(4, 0)), "InvalidOffset");
}

BOOST_AUTO_TEST_CASE(holes_and_reversed_offsets_are_invalid_offset) {
    expect_rejected(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", Bytes(8, 0)),
                    "InvalidOffset");
    expect_rejected(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                                      R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,0]}})",
                                      Bytes(4, 0)),
                    "InvalidOffset");
}

BOOST_AUTO_TEST_CASE(sub_byte_sizes_that_are_not_whole_bytes_are_misaligned_slice) {
    expect_rejected(safetensors_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", Bytes(2, 0)),
                    "MisalignedSlice");
    // ...while whole bytes of F4 / F6 are fine.
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(R"({"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]},)"
                                               R"("b":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[2,5]}})",
                                               Bytes(5, 0)));
    BOOST_TEST(f.info("a").size_bytes() == 2u);
    BOOST_TEST(f.info("b").size_bytes() == 3u);
}

// ---- accepted edge cases of §3.5 ----

BOOST_AUTO_TEST_CASE(zero_sized_and_scalar_tensors_are_accepted) {
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(R"({"empty":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]},)"
                                               R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
                                               Bytes{0, 0, 0x80, 0x3f}));
    BOOST_TEST(f.view("empty").bytes.empty());
    TensorView s = f.view("scalar");
    BOOST_TEST(s.elements() == 1u);
    BOOST_TEST(element<float>(s, 0) == 1.0f);
}

BOOST_AUTO_TEST_CASE(empty_and_whitespace_padded_headers_are_accepted) {
    TempDir dir;
    for (const std::string header : {"{}      ", "{}\r \t\n", "\t\n{}\r "}) {
        auto f = open_bytes(dir, safetensors_bytes(header, {}));
        BOOST_TEST(f.tensors().empty());
        BOOST_TEST(f.header().data_size == 0u);
    }
}

// ---- stricter than the reference: named, not silently tolerated ----

BOOST_AUTO_TEST_CASE(duplicate_tensor_names_are_rejected) {
    Error e = expect_rejected(
        safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                          R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                          Bytes(2, 0)),
        "DuplicateTensorName");
    BOOST_TEST(e.context().tensor == "w");
}

BOOST_AUTO_TEST_CASE(unknown_dtype_is_named) {
    Error e = expect_rejected(
        safetensors_bytes(R"({"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", Bytes(16, 0)), "UnknownDtype");
    BOOST_TEST(std::string(e.what()).find("F128") != std::string::npos);
    BOOST_TEST(e.context().tensor == "w");
}

BOOST_AUTO_TEST_CASE(entry_structure_errors_are_named) {
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}})", Bytes(1, 0)),
                    "UnknownField");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1]}})", {}), "MissingField");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", Bytes(1, 0)),
                    "DuplicateKey");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", Bytes(1, 0)),
                    "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", Bytes(1, 0)),
                    "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", Bytes(1, 0)),
                    "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"w":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", Bytes(1, 0)),
                    "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"w":[1,2]})", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"w":null})", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"([])", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"("text")", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(std::string(200, '[') + std::string(200, ']'), {}),
                    "InvalidHeaderDeserialization");
}

BOOST_AUTO_TEST_CASE(metadata_must_map_strings_to_strings) {
    expect_rejected(safetensors_bytes(R"({"__metadata__":{"a":1}})", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"__metadata__":{"a":{"b":"c"}}})", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"__metadata__":"pt"})", {}), "InvalidHeaderDeserialization");
    expect_rejected(safetensors_bytes(R"({"__metadata__":{"a":"1","a":"2"}})", {}), "DuplicateKey");
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(R"({"__metadata__":{"quote\"d":"line\nbreak \u00e9"}})", {}));
    BOOST_TEST(f.metadata("quote\"d").value() == "line\nbreak \xc3\xa9");
}

BOOST_AUTO_TEST_CASE(escaped_tensor_names_are_decoded) {
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(R"({"a\"b\\c\u0041":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                               Bytes{7}));
    BOOST_TEST(f.contains("a\"b\\cA"));
}

// ---- views ----

BOOST_AUTO_TEST_CASE(views_point_at_the_right_bytes_even_unaligned) {
    // A 61-byte header puts the data at file offset 69, so element pointers are unaligned.
    std::string header = R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}})";
    while ((8 + header.size() + 3) % 4 != 1) header += ' ';
    Bytes data = {1, 2, 3};
    float values[2] = {1.5f, -2.25f};
    const auto* vb = reinterpret_cast<const std::uint8_t*>(values);
    for (int i = 0; i < 8; ++i) data.push_back(vb[i]);
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(header, data));
    TensorView b = f.view("b");
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(b.data()) % 4 != 0u);
    BOOST_TEST(element<float>(b, 0) == 1.5f);
    BOOST_TEST(element<float>(b, 1) == -2.25f);
    BOOST_TEST(element<std::uint8_t>(f.view("a"), 2) == 3);
}

BOOST_AUTO_TEST_CASE(absent_tensor_error_names_file_and_tensor) {
    TempDir dir;
    auto f = open_bytes(dir, safetensors_bytes(one_tensor_header, Bytes(16, 0)));
    try {
        f.view("nope");
        BOOST_FAIL("expected an error");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "TensorNotFound");
        BOOST_TEST(e.context().tensor == "nope");
        BOOST_TEST(std::string(e.what()).find("ok.safetensors") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(missing_file_and_folder_are_input_errors) {
    TempDir dir;
    BOOST_CHECK_THROW(SafetensorsFile::open(dir / "absent.safetensors"), Error);
    try {
        SafetensorsFile::open(dir.path());
        BOOST_FAIL("a folder was accepted");
    } catch (const Error& e) {
        BOOST_TEST((e.kind() == ErrorKind::input));
    }
}

BOOST_AUTO_TEST_SUITE_END()
