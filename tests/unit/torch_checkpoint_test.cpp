// PyTorch `.bin` checkpoints read without running anything: the zip container, the restricted
// unpickler and the tensor layout, on archives assembled here (one broken thing each) and on
// the files torch 1.13 wrote (tests/data/torch, scripts/make-torch-fixture.py).

#include <moequant/checkpoint.hpp>
#include <moequant/digest.hpp>
#include <moequant/error.hpp>
#include <moequant/safetensors_reader.hpp>

#include "pickle_writer.hpp"
#include "test_support.hpp"
#include "zip_writer.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

using namespace moequant;
using namespace moequant::test;

namespace {

using Bytes = std::vector<std::uint8_t>;

const fs::path torch_data = fs::path(MOEQUANT_SOURCE_DIR) / "tests/data/torch";

std::span<const std::byte> as_span(const Bytes& b) { return std::as_bytes(std::span<const std::uint8_t>(b)); }

Bytes floats(std::initializer_list<float> values) {
    Bytes out(values.size() * 4);
    std::memcpy(out.data(), values.begin(), out.size());
    return out;
}

Bytes iota_bytes(std::size_t n, std::uint8_t start = 0) {
    Bytes out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(start + i);
    return out;
}

// An archive as torch.save lays it out: <prefix>/data.pkl, byteorder, data/<key>..., version.
struct TorchZip {
    Bytes pickle;
    std::map<std::string, Bytes> storages;
    std::string prefix = "archive";
    std::optional<std::string> byteorder = "little";
    ZipWriterOptions options;

    Bytes build(ZipWriter* keep = nullptr) const {
        ZipWriter w(options);
        w.add(prefix + "/data.pkl", pickle);
        if (byteorder) w.add(prefix + "/byteorder", *byteorder);
        for (const auto& [key, bytes] : storages) w.add(prefix + "/data/" + key, bytes);
        w.add(prefix + "/version", std::string("3\n"));
        Bytes out = w.finish();
        if (keep) *keep = w;
        return out;
    }
};

// Two F32 tensors in one storage and a BF16 one in another: the usual case.
TorchZip simple_checkpoint() {
    TorchZip z;
    z.pickle = state_dict_pickle({{"a.weight", "FloatStorage", "0", 6, 0, {2, 3}, {}},
                                  {"b.bias", "BFloat16Storage", "1", 4, 0, {4}, {}}},
                                 true);
    z.storages["0"] = floats({1, 2, 3, 4, 5, 6});
    z.storages["1"] = iota_bytes(8, 100);
    return z;
}

// The error both routes give (a file on disk and the same bytes in memory): same code, one
// line, the file named.
Error refusal(const Bytes& bytes) {
    TempDir dir;
    const fs::path file = dir / "case.bin";
    write_bytes(file, bytes);
    std::optional<Error> from_file, from_memory;
    try {
        SafetensorsFile::open_pytorch(file);
    } catch (const Error& e) {
        from_file = e;
    }
    try {
        SafetensorsFile::pytorch_from_bytes(as_span(bytes), "memory.bin");
    } catch (const Error& e) {
        from_memory = e;
    }
    BOOST_REQUIRE_MESSAGE(from_file && from_memory, "the archive was accepted");
    BOOST_TEST(from_file->code() == from_memory->code());
    BOOST_TEST((from_file->kind() == ErrorKind::input));
    const std::string what = from_file->what();
    BOOST_TEST(what.find(file.string()) != std::string::npos, what);
    BOOST_TEST(what.find('\n') == std::string::npos);
    return *from_file;
}

std::string refusal_code(const Bytes& bytes) { return refusal(bytes).code(); }

bool mentions(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }

// PROTO 2, what `body` writes, STOP.
Bytes pickle_with(const std::function<void(PickleWriter&)>& body) {
    PickleWriter p;
    p.proto(2);
    body(p);
    return p.stop().bytes;
}

Bytes zip_with_pickle(const Bytes& pickle, std::map<std::string, Bytes> storages = {{"0", floats({1, 2, 3, 4})}}) {
    TorchZip z;
    z.pickle = pickle;
    z.storages = std::move(storages);
    return z.build();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(torch_checkpoint)

// ---- what is read ----

BOOST_AUTO_TEST_CASE(flat_state_dict_offsets_are_relative_to_the_file) {
    TorchZip z = simple_checkpoint();
    ZipWriter w;
    const Bytes bytes = z.build(&w);
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "model.bin");
    BOOST_TEST(f.tensors().size() == 2u);
    BOOST_TEST(f.header_length() == 0u);
    BOOST_TEST(f.data_start() == 0u);
    BOOST_TEST(!f.header().has_metadata);
    BOOST_TEST(f.file_size() == bytes.size());
    BOOST_TEST(f.header_digest() == digest_hex(as_span(z.pickle)));

    const TensorInfo& a = f.info("a.weight");
    BOOST_TEST((a.dtype == DType::F32));
    BOOST_TEST((a.shape == Shape{2, 3}));
    const auto storage0 = std::find_if(w.written().begin(), w.written().end(), [](auto& e) { return e.name == "archive/data/0"; });
    BOOST_TEST(a.begin == storage0->data);
    BOOST_TEST(a.begin % 64 == 0u);  // the writer aligns like torch
    BOOST_TEST(a.size_bytes() == 24u);
    const TensorView v = f.view("a.weight");
    BOOST_TEST(std::memcmp(v.data(), z.storages["0"].data(), 24) == 0);

    const TensorInfo& b = f.info("b.bias");
    BOOST_TEST((b.dtype == DType::BF16));
    BOOST_TEST(b.size_bytes() == 8u);
    BOOST_TEST(std::memcmp(f.view(b).data(), z.storages["1"].data(), 8) == 0);
    BOOST_TEST(f.header().data_size == 32u);
    // Sorted by offset, as a safetensors header is.
    BOOST_TEST(f.tensors()[0].begin <= f.tensors()[1].begin);
}

BOOST_AUTO_TEST_CASE(tied_tensors_share_their_storage_bytes) {
    TorchZip z;
    z.pickle = state_dict_pickle({{"embed.weight", "FloatStorage", "0", 4, 0, {2, 2}, {}},
                                  {"lm_head.weight", "FloatStorage", "0", 4, 0, {2, 2}, {}}});
    z.storages["0"] = floats({1, 2, 3, 4});
    const Bytes bytes = z.build();
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "tied.bin");
    BOOST_TEST(f.view("embed.weight").data() == f.view("lm_head.weight").data());
    BOOST_TEST(f.header().data_size == 32u);  // each tensor counts its own bytes
}

BOOST_AUTO_TEST_CASE(storage_offsets_select_a_slice) {
    TorchZip z;
    // Rows 1-2 and row 3 of one [4, 2] F32 storage.
    z.pickle = state_dict_pickle({{"middle", "FloatStorage", "7", 8, 2, {2, 2}, {}},
                                  {"last", "FloatStorage", "7", 8, 6, {1, 2}, {}}});
    z.storages["7"] = floats({0, 1, 2, 3, 4, 5, 6, 7});
    const Bytes bytes = z.build();
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "slices.bin");
    float got[4];
    std::memcpy(got, f.view("middle").data(), 16);
    BOOST_TEST(got[0] == 2.0f);
    BOOST_TEST(got[3] == 5.0f);
    std::memcpy(got, f.view("last").data(), 8);
    BOOST_TEST(got[0] == 6.0f);
    BOOST_TEST(got[1] == 7.0f);
}

BOOST_AUTO_TEST_CASE(every_storage_type_maps_to_its_dtype) {
    const std::vector<std::tuple<std::string, DType, unsigned>> types = {
        {"FloatStorage", DType::F32, 4},  {"HalfStorage", DType::F16, 2},   {"BFloat16Storage", DType::BF16, 2},
        {"DoubleStorage", DType::F64, 8}, {"LongStorage", DType::I64, 8},   {"IntStorage", DType::I32, 4},
        {"ShortStorage", DType::I16, 2},  {"CharStorage", DType::I8, 1},    {"ByteStorage", DType::U8, 1},
        {"BoolStorage", DType::BOOL, 1},  {"ComplexFloatStorage", DType::C64, 8}};
    for (const auto& [type, dtype, size] : types) {
        TorchZip z;
        z.pickle = state_dict_pickle({{"t", type, "0", 3, 0, {3}, {}}});
        z.storages["0"] = iota_bytes(3 * size);
        const Bytes bytes = z.build();
        const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), type);
        BOOST_TEST((f.info("t").dtype == dtype), type);
        BOOST_TEST(f.info("t").size_bytes() == 3u * size);
    }
    // Quantized storages have no safetensors dtype: refused by name.
    TorchZip z;
    z.pickle = state_dict_pickle({{"t", "QInt8Storage", "0", 3, 0, {3}, {}}});
    z.storages["0"] = iota_bytes(3);
    const Error e = refusal(z.build());
    BOOST_TEST(e.code() == "UnsafeGlobal");
    BOOST_TEST(mentions(e, "'torch.QInt8Storage'"));
}

BOOST_AUTO_TEST_CASE(float8_in_an_untyped_storage_through_rebuild_tensor_v3) {
    // torch >= 2.1: dtypes without a typed storage are saved as an UntypedStorage (numel in
    // bytes) with the dtype as the 7th argument of _rebuild_tensor_v3.
    const Bytes pickle = pickle_with([](PickleWriter& p) {
        p.empty_dict().text("w").global("torch._utils", "_rebuild_tensor_v3").mark();
        p.mark().text("storage").global("torch.storage", "UntypedStorage").text("0").text("cpu").integer(6).tuple().binpersid();
        p.integer(2).ints({2, 2}).ints({2, 1}).boolean(false).ordered_dict().global("torch", "float8_e4m3fn");
        p.tuple().reduce().setitem();
    });
    const Bytes bytes = zip_with_pickle(pickle, {{"0", iota_bytes(6)}});
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "fp8.bin");
    BOOST_TEST((f.info("w").dtype == DType::F8_E4M3));
    BOOST_TEST(f.info("w").size_bytes() == 4u);
    BOOST_TEST(static_cast<int>(f.view("w").data()[0]) == 2);
}

BOOST_AUTO_TEST_CASE(parameters_and_tensors_with_attributes_are_read_as_tensors) {
    const Bytes pickle = pickle_with([](PickleWriter& p) {
        p.empty_dict().mark();
        // _rebuild_parameter(tensor, requires_grad, hooks)
        p.text("p").global("torch._utils", "_rebuild_parameter").mark();
        write_tensor(p, {"", "FloatStorage", "0", 4, 0, {4}, {}});
        p.boolean(true).ordered_dict().tuple().reduce();
        // _rebuild_from_type_v2(_rebuild_tensor_v2, torch.Tensor, args, state)
        p.text("q").global("torch._tensor", "_rebuild_from_type_v2").mark();
        p.global("torch._utils", "_rebuild_tensor_v2").global("torch", "Tensor").mark();
        p.mark().text("storage").global("torch", "FloatStorage").text("0").text("cpu").integer(4).tuple().binpersid();
        p.integer(1).ints({3}).ints({1}).boolean(false).ordered_dict().tuple();
        p.empty_dict().tuple().reduce();
        p.setitems();
    });
    const Bytes bytes = zip_with_pickle(pickle);
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "params.bin");
    BOOST_TEST((f.info("p").shape == Shape{4}));
    BOOST_TEST((f.info("q").shape == Shape{3}));
    BOOST_TEST(f.info("q").begin == f.info("p").begin + 4);
}

BOOST_AUTO_TEST_CASE(protocol_4_and_5_opcodes_for_plain_data) {
    // FRAME, SHORT_BINUNICODE, STACK_GLOBAL and MEMOIZE are what protocol 4 writes instead.
    PickleWriter p;
    p.proto(4).op(0x95).le(0, 8);
    p.op(0x8c).le(11, 1).raw("collections").op(0x94).op(0x8c).le(11, 1).raw("OrderedDict").op(0x94).op(0x93).op(0x94);
    p.empty_tuple().reduce().op(0x94).op(0x8c).le(1, 1).raw("t");
    p.global("torch._utils", "_rebuild_tensor_v2").mark();
    p.mark().text("storage").global("torch", "FloatStorage").text("0").text("cpu").integer(4).tuple().binpersid();
    p.integer(0).ints({4}).ints({1}).boolean(false).get(2).empty_tuple().reduce();
    // metadata: a dict of plain values in every protocol-4 form
    p.empty_dict().op(0x8c).le(1, 1).raw("k").op(0x8f).mark().integer(1).op(0x90).setitem();
    p.mark().integer(2).op(0x91).op('0');  // FROZENSET, POP
    p.tuple().reduce().setitem();
    p.op(0x8e).le(2, 8).raw("xy").op('0');  // BINBYTES8, POP
    p.op(0x96).le(0, 8).op('0');            // BYTEARRAY8, POP
    const Bytes bytes = zip_with_pickle(p.stop().bytes);
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "proto4.bin");
    BOOST_TEST((f.info("t").shape == Shape{4}));
}

BOOST_AUTO_TEST_CASE(zip64_and_data_descriptor_layouts) {
    for (const auto& [zip64, descriptors] : {std::pair{true, false}, {false, true}, {true, true}}) {
        TorchZip z = simple_checkpoint();
        z.options.zip64 = zip64;
        z.options.data_descriptors = descriptors;
        const Bytes bytes = z.build();
        const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "layout.bin");
        BOOST_TEST(f.tensors().size() == 2u);
        BOOST_TEST(std::memcmp(f.view("a.weight").data(), z.storages["0"].data(), 24) == 0);
    }
}

BOOST_AUTO_TEST_CASE(any_archive_folder_and_no_byteorder_record) {
    TorchZip z = simple_checkpoint();
    z.prefix = "pytorch_model-00001-of-00002";
    z.byteorder.reset();  // torch < 2.1 writes none
    const Bytes bytes = z.build();
    BOOST_TEST(SafetensorsFile::pytorch_from_bytes(as_span(bytes), "x.bin").tensors().size() == 2u);
}

BOOST_AUTO_TEST_CASE(odd_but_valid_shapes) {
    TorchZip z;
    z.pickle = state_dict_pickle({{"scalar", "FloatStorage", "0", 1, 0, {}, {}},
                                  {"empty", "FloatStorage", "1", 0, 0, {0, 4}, {7, 7}},     // no elements: any strides
                                  {"unit_dims", "FloatStorage", "2", 3, 0, {1, 3, 1}, {99, 1, 5}}});  // size-1 dims
    z.storages["0"] = floats({2.5f});
    z.storages["1"] = {};
    z.storages["2"] = floats({1, 2, 3});
    const Bytes bytes = z.build();
    const SafetensorsFile f = SafetensorsFile::pytorch_from_bytes(as_span(bytes), "shapes.bin");
    BOOST_TEST((f.info("scalar").shape == Shape{}));
    BOOST_TEST(f.info("scalar").size_bytes() == 4u);
    BOOST_TEST(f.info("empty").size_bytes() == 0u);
    BOOST_TEST(f.view("empty").bytes.empty());
    BOOST_TEST(f.info("unit_dims").size_bytes() == 12u);
}

// ---- the pickle: what is refused ----

BOOST_AUTO_TEST_CASE(globals_that_could_run_code_are_refused_by_name) {
    for (const auto& [module, name] : {std::pair{"posix", "system"}, {"builtins", "eval"}, {"os", "system"},
                                       {"__builtin__", "exec"}, {"subprocess", "Popen"}, {"torch", "load"}}) {
        const std::string module_name = module, global_name = name;  // (clang 14 cannot capture bindings)
        const Bytes pickle = pickle_with([&](PickleWriter& p) {
            p.empty_dict().text("payload").global(module_name, global_name).text("touch /tmp/moequant-unit-pwned").op(0x85).reduce().setitem();
        });
        const Error e = refusal(zip_with_pickle(pickle));
        BOOST_TEST(e.code() == "UnsafeGlobal");
        BOOST_TEST(mentions(e, std::string("refusing global '") + module + "." + name + "'"), e.what());
        BOOST_TEST(mentions(e, "archive/data.pkl"));
    }
    BOOST_TEST(!fs::exists("/tmp/moequant-unit-pwned"));
    // STACK_GLOBAL is looked up the same way.
    const Bytes stacked = pickle_with([](PickleWriter& p) {
        p.op(0x8c).le(5, 1).raw("posix").op(0x8c).le(6, 1).raw("system").op(0x93);
    });
    BOOST_TEST(mentions(refusal(zip_with_pickle(stacked)), "'posix.system'"));
}

BOOST_AUTO_TEST_CASE(reduce_calls_only_the_rebuild_functions) {
    // An accepted global that is not a function we evaluate: a storage class, a dtype.
    for (const auto& [module, name] : {std::pair{"torch", "FloatStorage"}, {"torch", "float32"}, {"torch", "Tensor"}}) {
        const std::string module_name = module, global_name = name;
        const Bytes pickle = pickle_with([&](PickleWriter& p) {
            p.empty_dict().text("x").global(module_name, global_name).empty_tuple().reduce().setitem();
        });
        const Error e = refusal(zip_with_pickle(pickle));
        BOOST_TEST(e.code() == "UnsafeCall");
        BOOST_TEST(mentions(e, std::string("'") + module + "." + name + "'"));
    }
    // Something that is not a global at all.
    const Bytes call_text = pickle_with([](PickleWriter& p) { p.text("os.system").empty_tuple().reduce(); });
    BOOST_TEST(refusal_code(zip_with_pickle(call_text)) == "InvalidPickle");
    // OrderedDict with arguments, _rebuild_tensor_v2 with the wrong arguments.
    const Bytes od_args = pickle_with([](PickleWriter& p) { p.global("collections", "OrderedDict").ints({1}).reduce(); });
    BOOST_TEST(refusal_code(zip_with_pickle(od_args)) == "InvalidPickle");
    const Bytes bad_rebuild = pickle_with([](PickleWriter& p) {
        p.empty_dict().text("t").global("torch._utils", "_rebuild_tensor_v2").mark().text("not a storage").integer(0).ints({1})
            .ints({1}).boolean(false).ordered_dict().tuple().reduce().setitem();
    });
    BOOST_TEST(mentions(refusal(zip_with_pickle(bad_rebuild)), "not a storage"));
}

BOOST_AUTO_TEST_CASE(opcodes_outside_the_plain_data_set_are_refused) {
    const std::vector<std::pair<std::string, std::function<void(PickleWriter&)>>> cases = {
        {"NEWOBJ", [](PickleWriter& p) { p.global("collections", "OrderedDict").empty_tuple().op(0x81); }},
        {"NEWOBJ_EX", [](PickleWriter& p) { p.global("collections", "OrderedDict").empty_tuple().empty_dict().op(0x92); }},
        {"INST", [](PickleWriter& p) { p.mark().op('i').raw("collections\nOrderedDict\n"); }},
        {"OBJ", [](PickleWriter& p) { p.mark().global("collections", "OrderedDict").op('o'); }},
        {"EXT1", [](PickleWriter& p) { p.op(0x82).le(1, 1); }},
        {"EXT2", [](PickleWriter& p) { p.op(0x83).le(1, 2); }},
        {"EXT4", [](PickleWriter& p) { p.op(0x84).le(1, 4); }},
        {"PERSID", [](PickleWriter& p) { p.op('P').raw("0\n"); }},
        {"INT", [](PickleWriter& p) { p.op('I').raw("1\n"); }},
        {"GET", [](PickleWriter& p) { p.op('g').raw("0\n"); }},
        {"NEXT_BUFFER", [](PickleWriter& p) { p.op(0x97); }},
        {"unknown opcode 0xff", [](PickleWriter& p) { p.op(0xff); }},
    };
    for (const auto& [name, body] : cases) {
        const Error e = refusal(zip_with_pickle(pickle_with(body)));
        BOOST_TEST(e.code() == "UnsupportedOpcode", name << ": " << e.what());
        BOOST_TEST(mentions(e, name), e.what());
    }
}

BOOST_AUTO_TEST_CASE(malformed_programs_are_refused) {
    const std::vector<std::pair<std::string, Bytes>> cases = {
        {"empty", {}},
        {"no PROTO", PickleWriter().empty_dict().stop().bytes},
        {"protocol 1", PickleWriter().proto(1).empty_dict().stop().bytes},
        {"protocol 6", PickleWriter().proto(6).empty_dict().stop().bytes},
        {"no STOP", PickleWriter().proto(2).empty_dict().bytes},
        {"underflow", PickleWriter().proto(2).op(0x86).stop().bytes},
        {"SETITEM on a list", PickleWriter().proto(2).op(']').text("k").text("v").setitem().stop().bytes},
        {"APPEND to a tuple", PickleWriter().proto(2).empty_tuple().text("v").op('a').stop().bytes},
        {"memo never stored", PickleWriter().proto(2).get(3).stop().bytes},
        {"two values at STOP", PickleWriter().proto(2).empty_dict().empty_dict().stop().bytes},
        {"open MARK at STOP", PickleWriter().proto(2).empty_dict().mark().stop().bytes},
        {"bytes after STOP", PickleWriter().proto(2).empty_dict().stop().none().bytes},
        {"TUPLE without MARK", PickleWriter().proto(2).empty_dict().tuple().stop().bytes},
        {"odd SETITEMS", PickleWriter().proto(2).empty_dict().mark().text("k").setitems().stop().bytes},
        {"string past the end", PickleWriter().proto(2).op('X').le(1000, 4).raw("abc").bytes},
        {"huge BINUNICODE8", PickleWriter().proto(4).op(0x8d).le(~0ull, 8).bytes},
        {"GLOBAL without newline", PickleWriter().proto(2).op('c').raw("posix").bytes},
        {"invalid UTF-8 str", PickleWriter().proto(2).op('X').le(2, 4).raw("\xc3\x28").stop().bytes},
        {"LONG4 of 9 bytes", PickleWriter().proto(2).op(0x8b).le(9, 4).raw("123456789").stop().bytes},
        {"BUILD on a list", PickleWriter().proto(2).op(']').empty_dict().build().stop().bytes},
        {"PROTO twice", PickleWriter().proto(2).proto(2).empty_dict().stop().bytes},
    };
    for (const auto& [name, pickle] : cases) {
        const Error e = refusal(zip_with_pickle(pickle));
        BOOST_TEST((e.code() == "InvalidPickle" || e.code() == "UnsupportedOpcode"), name << ": " << e.what());
        BOOST_TEST(mentions(e, "data.pkl byte "), name);
    }
}

BOOST_AUTO_TEST_CASE(memo_and_size_bombs_stay_bounded) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    // A memo index of 2^32-1 allocates nothing; reading index 7 fails cleanly.
    const Bytes far_memo = PickleWriter().proto(2).empty_dict().put(0xFFFFFFFF).get(0xFFFFFFFF).op('0').get(7).stop().bytes;
    BOOST_TEST(refusal_code(zip_with_pickle(far_memo)) == "InvalidPickle");
    // Many open MARKs: refused at the limit, not after exhausting memory.
    PickleWriter marks;
    marks.proto(2);
    for (int i = 0; i < 70000; ++i) marks.mark();
    BOOST_TEST(refusal_code(zip_with_pickle(marks.stop().bytes)) == "PickleTooLarge");
    // The "billion laughs" of pickles: a list appended to itself through DUP grows by one
    // reference per opcode byte, never exponentially; the program ends with a list at STOP.
    PickleWriter laughs;
    laughs.proto(2).op(']');
    for (int i = 0; i < 200000; ++i) laughs.op('2').op('a');
    const Error e = refusal(zip_with_pickle(laughs.stop().bytes));
    BOOST_TEST(e.code() == "NotAStateDict");
    // Opcodes that make no new value still hit a limit: 2^23 + 1 list items through DUP and
    // APPEND, or as many stack entries through DUP alone.
    const std::size_t over = (std::size_t{1} << 23) + 1;
    PickleWriter items;
    items.proto(2).op(']');
    items.bytes.reserve(2 * over + 8);
    for (std::size_t i = 0; i < over; ++i) items.op('2').op('a');
    BOOST_TEST(refusal_code(zip_with_pickle(items.stop().bytes)) == "PickleTooLarge");
    PickleWriter stack;
    stack.proto(2).none();
    stack.bytes.insert(stack.bytes.end(), over, '2');
    BOOST_TEST(refusal_code(zip_with_pickle(stack.stop().bytes)) == "PickleTooLarge");
    BOOST_TEST(std::chrono::duration<double>(clock::now() - start).count() < 20.0);
}

BOOST_AUTO_TEST_CASE(only_a_flat_state_dict_is_read) {
    // {"state_dict": {...}}: a training checkpoint; refused with a hint naming the key.
    const Bytes nested = pickle_with([](PickleWriter& p) {
        p.empty_dict().text("state_dict").empty_dict().text("w");
        write_tensor(p, {"", "FloatStorage", "0", 4, 0, {4}, {}});
        p.setitem().setitem();
    });
    const Error e = refusal(zip_with_pickle(nested));
    BOOST_TEST(e.code() == "NotAStateDict");
    BOOST_TEST(mentions(e, "under 'state_dict'"), e.what());
    // A value that is not a tensor.
    const Bytes epoch = pickle_with([](PickleWriter& p) { p.empty_dict().text("epoch").integer(3).setitem(); });
    const Error e2 = refusal(zip_with_pickle(epoch));
    BOOST_TEST(e2.code() == "NotAStateDict");
    BOOST_TEST(mentions(e2, "'epoch' is an int"));
    // A single tensor, a list.
    Bytes tensor = pickle_with([](PickleWriter& p) { write_tensor(p, {"", "FloatStorage", "0", 4, 0, {4}, {}}); });
    BOOST_TEST(refusal_code(zip_with_pickle(tensor)) == "NotAStateDict");
    // An empty dict is an empty checkpoint.
    const Bytes empty = zip_with_pickle(pickle_with([](PickleWriter& p) { p.empty_dict(); }), {});
    BOOST_TEST(SafetensorsFile::pytorch_from_bytes(as_span(empty), "empty.bin").tensors().empty());
}

BOOST_AUTO_TEST_CASE(persistent_ids_must_be_torch_storages) {
    const std::vector<std::function<void(PickleWriter&)>> ids = {
        [](PickleWriter& p) { p.text("storage"); },                                                          // not a tuple
        [](PickleWriter& p) { p.mark().text("module").global("torch", "FloatStorage").text("0").text("cpu").integer(4).tuple(); },
        [](PickleWriter& p) { p.mark().text("storage").text("FloatStorage").text("0").text("cpu").integer(4).tuple(); },
        [](PickleWriter& p) { p.mark().text("storage").global("torch", "FloatStorage").text("0").text("cpu").tuple(); },
        [](PickleWriter& p) { p.mark().text("storage").global("torch", "FloatStorage").text("").text("cpu").integer(4).tuple(); },
        [](PickleWriter& p) { p.mark().text("storage").global("torch", "FloatStorage").text("0").text("cpu").integer(-1).tuple(); },
    };
    for (const auto& id : ids) {
        const Bytes pickle = pickle_with([&](PickleWriter& p) {
            id(p);
            p.binpersid();
        });
        const std::string code = refusal_code(zip_with_pickle(pickle));
        BOOST_TEST((code == "UnsupportedPersistentId" || code == "InvalidPickle"), code);
    }
}

// ---- the tensors: what is refused ----

BOOST_AUTO_TEST_CASE(non_contiguous_tensors_are_refused_naming_the_strides) {
    TorchZip z;
    z.pickle = state_dict_pickle({{"w.t", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3}}});
    z.storages["0"] = floats({1, 2, 3, 4, 5, 6});
    const Error e = refusal(z.build());
    BOOST_TEST(e.code() == "NonContiguousTensor");
    BOOST_TEST(e.context().tensor == "w.t");
    BOOST_TEST(mentions(e, "stride [1,3]"), e.what());
    BOOST_TEST(mentions(e, "[2,1]"));
    // Broadcast (stride 0) and negative strides are not row-major either.
    z.pickle = state_dict_pickle({{"b", "FloatStorage", "0", 6, 0, {2, 3}, {0, 1}}});
    BOOST_TEST(refusal_code(z.build()) == "NonContiguousTensor");
    z.pickle = state_dict_pickle({{"b", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1, 1}}});
    BOOST_TEST(refusal_code(z.build()) == "InvalidTensor");
}

BOOST_AUTO_TEST_CASE(storages_too_small_or_missing_are_refused) {
    TorchZip z;
    z.storages["0"] = floats({1, 2, 3, 4, 5, 6});
    // The persistent id says 8 elements, the entry holds 6.
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 8, 0, {8}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "StorageSizeMismatch");
    // The tensor runs past its storage.
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, 4, {3}, {}}});
    const Error e = refusal(z.build());
    BOOST_TEST(e.code() == "StorageOutOfBounds");
    BOOST_TEST(e.context().tensor == "w");
    // Offsets and sizes near 2^63 overflow instead of wrapping.
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, INT64_MAX / 2, {2}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "ValueOverflow");
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {INT64_MAX / 2, 4}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "ValueOverflow");
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {INT64_MAX / 2, 4, 4}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "InvalidTensor");  // more elements than 64 bits count
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", INT64_MAX, 0, {1}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "ValueOverflow");
    // Negative offset and dimension.
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, -1, {1}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "InvalidTensor");
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 6, 0, {-2}, {1}}});
    BOOST_TEST(refusal_code(z.build()) == "InvalidTensor");
    // No data/<key> entry.
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "9", 6, 0, {6}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "StorageMissing");
    // One storage named with two dtypes or sizes.
    z.pickle = state_dict_pickle({{"a", "FloatStorage", "0", 6, 0, {6}, {}}, {"b", "IntStorage", "0", 6, 0, {6}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "StorageMismatch");
}

BOOST_AUTO_TEST_CASE(duplicate_tensor_names_are_refused) {
    TorchZip z;
    z.storages["0"] = floats({1, 2});
    z.pickle = state_dict_pickle({{"w", "FloatStorage", "0", 2, 0, {2}, {}}, {"w", "FloatStorage", "0", 2, 0, {1}, {}}});
    BOOST_TEST(refusal_code(z.build()) == "DuplicateTensor");
}

BOOST_AUTO_TEST_CASE(byte_order_must_be_little) {
    TorchZip z = simple_checkpoint();
    z.byteorder = "big";
    const Error e = refusal(z.build());
    BOOST_TEST(e.code() == "BigEndian");
    z.byteorder = "middle";
    BOOST_TEST(refusal_code(z.build()) == "InvalidByteorder");
}

BOOST_AUTO_TEST_CASE(archives_without_one_data_pkl_are_refused) {
    ZipWriter w;
    w.add("archive/other.pkl", std::string("x"));
    BOOST_TEST(refusal_code(w.finish()) == "NotATorchCheckpoint");
    ZipWriter two;
    two.add("a/data.pkl", simple_checkpoint().pickle);
    two.add("b/data.pkl", simple_checkpoint().pickle);
    BOOST_TEST(refusal_code(two.finish()) == "NotATorchCheckpoint");
    // A torch < 1.6 file is a bare pickle stream: not a zip, with a hint.
    const Error legacy = refusal(PickleWriter().proto(2).op(0x8a).le(10, 1).raw("0123456789").stop().bytes);
    BOOST_TEST(legacy.code() == "NotAZipArchive");
    BOOST_TEST(mentions(legacy, "before 1.6"));
}

// ---- the zip container ----

BOOST_AUTO_TEST_CASE(every_truncation_is_refused) {
    const Bytes whole = simple_checkpoint().build();
    for (std::size_t n = 0; n < whole.size(); ++n) {
        const Bytes cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
        try {
            SafetensorsFile::pytorch_from_bytes(as_span(cut), "cut.bin");
            BOOST_ERROR("a prefix of " << n << " bytes was accepted");
        } catch (const Error& e) {
            BOOST_TEST((e.kind() == ErrorKind::input));
        }
    }
    const Bytes half(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2));
    BOOST_TEST(refusal_code(half) == "NotAZipArchive");
}

BOOST_AUTO_TEST_CASE(bad_end_records_are_refused) {
    ZipWriter w;
    const Bytes good = simple_checkpoint().build(&w);
    auto broken = [&](std::uint64_t at, std::uint64_t value, int width) {
        Bytes b = good;
        put_le(b, at, value, width);
        return refusal_code(b);
    };
    const std::uint64_t eocd = w.end_record();
    BOOST_TEST(broken(eocd, 0x06054b51, 4) == "NotAZipArchive");         // signature
    BOOST_TEST(broken(eocd + 20, 5, 2) == "NotAZipArchive");             // comment past the end
    BOOST_TEST(broken(eocd + 4, 1, 2) == "InvalidZip");                  // another disk
    BOOST_TEST(broken(eocd + 10, 0xFFF0, 2) == "InvalidZip");            // more entries than fit
    BOOST_TEST(broken(eocd + 16, 0x7FFFFFFF, 4) == "ZipOutOfBounds");    // directory offset
    BOOST_TEST(broken(eocd + 12, 0x7FFFFFFF, 4) == "ZipOutOfBounds");    // directory size
    BOOST_TEST(broken(eocd + 8, 3, 2) == "InvalidZip");                  // entries on this disk != total
    // A comment is fine.
    const Bytes commented = [&] {
        TorchZip z = simple_checkpoint();
        ZipWriter cw;
        cw.add("archive/data.pkl", z.pickle);
        cw.add("archive/data/0", z.storages["0"]);
        cw.add("archive/data/1", z.storages["1"]);
        return cw.finish("written by hand");
    }();
    BOOST_TEST(SafetensorsFile::pytorch_from_bytes(as_span(commented), "c.bin").tensors().size() == 2u);
}

BOOST_AUTO_TEST_CASE(bad_zip64_records_are_refused) {
    TorchZip z = simple_checkpoint();
    z.options.zip64 = true;
    ZipWriter w;
    const Bytes good = z.build(&w);
    const std::uint64_t locator = w.end_record() - 20;
    const std::uint64_t record = locator - 56;
    auto broken = [&](std::uint64_t at, std::uint64_t value, int width) {
        Bytes b = good;
        put_le(b, at, value, width);
        return refusal_code(b);
    };
    BOOST_TEST(broken(locator + 8, ~0ull, 8) == "ZipOutOfBounds");      // record offset
    BOOST_TEST(broken(locator + 8, 0, 8) == "InvalidZip");              // no record there
    BOOST_TEST(broken(record + 4, ~0ull - 3, 8) == "ZipOutOfBounds");   // record size overflows
    BOOST_TEST(broken(record + 48, 1ull << 40, 8) == "ZipOutOfBounds"); // directory offset
    BOOST_TEST(broken(record + 32, 1ull << 40, 8) == "InvalidZip");     // entry count
    BOOST_TEST(broken(w.end_record() + 10, 3, 2) == "InvalidZip");     // classic count disagrees
    // A central entry that defers its size to a zip64 field that is too short.
    const std::uint64_t central = w.written()[0].central_header;
    BOOST_TEST(broken(central + 46 + w.written()[0].name.size() + 2, 8, 2) == "InvalidZip");
}

BOOST_AUTO_TEST_CASE(entries_out_of_bounds_or_overlapping_are_refused) {
    ZipWriter w;
    const Bytes good = simple_checkpoint().build(&w);
    const ZipWritten& storage = w.written()[2];  // archive/data/0
    auto broken = [&](std::vector<std::tuple<std::uint64_t, std::uint64_t, int>> edits) {
        Bytes b = good;
        for (auto [at, value, width] : edits) put_le(b, at, value, width);
        return refusal(b);
    };
    // Sizes far past the end (central and local agree).
    BOOST_TEST(broken({{storage.central_header + 20, 0x7FFFFFF0, 4}, {storage.central_header + 24, 0x7FFFFFF0, 4},
                       {storage.local_header + 18, 0x7FFFFFF0, 4}, {storage.local_header + 22, 0x7FFFFFF0, 4}})
                   .code() == "ZipOutOfBounds");
    // A local header offset past the directory.
    BOOST_TEST(broken({{storage.central_header + 42, 0x7FFFFFF0, 4}}).code() == "ZipOutOfBounds");
    // Two central entries pointing at overlapping data: grow data/0 into data/1's header.
    const std::uint64_t grown = w.written()[3].local_header - storage.data + 8;
    BOOST_TEST(broken({{storage.central_header + 20, grown, 4}, {storage.central_header + 24, grown, 4},
                       {storage.local_header + 18, grown, 4}, {storage.local_header + 22, grown, 4}})
                   .code() == "OverlappingEntries");
    // Local size disagrees with the central one.
    BOOST_TEST(broken({{storage.local_header + 22, 4, 4}}).code() == "ZipSizeMismatch");
    // Compressed size unlike the size.
    BOOST_TEST(broken({{storage.central_header + 20, 4, 4}}).code() == "ZipSizeMismatch");
    // The local header names another entry.
    BOOST_TEST(broken({{storage.local_header + 30, 'X', 1}}).code() == "InvalidZip");
    // No local header there.
    BOOST_TEST(broken({{storage.local_header, 0, 4}}).code() == "InvalidZip");
    // Central directory garbage.
    BOOST_TEST(broken({{storage.central_header, 0, 4}}).code() == "InvalidZip");
}

BOOST_AUTO_TEST_CASE(compressed_encrypted_and_duplicate_entries_are_refused) {
    TorchZip z = simple_checkpoint();
    ZipWriter deflated;
    deflated.add("archive/data.pkl", z.pickle, 8);
    const Error e = refusal(deflated.finish());
    BOOST_TEST(e.code() == "CompressedEntry");
    BOOST_TEST(mentions(e, "'archive/data.pkl'"));
    BOOST_TEST(mentions(e, "deflate"));
    ZipWriter encrypted;
    encrypted.add("archive/data.pkl", z.pickle, 0, 0x0001);
    BOOST_TEST(refusal_code(encrypted.finish()) == "EncryptedEntry");
    ZipWriter twice;
    twice.add("archive/data.pkl", z.pickle);
    twice.add("archive/data.pkl", z.pickle);
    BOOST_TEST(refusal_code(twice.finish()) == "DuplicateEntry");
}

BOOST_AUTO_TEST_CASE(data_descriptors_must_agree) {
    TorchZip z = simple_checkpoint();
    z.options.data_descriptors = true;
    ZipWriter w;
    const Bytes good = z.build(&w);
    const ZipWritten& storage = w.written()[2];
    Bytes b = good;
    put_le(b, storage.data + 24 + 8, 5, 4);  // the descriptor's size
    BOOST_TEST(refusal_code(b) == "ZipSizeMismatch");
}

BOOST_AUTO_TEST_CASE(a_damaged_pickle_fails_its_crc) {
    ZipWriter w;
    Bytes b = simple_checkpoint().build(&w);
    b[w.written()[0].data + 3] ^= 1;
    BOOST_TEST(refusal_code(b) == "CrcMismatch");
}

// ---- the files torch wrote ----

BOOST_AUTO_TEST_CASE(torch_written_files_match_their_safetensors_twin) {
    const SafetensorsFile twin = SafetensorsFile::open(torch_data / "twin/model.safetensors");
    const SafetensorsFile bin = SafetensorsFile::open_pytorch(torch_data / "single/pytorch_model.bin");
    BOOST_TEST(bin.tensors().size() == twin.tensors().size());
    for (const TensorInfo& t : twin.tensors()) {
        const TensorInfo& b = bin.info(t.name);
        BOOST_TEST((b.dtype == t.dtype), t.name);
        BOOST_TEST((b.shape == t.shape), t.name);
        const TensorView bv = bin.view(b), tv = twin.view(t);
        BOOST_TEST(bv.size_bytes() == tv.size_bytes(), t.name);
        if (tv.size_bytes() > 0) BOOST_TEST(std::memcmp(bv.data(), tv.data(), tv.size_bytes()) == 0, t.name);
    }
    BOOST_TEST(bin.view("lm_head.weight").data() == bin.view("model.embed_tokens.weight").data());  // tied
    // torch 1.13 aligns every record's data to 64 bytes.
    for (const TensorInfo& t : bin.tensors())
        if (t.size_bytes() > 0 && t.name.find("up_proj") == std::string::npos) BOOST_TEST(t.begin % 64 == 0u, t.name);
}

BOOST_AUTO_TEST_CASE(checkpoints_of_bin_files) {
    // The sharded fixture through its index, with validate_all.
    const Checkpoint sharded = Checkpoint::open(torch_data / "sharded");
    BOOST_TEST(sharded.index_path()->filename() == "pytorch_model.bin.index.json");
    BOOST_TEST(sharded.shard_names().size() == 2u);
    sharded.validate_all();
    BOOST_TEST(sharded.tensor_count() == 15u);
    BOOST_TEST(Checkpoint::open(torch_data / "sharded/pytorch_model.bin.index.json").tensor_count() == 15u);
    // A folder with pytorch_model.bin, a .bin path.
    BOOST_TEST(Checkpoint::open(torch_data / "single").tensor_count() == 15u);
    BOOST_TEST(Checkpoint::open(torch_data / "single/pytorch_model.bin").shard_names().front() == "pytorch_model.bin");
    // safetensors wins where a folder has both.
    TempDir dir;
    fs::copy_file(torch_data / "single/pytorch_model.bin", dir / "pytorch_model.bin");
    fs::copy_file(torch_data / "twin/model.safetensors", dir / "model.safetensors");
    BOOST_TEST(Checkpoint::open(dir.path()).shard_names().front() == "model.safetensors");
    // Hostile fixtures through Checkpoint::open.
    for (const auto& [file, code] : {std::pair{"os_system.bin", "UnsafeGlobal"}, {"unknown_global.bin", "UnsafeGlobal"},
                                     {"truncated.bin", "NotAZipArchive"}, {"noncontiguous.bin", "NonContiguousTensor"}}) {
        try {
            Checkpoint::open(torch_data / "hostile" / file);
            BOOST_ERROR(file << " was accepted");
        } catch (const Error& e) {
            BOOST_TEST(e.code() == code, e.what());
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
