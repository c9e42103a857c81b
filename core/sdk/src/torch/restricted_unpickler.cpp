#include "torch/restricted_unpickler.hpp"

#include <moequant/error.hpp>
#include <moequant/utf8.hpp>

#include <cstring>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace moequant::detail {
namespace {

// Opcodes (CPython Lib/pickletools.py); the ones read here and the refused ones that get a
// name in messages.
namespace op {
constexpr std::uint8_t mark = '(', stop = '.', pop = '0', pop_mark = '1', dup = '2';
constexpr std::uint8_t binint = 'J', binint1 = 'K', binint2 = 'M', none = 'N', binpersid = 'Q', reduce = 'R';
constexpr std::uint8_t binstring = 'T', short_binstring = 'U', binunicode = 'X', append = 'a', build = 'b';
constexpr std::uint8_t global = 'c', dict = 'd', empty_dict = '}', appends = 'e', binget = 'h', long_binget = 'j';
constexpr std::uint8_t list = 'l', empty_list = ']', binput = 'q', long_binput = 'r', setitem = 's', tuple = 't';
constexpr std::uint8_t empty_tuple = ')', setitems = 'u', binfloat = 'G';
constexpr std::uint8_t proto = 0x80, tuple1 = 0x85, tuple2 = 0x86, tuple3 = 0x87, newtrue = 0x88, newfalse = 0x89;
constexpr std::uint8_t long1 = 0x8a, long4 = 0x8b;
constexpr std::uint8_t binbytes = 'B', short_binbytes = 'C';
constexpr std::uint8_t short_binunicode = 0x8c, binunicode8 = 0x8d, binbytes8 = 0x8e, empty_set = 0x8f;
constexpr std::uint8_t additems = 0x90, frozenset = 0x91, stack_global = 0x93, memoize = 0x94, frame = 0x95;
constexpr std::uint8_t bytearray8 = 0x96;
}  // namespace op

std::string opcode_name(std::uint8_t code) {
    static const std::unordered_map<std::uint8_t, const char*> names = {
        {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"}, {'F', "FLOAT"},
        {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"}, {'M', "BININT2"}, {'N', "NONE"},
        {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"}, {'S', "STRING"}, {'T', "BINSTRING"},
        {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"}, {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"},
        {'c', "GLOBAL"}, {'d', "DICT"}, {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"},
        {'i', "INST"}, {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
        {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"}, {')', "EMPTY_TUPLE"},
        {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"}, {0x81, "NEWOBJ"}, {0x82, "EXT1"},
        {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"}, {0x86, "TUPLE2"}, {0x87, "TUPLE3"},
        {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"}, {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"},
        {'C', "SHORT_BINBYTES"}, {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
        {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
        {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
        {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"}};
    static const char* hex = "0123456789abcdef";
    std::string code_text = std::string("0x") + hex[code >> 4] + hex[code & 15];
    auto it = names.find(code);
    return it == names.end() ? "unknown opcode " + code_text : std::string(it->second) + " (" + code_text + ")";
}

// Why an opcode that Python's unpickler knows is not read here.
const char* refusal_reason(std::uint8_t code) {
    switch (code) {
        case 'i': case 'o': case 0x81: case 0x92: return "it constructs an object of a class the pickle names";
        case 0x82: case 0x83: case 0x84: return "extension registry codes name globals indirectly";
        case 'P': return "torch's persistent ids are tuples (BINPERSID), never text";
        case 0x97: case 0x98: return "out-of-band buffers are not part of a checkpoint";
        case 'F': case 'I': case 'L': case 'S': case 'V': case 'g': case 'p':
            return "it is a text opcode of protocol 0, which torch.save never writes";
        default: return "it is not a pickle opcode";
    }
}

enum class Kind : std::uint8_t { none, boolean, integer, floating, text, bytes, tuple, list, set, dict, global, storage, tensor };

const char* kind_name(Kind k) {
    switch (k) {
        case Kind::none: return "None";
        case Kind::boolean: return "bool";
        case Kind::integer: return "int";
        case Kind::floating: return "float";
        case Kind::text: return "str";
        case Kind::bytes: return "bytes";
        case Kind::tuple: return "tuple";
        case Kind::list: return "list";
        case Kind::set: return "set";
        case Kind::dict: return "dict";
        case Kind::global: return "global";
        case Kind::storage: return "storage";
        case Kind::tensor: return "tensor";
    }
    return "value";
}

// "an int", "a str", "None": for messages.
std::string a_kind(Kind k) {
    if (k == Kind::none) return "None";
    const std::string name = kind_name(k);
    return (k == Kind::integer ? "an " : "a ") + name;
}

// The globals a checkpoint may name (torch/_weights_only_unpickler.py allows a superset).
enum class Global : std::uint8_t {
    ordered_dict,
    torch_size,
    rebuild_tensor_v2,
    rebuild_tensor_v3,
    rebuild_parameter,
    rebuild_parameter_with_state,
    rebuild_from_type_v2,
    tensor_class,
    parameter_class,
    storage_type,  // a typed storage class (its dtype) or UntypedStorage
    dtype,         // a torch.dtype
};

struct GlobalInfo {
    Global global;
    DType dtype = DType::U8;
    bool untyped = false;
};

const std::unordered_map<std::string_view, GlobalInfo>& accepted_globals() {
    static const std::unordered_map<std::string_view, GlobalInfo> table = {
        {"collections.OrderedDict", {Global::ordered_dict}},
        {"torch.Size", {Global::torch_size}},
        {"torch._utils._rebuild_tensor_v2", {Global::rebuild_tensor_v2}},
        {"torch._utils._rebuild_tensor_v3", {Global::rebuild_tensor_v3}},
        {"torch._utils._rebuild_parameter", {Global::rebuild_parameter}},
        {"torch._utils._rebuild_parameter_with_state", {Global::rebuild_parameter_with_state}},
        {"torch._tensor._rebuild_from_type_v2", {Global::rebuild_from_type_v2}},
        {"torch.Tensor", {Global::tensor_class}},
        {"torch.nn.parameter.Parameter", {Global::parameter_class}},
        // Typed storages: torch.save names the storage class of the tensor's dtype in the
        // persistent id (torch/storage.py _dtype_to_storage_type_map).
        {"torch.FloatStorage", {Global::storage_type, DType::F32}},
        {"torch.DoubleStorage", {Global::storage_type, DType::F64}},
        {"torch.HalfStorage", {Global::storage_type, DType::F16}},
        {"torch.BFloat16Storage", {Global::storage_type, DType::BF16}},
        {"torch.LongStorage", {Global::storage_type, DType::I64}},
        {"torch.IntStorage", {Global::storage_type, DType::I32}},
        {"torch.ShortStorage", {Global::storage_type, DType::I16}},
        {"torch.CharStorage", {Global::storage_type, DType::I8}},
        {"torch.ByteStorage", {Global::storage_type, DType::U8}},
        {"torch.BoolStorage", {Global::storage_type, DType::BOOL}},
        {"torch.ComplexFloatStorage", {Global::storage_type, DType::C64}},
        // Dtypes without a typed storage (float8, uint16-64) are saved in an untyped storage
        // with the dtype as an argument of _rebuild_tensor_v3 (torch >= 2.1).
        {"torch.storage.UntypedStorage", {Global::storage_type, DType::U8, true}},
        {"torch.UntypedStorage", {Global::storage_type, DType::U8, true}},
        {"torch.float32", {Global::dtype, DType::F32}},
        {"torch.float64", {Global::dtype, DType::F64}},
        {"torch.float16", {Global::dtype, DType::F16}},
        {"torch.bfloat16", {Global::dtype, DType::BF16}},
        {"torch.int64", {Global::dtype, DType::I64}},
        {"torch.int32", {Global::dtype, DType::I32}},
        {"torch.int16", {Global::dtype, DType::I16}},
        {"torch.int8", {Global::dtype, DType::I8}},
        {"torch.uint8", {Global::dtype, DType::U8}},
        {"torch.bool", {Global::dtype, DType::BOOL}},
        {"torch.complex64", {Global::dtype, DType::C64}},
        {"torch.uint16", {Global::dtype, DType::U16}},
        {"torch.uint32", {Global::dtype, DType::U32}},
        {"torch.uint64", {Global::dtype, DType::U64}},
        {"torch.float8_e4m3fn", {Global::dtype, DType::F8_E4M3}},
        {"torch.float8_e5m2", {Global::dtype, DType::F8_E5M2}},
        {"torch.float8_e4m3fnuz", {Global::dtype, DType::F8_E4M3FNUZ}},
        {"torch.float8_e5m2fnuz", {Global::dtype, DType::F8_E5M2FNUZ}},
    };
    return table;
}

// A value is 16 bytes: scalars inline, everything else an index into a table.
struct Value {
    Kind kind = Kind::none;
    std::uint32_t ref = 0;    // index into the table of its kind, or the global's name
    std::int64_t number = 0;  // int, bool, float bits
};

struct Dict {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> items;  // value indices, in insertion order
};

struct Storage {
    std::string key;
    DType dtype = DType::U8;
    bool untyped = false;
    std::uint64_t numel = 0;
};

struct Tensor {
    std::uint32_t storage = 0;
    DType dtype = DType::U8;
    std::int64_t offset = 0;
    Shape size;
    std::vector<std::int64_t> stride;
};

struct AcceptedGlobal {
    std::string name;
    GlobalInfo info;
};

constexpr std::size_t shown_name_limit = 200;

std::string shown(std::string_view name) {
    return name.size() <= shown_name_limit ? std::string(name) : std::string(name.substr(0, shown_name_limit)) + "...";
}

class Unpickler {
public:
    Unpickler(std::span<const std::byte> pickle, const std::string& file, const std::string& entry)
        : data_(reinterpret_cast<const std::uint8_t*>(pickle.data())), size_(pickle.size()), file_(file), entry_(entry) {}

    std::vector<PickledTensor> run() {
        if (size_ > pickle_max_bytes)
            fail("the pickle has " + std::to_string(size_) + " bytes, more than the limit of " +
                     std::to_string(pickle_max_bytes),
                 "PickleTooLarge");
        const std::uint32_t root = interpret();
        return state_dict(root);
    }

private:
    // ---- errors ----

    [[noreturn]] void fail(const std::string& message, const std::string& code = "InvalidPickle",
                           const std::string& hint = {}, const std::string& tensor = {}) const {
        const std::string where = interpreting_ ? entry_ + " byte " + std::to_string(opcode_at_) : entry_;
        throw Error(ErrorKind::input, where + ": " + message,
                    {.file = file_, .tensor = tensor, .code = code, .hint = hint});
    }

    [[noreturn]] void refuse_global(std::string_view name) const {
        fail("refusing global '" + shown(name) +
                 "': only plain data and torch's tensor reconstructions are read, nothing is ever run",
             "UnsafeGlobal", "a .bin checkpoint must hold a state dict of tensors; loading this one with torch.load "
                             "could run code");
    }

    // ---- reading the program ----

    const std::uint8_t* take(std::uint64_t n) {
        if (n > size_ - pos_) fail(opcode_name(code_) + " needs " + std::to_string(n) + " more bytes: the pickle is truncated");
        const std::uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }

    std::uint64_t little(std::uint64_t n) {
        const std::uint8_t* p = take(n);
        std::uint64_t v = 0;
        for (std::uint64_t i = n; i-- > 0;) v = (v << 8) | p[i];
        return v;
    }

    std::string_view line() {
        const void* nl = std::memchr(data_ + pos_, '\n', static_cast<std::size_t>(size_ - pos_));
        if (!nl) fail(opcode_name(code_) + " has no end of line: the pickle is truncated");
        const auto length = static_cast<std::uint64_t>(static_cast<const std::uint8_t*>(nl) - (data_ + pos_));
        std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<std::size_t>(length));
        pos_ += length + 1;
        return s;
    }

    // ---- values, stack, memo ----

    std::uint32_t make(Value v) {
        if (values_.size() >= pickle_max_values)
            fail("the pickle makes more than " + std::to_string(pickle_max_values) + " values", "PickleTooLarge");
        values_.push_back(v);
        return static_cast<std::uint32_t>(values_.size() - 1);
    }

    std::uint32_t make_string(Kind kind, std::string_view s) {
        if (kind == Kind::text && find_invalid_utf8(s)) fail("a str is not valid UTF-8");
        strings_.emplace_back(s);
        return make({kind, static_cast<std::uint32_t>(strings_.size() - 1), 0});
    }

    // Every item put into a container counts, whether or not it is a new value.
    void add_items(std::size_t n) {
        if (n > pickle_max_values - container_items_)
            fail("the pickle puts more than " + std::to_string(pickle_max_values) + " items into containers", "PickleTooLarge");
        container_items_ += n;
    }

    std::uint32_t make_sequence(Kind kind, std::vector<std::uint32_t> items) {
        add_items(items.size());
        sequences_.push_back(std::move(items));
        return make({kind, static_cast<std::uint32_t>(sequences_.size() - 1), 0});
    }

    std::uint32_t make_dict() {
        dicts_.emplace_back();
        return make({Kind::dict, static_cast<std::uint32_t>(dicts_.size() - 1), 0});
    }

    std::size_t base() const noexcept { return marks_.empty() ? 0 : marks_.back(); }

    void need(std::size_t n) const {
        if (stack_.size() - base() < n)
            fail(opcode_name(code_) + " needs " + std::to_string(n) + " value(s) on the stack, which has " +
                 std::to_string(stack_.size() - base()) + " above the last MARK");
    }

    std::uint32_t pop() {
        need(1);
        const std::uint32_t v = stack_.back();
        stack_.pop_back();
        return v;
    }

    std::uint32_t top() {
        need(1);
        return stack_.back();
    }

    void push(std::uint32_t v) {
        if (stack_.size() >= pickle_max_values) fail("the stack holds too many values", "PickleTooLarge");
        stack_.push_back(v);
    }

    std::vector<std::uint32_t> pop_mark() {
        if (marks_.empty()) fail(opcode_name(code_) + " has no MARK before it");
        std::vector<std::uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
        stack_.resize(marks_.back());
        marks_.pop_back();
        return items;
    }

    const Value& value(std::uint32_t v) const noexcept { return values_[v]; }
    Kind kind(std::uint32_t v) const noexcept { return values_[v].kind; }

    std::vector<std::uint32_t>& items_of(std::uint32_t v, Kind expected, const char* what) {
        if (kind(v) != expected)
            fail(opcode_name(code_) + " " + what + " " + a_kind(kind(v)) + ", not " + a_kind(expected));
        return sequences_[value(v).ref];
    }

    Dict& dict_of(std::uint32_t v) {
        if (kind(v) != Kind::dict) fail(opcode_name(code_) + " sets an item of " + a_kind(kind(v)) + ", not of a dict");
        return dicts_[value(v).ref];
    }

    void memo_put(std::uint64_t index) {
        const std::uint32_t v = top();
        auto [it, added] = memo_.try_emplace(index, v);
        if (!added) it->second = v;
        else if (memo_.size() > pickle_max_values)
            fail("the pickle stores more than " + std::to_string(pickle_max_values) + " memo entries", "PickleTooLarge");
    }

    void memo_get(std::uint64_t index) {
        auto it = memo_.find(index);
        if (it == memo_.end()) fail(opcode_name(code_) + " reads memo entry " + std::to_string(index) + ", which was never stored");
        push(it->second);
    }

    // ---- globals and calls ----

    std::uint32_t make_global(std::string_view module, std::string_view name) {
        std::string full = std::string(module) + "." + std::string(name);
        auto it = accepted_globals().find(full);
        if (it == accepted_globals().end()) refuse_global(full);
        globals_.push_back({std::move(full), it->second});
        return make({Kind::global, static_cast<std::uint32_t>(globals_.size() - 1), 0});
    }

    const AcceptedGlobal* global_of(std::uint32_t v) const noexcept {
        return kind(v) == Kind::global ? &globals_[value(v).ref] : nullptr;
    }

    const std::vector<std::uint32_t>& arguments(std::uint32_t args, std::size_t min, std::size_t max, const std::string& callee) {
        const std::vector<std::uint32_t>& a = items_of(args, Kind::tuple, "passes");
        if (a.size() < min || a.size() > max)
            fail(callee + " takes " + (min == max ? std::to_string(min) : std::to_string(min) + "-" + std::to_string(max)) +
                 " arguments, the pickle passes " + std::to_string(a.size()));
        return a;
    }

    std::int64_t integer_argument(std::uint32_t v, const std::string& callee, const char* what) {
        if (kind(v) != Kind::integer) fail(callee + "'s " + what + " is " + a_kind(kind(v)) + ", not an int");
        return value(v).number;
    }

    std::vector<std::int64_t> integers_argument(std::uint32_t v, const std::string& callee, const char* what) {
        if (kind(v) != Kind::tuple && kind(v) != Kind::list)
            fail(callee + "'s " + what + " is " + a_kind(kind(v)) + ", not a tuple of ints");
        std::vector<std::int64_t> out;
        for (std::uint32_t item : sequences_[value(v).ref]) out.push_back(integer_argument(item, callee, what));
        return out;
    }

    void expect_kind(std::uint32_t v, std::initializer_list<Kind> kinds, const std::string& callee, const char* what) {
        for (Kind k : kinds)
            if (kind(v) == k) return;
        fail(callee + "'s " + what + " is " + a_kind(kind(v)));
    }

    // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    // _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
    std::uint32_t rebuild_tensor(const std::vector<std::uint32_t>& a, bool v3, const std::string& callee) {
        if (kind(a[0]) != Kind::storage) fail(callee + "'s storage is " + a_kind(kind(a[0])) + ", not a storage");
        const Storage& storage = storages_[value(a[0]).ref];
        Tensor t;
        t.storage = value(a[0]).ref;
        t.dtype = storage.dtype;
        if (v3) {
            const AcceptedGlobal* dtype = global_of(a[6]);
            if (!dtype || dtype->info.global != Global::dtype) fail(callee + "'s dtype is not a torch dtype");
            if (!storage.untyped) fail(callee + " is given a typed storage; torch passes it an untyped one");
            t.dtype = dtype->info.dtype;
        } else if (storage.untyped) {
            fail(callee + " is given an untyped storage; torch passes it a typed one");
        }
        t.offset = integer_argument(a[1], callee, "storage offset");
        std::vector<std::int64_t> size = integers_argument(a[2], callee, "size");
        t.size.assign(size.begin(), size.end());
        t.stride = integers_argument(a[3], callee, "stride");
        expect_kind(a[4], {Kind::boolean}, callee, "requires_grad");
        expect_kind(a[5], {Kind::dict}, callee, "backward_hooks");
        const std::size_t metadata = v3 ? 7 : 6;
        if (a.size() > metadata) expect_kind(a[metadata], {Kind::dict, Kind::none}, callee, "metadata");
        tensors_.push_back(std::move(t));
        return make({Kind::tensor, static_cast<std::uint32_t>(tensors_.size() - 1), 0});
    }

    // Evaluates a call of an accepted function on already-built values (REDUCE).
    std::uint32_t call(std::uint32_t callable, std::uint32_t args, bool nested = false) {
        const AcceptedGlobal* g = global_of(callable);
        if (!g) fail("REDUCE calls " + a_kind(kind(callable)) + ", not a function");
        const std::string& name = g->name;
        switch (g->info.global) {
            case Global::ordered_dict:
                arguments(args, 0, 0, name);
                return make_dict();
            case Global::torch_size: {
                const auto& a = arguments(args, 1, 1, name);
                integers_argument(a[0], name, "dimensions");
                std::vector<std::uint32_t> items = sequences_[value(a[0]).ref];
                return make_sequence(Kind::tuple, std::move(items));
            }
            case Global::rebuild_tensor_v2: {
                const auto a = arguments(args, 6, 7, name);
                return rebuild_tensor(a, false, name);
            }
            case Global::rebuild_tensor_v3: {
                const auto a = arguments(args, 7, 8, name);
                return rebuild_tensor(a, true, name);
            }
            case Global::rebuild_parameter:
            case Global::rebuild_parameter_with_state: {
                const bool with_state = g->info.global == Global::rebuild_parameter_with_state;
                const auto a = arguments(args, with_state ? 4 : 3, with_state ? 4 : 3, name);
                expect_kind(a[0], {Kind::tensor}, name, "data");
                expect_kind(a[1], {Kind::boolean}, name, "requires_grad");
                expect_kind(a[2], {Kind::dict}, name, "backward_hooks");
                return a[0];  // a parameter's attributes (the state) are not weights
            }
            case Global::rebuild_from_type_v2: {
                // (func, new_type, args, state): a tensor or parameter with Python attributes.
                const auto a = arguments(args, 4, 4, name);
                const AcceptedGlobal* type = global_of(a[1]);
                if (!type || (type->info.global != Global::tensor_class && type->info.global != Global::parameter_class))
                    fail(name + " rebuilds a tensor subclass; only torch.Tensor and torch.nn.Parameter are read");
                const AcceptedGlobal* func = global_of(a[0]);
                if (nested || !func || func->info.global == Global::rebuild_from_type_v2)
                    fail(name + " is given a function that is not a tensor rebuild function");
                const std::uint32_t result = call(a[0], a[2], true);
                if (kind(result) != Kind::tensor) fail(name + "'s function does not rebuild a tensor");
                return result;
            }
            case Global::tensor_class:
            case Global::parameter_class:
            case Global::storage_type:
            case Global::dtype:
                break;
        }
        fail("refusing to call '" + name + "': only torch's tensor rebuild functions, OrderedDict and torch.Size are called",
             "UnsafeCall");
    }

    // ('storage', storage_type, key, location, numel), torch/serialization.py _save's persistent_id.
    std::uint32_t persistent_load(std::uint32_t pid) {
        const std::vector<std::uint32_t>& t = items_of(pid, Kind::tuple, "is given");
        auto is_text = [&](std::uint32_t v) { return kind(v) == Kind::text || kind(v) == Kind::bytes; };
        auto text = [&](std::uint32_t v) -> const std::string& { return strings_[value(v).ref]; };
        if (t.size() != 5 || !is_text(t[0]) || text(t[0]) != "storage")
            fail("a persistent id that is not torch's ('storage', type, key, location, numel)", "UnsupportedPersistentId");
        const AcceptedGlobal* type = global_of(t[1]);
        if (!type || type->info.global != Global::storage_type)
            fail("a persistent id whose storage type is not a torch storage class", "UnsupportedPersistentId");
        if (!is_text(t[2]) || text(t[2]).empty() || !is_text(t[3]) || kind(t[4]) != Kind::integer || value(t[4]).number < 0)
            fail("a persistent id whose key, location or numel is malformed", "UnsupportedPersistentId");
        storages_.push_back({text(t[2]), type->info.dtype, type->info.untyped, static_cast<std::uint64_t>(value(t[4]).number)});
        return make({Kind::storage, static_cast<std::uint32_t>(storages_.size() - 1), 0});
    }

    // ---- the interpreter ----

    std::uint32_t integer(std::int64_t v) { return make({Kind::integer, 0, v}); }

    // LONG1 / LONG4: little-endian two's complement; more than 8 bytes is not a checkpoint value.
    std::uint32_t long_integer(std::uint64_t n) {
        if (n > 8) fail("an integer of " + std::to_string(n) + " bytes does not fit in 64 bits");
        const std::uint8_t* p = take(n);
        std::uint64_t v = 0;
        for (std::uint64_t i = n; i-- > 0;) v = (v << 8) | p[i];
        if (n > 0 && n < 8 && (p[n - 1] & 0x80)) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
        return integer(static_cast<std::int64_t>(v));
    }

    std::uint32_t interpret() {
        if (size_ == 0 || data_[0] != op::proto)
            fail("the pickle does not start with PROTO: protocols 0 and 1 are not read (torch.save writes protocol 2)");
        while (true) {
            opcode_at_ = pos_;
            if (pos_ >= size_) fail("the pickle ends without STOP: it is truncated");
            code_ = data_[pos_++];
            switch (code_) {
                case op::proto: {
                    const std::uint8_t version = *take(1);
                    if (opcode_at_ != 0) fail("PROTO appears after the start of the pickle");
                    if (version < 2 || version > 5) fail("pickle protocol " + std::to_string(version) + " is not read (2-5 are)");
                    break;
                }
                case op::frame:
                    little(8);  // framing only groups opcodes; the bytes are read as they come
                    break;
                case op::stop: {
                    if (!marks_.empty()) fail("STOP with a MARK still open");
                    if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack instead of 1");
                    if (pos_ != size_) fail("STOP is followed by " + std::to_string(size_ - pos_) + " more bytes");
                    return stack_.back();
                }
                case op::mark:
                    if (marks_.size() >= pickle_max_marks) fail("more than " + std::to_string(pickle_max_marks) + " open MARKs", "PickleTooLarge");
                    marks_.push_back(stack_.size());
                    break;
                case op::pop: pop(); break;
                case op::pop_mark: pop_mark(); break;
                case op::dup: push(top()); break;

                case op::none: push(make({Kind::none, 0, 0})); break;
                case op::newtrue: push(make({Kind::boolean, 0, 1})); break;
                case op::newfalse: push(make({Kind::boolean, 0, 0})); break;
                case op::binint: push(integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(little(4))))); break;
                case op::binint1: push(integer(static_cast<std::int64_t>(little(1)))); break;
                case op::binint2: push(integer(static_cast<std::int64_t>(little(2)))); break;
                case op::long1: push(long_integer(little(1))); break;
                case op::long4: push(long_integer(little(4))); break;
                case op::binfloat: {
                    const std::uint8_t* p = take(8);
                    std::uint64_t bits = 0;
                    for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];  // big-endian
                    push(make({Kind::floating, 0, static_cast<std::int64_t>(bits)}));
                    break;
                }
                case op::short_binunicode: push(string(Kind::text, little(1))); break;
                case op::binunicode: push(string(Kind::text, little(4))); break;
                case op::binunicode8: push(string(Kind::text, little(8))); break;
                case op::short_binstring: push(string(Kind::bytes, little(1))); break;
                case op::binstring: {
                    const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(little(4)));
                    if (n < 0) fail("BINSTRING has a negative length");
                    push(string(Kind::bytes, static_cast<std::uint64_t>(n)));
                    break;
                }
                case op::short_binbytes: push(string(Kind::bytes, little(1))); break;
                case op::binbytes: push(string(Kind::bytes, little(4))); break;
                case op::binbytes8: push(string(Kind::bytes, little(8))); break;
                case op::bytearray8: push(string(Kind::bytes, little(8))); break;

                case op::empty_tuple: push(make_sequence(Kind::tuple, {})); break;
                case op::tuple1: { auto a = pop(); push(make_sequence(Kind::tuple, {a})); break; }
                case op::tuple2: { auto b = pop(), a = pop(); push(make_sequence(Kind::tuple, {a, b})); break; }
                case op::tuple3: { auto c = pop(), b = pop(), a = pop(); push(make_sequence(Kind::tuple, {a, b, c})); break; }
                case op::tuple: push(make_sequence(Kind::tuple, pop_mark())); break;
                case op::empty_list: push(make_sequence(Kind::list, {})); break;
                case op::list: push(make_sequence(Kind::list, pop_mark())); break;
                case op::append: {
                    const std::uint32_t item = pop();
                    auto& list = items_of(top(), Kind::list, "appends to");
                    add_items(1);
                    list.push_back(item);
                    break;
                }
                case op::appends: {
                    std::vector<std::uint32_t> items = pop_mark();
                    auto& list = items_of(top(), Kind::list, "appends to");
                    add_items(items.size());
                    list.insert(list.end(), items.begin(), items.end());
                    break;
                }
                case op::empty_set: push(make_sequence(Kind::set, {})); break;
                case op::frozenset: push(make_sequence(Kind::set, pop_mark())); break;
                case op::additems: {
                    std::vector<std::uint32_t> items = pop_mark();
                    auto& set = items_of(top(), Kind::set, "adds to");
                    add_items(items.size());
                    set.insert(set.end(), items.begin(), items.end());
                    break;
                }
                case op::empty_dict: push(make_dict()); break;
                case op::dict: {
                    std::vector<std::uint32_t> items = pop_mark();
                    const std::uint32_t d = make_dict();
                    set_items(d, items);
                    push(d);
                    break;
                }
                case op::setitem: {
                    const std::uint32_t v = pop(), k = pop();
                    Dict& dict = dict_of(top());
                    add_items(2);
                    dict.items.emplace_back(k, v);
                    break;
                }
                case op::setitems: {
                    std::vector<std::uint32_t> items = pop_mark();
                    set_items(top(), items);
                    break;
                }

                case op::binput: memo_put(little(1)); break;
                case op::long_binput: memo_put(little(4)); break;
                case op::memoize: memo_put(memo_.size()); break;
                case op::binget: memo_get(little(1)); break;
                case op::long_binget: memo_get(little(4)); break;

                case op::global: {
                    const std::string_view module = line();
                    const std::string_view name = line();
                    push(make_global(module, name));
                    break;
                }
                case op::stack_global: {
                    const std::uint32_t name = pop(), module = pop();
                    if (kind(name) != Kind::text || kind(module) != Kind::text) fail("STACK_GLOBAL's module and name are not strs");
                    push(make_global(strings_[value(module).ref], strings_[value(name).ref]));
                    break;
                }
                case op::reduce: {
                    const std::uint32_t args = pop(), callable = pop();
                    push(call(callable, args));
                    break;
                }
                case op::build: {
                    const std::uint32_t state = pop();
                    (void)state;
                    if (kind(top()) != Kind::dict)
                        fail("BUILD sets the state of " + a_kind(kind(top())) +
                             "; only an OrderedDict's attributes (a state dict's _metadata) are accepted");
                    break;  // the attributes (module versions) are not weights
                }
                case op::binpersid: push(persistent_load(pop())); break;

                default:
                    fail("refusing " + opcode_name(code_) + ": " + refusal_reason(code_), "UnsupportedOpcode");
            }
        }
    }

    std::uint32_t string(Kind kind, std::uint64_t length) {
        const std::uint8_t* p = take(length);
        return make_string(kind, std::string_view(reinterpret_cast<const char*>(p), static_cast<std::size_t>(length)));
    }

    void set_items(std::uint32_t d, const std::vector<std::uint32_t>& items) {
        if (items.size() % 2 != 0) fail(opcode_name(code_) + " has an odd number of values (keys without values)");
        Dict& dict = dict_of(d);
        add_items(items.size());
        for (std::size_t i = 0; i < items.size(); i += 2) dict.items.emplace_back(items[i], items[i + 1]);
    }

    // ---- the state dict ----

    std::vector<PickledTensor> state_dict(std::uint32_t root) {
        interpreting_ = false;
        if (kind(root) != Kind::dict)
            fail("the pickle holds " + a_kind(kind(root)) + ", not a state dict (a dict of name -> tensor)",
                 "NotAStateDict", "save the model's state_dict(), not the model or a single tensor");
        std::vector<PickledTensor> out;
        for (const auto& [k, v] : dicts_[value(root).ref].items) {
            if (kind(k) != Kind::text) fail("the state dict has a key that is " + a_kind(kind(k)) + ", not a str", "NotAStateDict");
            const std::string& name = strings_[value(k).ref];
            if (kind(v) == Kind::dict && holds_tensor(v))
                fail("entry '" + shown(name) + "' is a dict of tensors, not a tensor: this is a training checkpoint, not a flat state dict",
                     "NotAStateDict",
                     "the weights sit one level down, under '" + shown(name) + "'; save that dict on its own and read the result");
            if (kind(v) != Kind::tensor)
                fail("entry '" + shown(name) + "' is " + a_kind(kind(v)) + ", not a tensor: a .bin checkpoint is read only as a "
                     "flat state dict of tensors",
                     "NotAStateDict");
            const Tensor& t = tensors_[value(v).ref];
            const Storage& s = storages_[t.storage];
            out.push_back({name, t.dtype, s.key, s.dtype, s.numel, t.offset, t.size, t.stride});
        }
        return out;
    }

    bool holds_tensor(std::uint32_t d) const {
        for (const auto& kv : dicts_[value(d).ref].items)
            if (kind(kv.second) == Kind::tensor) return true;
        return false;
    }

    const std::uint8_t* data_;
    std::uint64_t size_;
    std::uint64_t pos_ = 0;
    std::uint64_t opcode_at_ = 0;
    std::uint8_t code_ = 0;
    bool interpreting_ = true;  // errors name the opcode's byte
    const std::string& file_;
    const std::string& entry_;

    std::vector<Value> values_;
    std::size_t container_items_ = 0;
    std::vector<std::uint32_t> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint64_t, std::uint32_t> memo_;
    std::vector<std::string> strings_;
    std::vector<std::vector<std::uint32_t>> sequences_;
    std::vector<Dict> dicts_;
    std::vector<AcceptedGlobal> globals_;
    std::vector<Storage> storages_;
    std::vector<Tensor> tensors_;
};

}  // namespace

std::vector<PickledTensor> read_state_dict_pickle(std::span<const std::byte> pickle, const std::string& file,
                                                  const std::string& entry) {
    return Unpickler(pickle, file, entry).run();
}

}  // namespace moequant::detail
