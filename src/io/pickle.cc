// The restricted pickle machine. Values live in arenas owned by the machine and refer to each
// other by index, so copying one (BINGET, DUP-like sharing through the memo) is O(1) and a
// pickle that makes a list contain itself builds no ownership cycle; every opcode adds O(1)
// values, so memory and time stay linear in the size of data.pkl. No recursion anywhere.
#include "io/pickle.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/error.h"

namespace bertfit {
namespace {

enum class Kind : std::uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kTuple,
  kList,
  kDict,
  kGlobal,
  kStorage,
  kTensor
};
constexpr const char* kKindNames[] = {"None",     "a bool",    "an int",  "a float",
                                      "a str",    "a tuple",   "a list",  "a dict",
                                      "a global", "a storage", "a tensor"};

const char* kind_name(Kind k) { return kKindNames[static_cast<int>(k)]; }

struct Value {
  Kind kind = Kind::kNone;
  // kBool, kInt: the value. kStr, kTuple, kList, kDict, kGlobal, kTensor: the index in the
  // kind's arena. kStorage: the index in PickledStateDict::storages.
  std::int64_t i = 0;
  double f = 0;  // kFloat
};

// What an accepted global is, once the machine has read its name.
enum class Callable { kOrderedDict, kRebuildTensorV2, kRebuildParameter, kStorageType };

struct AllowedGlobal {
  const char* name;  // module.name as the pickle spells it
  Callable what;
  SafetensorsDType dtype;  // for kStorageType
};

// What a state dict saved by torch.save (and transformers' save_pretrained) names, and nothing
// else. Integer and boolean storages are read so that their tensors (position_ids, masks) can
// be reported as non-floating and skipped by the model loader.
constexpr AllowedGlobal kAllowed[] = {
    {"collections.OrderedDict", Callable::kOrderedDict, SafetensorsDType::kF32},
    {"torch._utils._rebuild_tensor_v2", Callable::kRebuildTensorV2, SafetensorsDType::kF32},
    {"torch._utils._rebuild_parameter", Callable::kRebuildParameter, SafetensorsDType::kF32},
    {"torch.FloatStorage", Callable::kStorageType, SafetensorsDType::kF32},
    {"torch.HalfStorage", Callable::kStorageType, SafetensorsDType::kF16},
    {"torch.BFloat16Storage", Callable::kStorageType, SafetensorsDType::kBF16},
    {"torch.DoubleStorage", Callable::kStorageType, SafetensorsDType::kF64},
    {"torch.LongStorage", Callable::kStorageType, SafetensorsDType::kI64},
    {"torch.IntStorage", Callable::kStorageType, SafetensorsDType::kI32},
    {"torch.ShortStorage", Callable::kStorageType, SafetensorsDType::kI16},
    {"torch.CharStorage", Callable::kStorageType, SafetensorsDType::kI8},
    {"torch.ByteStorage", Callable::kStorageType, SafetensorsDType::kU8},
    {"torch.BoolStorage", Callable::kStorageType, SafetensorsDType::kBool},
};

struct TensorObject {
  std::size_t storage = 0;
  std::uint64_t offset = 0;
  std::vector<std::int64_t> size, stride;
};

// Opcodes (Python's Lib/pickle.py names).
enum Op : std::uint8_t {
  kMark = '(',
  kStop = '.',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNoneOp = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobal = 'c',
  kAppends = 'e',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kSetItems = 'u',
  kEmptyDict = '}',
  kEmptyTuple = ')',
  kProto = 0x80,
  kLong1 = 0x8a,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

constexpr std::size_t kMaxDims = 64;
constexpr std::size_t kMaxGlobalName = 1024;

class Machine {
 public:
  Machine(std::span<const std::byte> data, const std::string& source)
      : data_(data), source_(source) {}

  PickledStateDict run() {
    for (;;) {
      op_pos_ = pos_;
      const std::uint8_t op = byte();
      if (op == kStop) return state_dict(pop());
      step(op);
    }
  }

 private:
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    throw_error(source_, ": data.pkl (byte ", op_pos_, "): ", args...);
  }

  // Reading.
  std::string_view take(std::uint64_t n) {
    if (n > data_.size() - pos_)
      fail("truncated pickle (", n, " bytes needed, ", data_.size() - pos_, " left)");
    std::string_view s(reinterpret_cast<const char*>(data_.data()) + pos_, n);
    pos_ += n;
    return s;
  }
  std::uint8_t byte() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint64_t uint(int n) {  // little-endian
    std::string_view s = take(n);
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[i]);
    return v;
  }
  std::string line() {
    const std::size_t limit = std::min(data_.size() - pos_, kMaxGlobalName + 1);
    const auto* begin = reinterpret_cast<const char*>(data_.data()) + pos_;
    const void* nl = std::memchr(begin, '\n', limit);
    if (nl == nullptr) fail("GLOBAL name without its newline (truncated or too long)");
    std::string s(begin, static_cast<const char*>(nl));
    pos_ += s.size() + 1;
    return s;
  }

  // The stack: MARK records a position; nothing pops below the latest mark.
  std::size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Value pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  Value& top() {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<Value> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    std::vector<Value> items(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  void push(Value v) { stack_.push_back(v); }
  Value expect(Value v, Kind kind, const char* what) const {
    if (v.kind != kind) fail(what, " must be ", kind_name(kind), ", found ", kind_name(v.kind));
    return v;
  }

  // Objects.
  Value make(Kind kind, std::size_t index) { return {kind, static_cast<std::int64_t>(index)}; }
  Value new_str(std::string_view s) {
    strings_.emplace_back(s);
    return make(Kind::kStr, strings_.size() - 1);
  }
  Value new_seq(Kind kind, std::vector<Value> items) {
    seqs_.push_back(std::move(items));
    return make(kind, seqs_.size() - 1);
  }
  Value new_dict() {
    dicts_.emplace_back();
    return make(Kind::kDict, dicts_.size() - 1);
  }
  const std::string& str(Value v) const { return strings_[v.i]; }
  const std::vector<Value>& seq(Value v) const { return seqs_[v.i]; }

  void step(std::uint8_t op);
  void global(const std::string& module, const std::string& name);
  Value reduce(Value callable, Value args);
  Value rebuild_tensor(const std::vector<Value>& args);
  Value storage(Value pid);
  std::vector<std::int64_t> ints(Value tuple, const char* what) const;
  PickledStateDict state_dict(Value result);

  std::span<const std::byte> data_;
  const std::string& source_;
  std::size_t pos_ = 0, op_pos_ = 0;
  std::vector<Value> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, Value> memo_;
  std::vector<std::string> strings_;
  std::vector<std::vector<Value>> seqs_;  // tuples and lists
  std::vector<std::vector<std::pair<Value, Value>>> dicts_;
  std::vector<const AllowedGlobal*> globals_;
  std::vector<TensorObject> tensors_;
  PickledStateDict out_;  // its storages fill as BINPERSID meets them
  std::unordered_map<std::string, std::size_t> storage_index_;
};

void Machine::step(std::uint8_t op) {
  switch (op) {
    case kProto:
      if (byte() > 5) fail("pickle protocol newer than 5");
      return;
    case kFrame:
      uint(8);  // a length hint; frames change nothing for a reader holding all the bytes
      return;
    case kMark:
      marks_.push_back(stack_.size());
      return;
    case kNoneOp:
      push({});
      return;
    case kNewTrue:
      push({Kind::kBool, 1});
      return;
    case kNewFalse:
      push({Kind::kBool, 0});
      return;
    case kBinInt:
      push({Kind::kInt, static_cast<std::int32_t>(static_cast<std::uint32_t>(uint(4)))});
      return;
    case kBinInt1:
      push({Kind::kInt, static_cast<std::int64_t>(uint(1))});
      return;
    case kBinInt2:
      push({Kind::kInt, static_cast<std::int64_t>(uint(2))});
      return;
    case kLong1: {  // n bytes of two's complement, little-endian
      const std::uint8_t n = byte();
      if (n > 8) fail("integer of ", static_cast<int>(n), " bytes does not fit in 64 bits");
      std::uint64_t v = uint(n);
      if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);
      push({Kind::kInt, static_cast<std::int64_t>(v)});
      return;
    }
    case kBinFloat: {  // big-endian IEEE double
      std::string_view s = take(8);
      std::uint64_t bits = 0;
      for (char c : s) bits = (bits << 8) | static_cast<std::uint8_t>(c);
      push({Kind::kFloat, 0, std::bit_cast<double>(bits)});
      return;
    }
    case kBinUnicode:
      push(new_str(take(uint(4))));
      return;
    case kShortBinUnicode:
      push(new_str(take(uint(1))));
      return;
    case kBinUnicode8:
      push(new_str(take(uint(8))));
      return;
    case kEmptyTuple:
      push(new_seq(Kind::kTuple, {}));
      return;
    case kEmptyList:
      push(new_seq(Kind::kList, {}));
      return;
    case kEmptyDict:
      push(new_dict());
      return;
    case kTuple:
      push(new_seq(Kind::kTuple, pop_mark()));
      return;
    case kTuple1:
    case kTuple2:
    case kTuple3: {
      std::vector<Value> items(op - kTuple1 + 1);
      for (std::size_t k = items.size(); k-- > 0;) items[k] = pop();
      push(new_seq(Kind::kTuple, std::move(items)));
      return;
    }
    case kGlobal: {
      std::string module = line();
      std::string name = line();
      global(module, name);
      return;
    }
    case kStackGlobal: {
      Value name = expect(pop(), Kind::kStr, "STACK_GLOBAL's name");
      Value module = expect(pop(), Kind::kStr, "STACK_GLOBAL's module");
      global(str(module), str(name));
      return;
    }
    case kReduce: {
      Value args = pop();
      Value callable = pop();
      push(reduce(callable, args));
      return;
    }
    case kBinPersId:
      push(storage(pop()));
      return;
    case kBuild: {
      pop();  // the state: only an OrderedDict's attributes (a state dict's _metadata)
      Value target = top();
      if (target.kind != Kind::kDict) {
        fail("BUILD sets the state of ", kind_name(target.kind), "; only a dict's is accepted");
      }
      return;
    }
    case kSetItem: {
      Value v = pop();
      Value k = pop();
      dicts_[expect(top(), Kind::kDict, "SETITEM's target").i].emplace_back(k, v);
      return;
    }
    case kSetItems: {
      std::vector<Value> items = pop_mark();
      if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
      auto& dict = dicts_[expect(top(), Kind::kDict, "SETITEMS's target").i];
      for (std::size_t k = 0; k < items.size(); k += 2) dict.emplace_back(items[k], items[k + 1]);
      return;
    }
    case kAppend: {
      Value v = pop();
      seqs_[expect(top(), Kind::kList, "APPEND's target").i].push_back(v);
      return;
    }
    case kAppends: {
      std::vector<Value> items = pop_mark();
      auto& list = seqs_[expect(top(), Kind::kList, "APPENDS's target").i];
      list.insert(list.end(), items.begin(), items.end());
      return;
    }
    case kBinPut:
      memo_[uint(1)] = top();
      return;
    case kLongBinPut:
      memo_[uint(4)] = top();
      return;
    case kMemoize:
      memo_[memo_.size()] = top();
      return;
    case kBinGet:
    case kLongBinGet: {
      const std::uint64_t key = uint(op == kBinGet ? 1 : 4);
      auto it = memo_.find(key);
      if (it == memo_.end()) fail("memo key ", key, " was never stored");
      push(it->second);
      return;
    }
    default:
      fail("unsupported pickle opcode 0x", "0123456789abcdef"[op >> 4], "0123456789abcdef"[op & 15],
           "; a PyTorch state dict does not use it");
  }
}

void Machine::global(const std::string& module, const std::string& name) {
  const std::string full = module + "." + name;
  for (const AllowedGlobal& g : kAllowed) {
    if (full == g.name) {
      globals_.push_back(&g);
      push(make(Kind::kGlobal, globals_.size() - 1));
      return;
    }
  }
  throw_error(source_, ": refusing to load: data.pkl names the Python global '", full,
              "', which a state dict of tensors does not need. Only collections.OrderedDict, "
              "torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and torch's "
              "storage types are accepted (as torch.load(weights_only=True) restricts them); "
              "bertfit never imports or runs anything a checkpoint names");
}

Value Machine::reduce(Value callable, Value args) {
  expect(callable, Kind::kGlobal, "REDUCE's callable");
  expect(args, Kind::kTuple, "REDUCE's arguments");
  const AllowedGlobal& g = *globals_[callable.i];
  const std::vector<Value>& a = seq(args);
  switch (g.what) {
    case Callable::kOrderedDict:
      if (!a.empty()) fail("collections.OrderedDict called with arguments");
      return new_dict();
    case Callable::kRebuildTensorV2:
      return rebuild_tensor(a);
    case Callable::kRebuildParameter:  // (data, requires_grad, backward_hooks)
      if (a.size() != 3) fail("_rebuild_parameter takes 3 arguments, found ", a.size());
      return expect(a[0], Kind::kTensor, "_rebuild_parameter's data");
    case Callable::kStorageType:
      break;
  }
  fail(g.name, " is called; storages are accepted only as persistent references");
}

std::vector<std::int64_t> Machine::ints(Value tuple, const char* what) const {
  expect(tuple, Kind::kTuple, what);
  if (seq(tuple).size() > kMaxDims) fail(what, " has more than ", kMaxDims, " dimensions");
  std::vector<std::int64_t> out;
  for (Value v : seq(tuple)) {
    expect(v, Kind::kInt, what);
    if (v.i < 0) fail(what, " holds a negative value ", v.i);
    out.push_back(v.i);
  }
  return out;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
// [, metadata]) (torch/_utils.py).
Value Machine::rebuild_tensor(const std::vector<Value>& a) {
  if (a.size() != 6 && a.size() != 7) {
    fail("_rebuild_tensor_v2 takes 6 or 7 arguments, found ", a.size());
  }
  TensorObject t;
  t.storage = static_cast<std::size_t>(expect(a[0], Kind::kStorage, "a tensor's storage").i);
  const Value offset = expect(a[1], Kind::kInt, "a tensor's storage offset");
  if (offset.i < 0) fail("negative storage offset ", offset.i);
  t.offset = static_cast<std::uint64_t>(offset.i);
  t.size = ints(a[2], "a tensor's size");
  t.stride = ints(a[3], "a tensor's stride");
  if (t.size.size() != t.stride.size()) {
    fail("a tensor's size has ", t.size.size(), " dimensions but its stride ", t.stride.size());
  }
  expect(a[4], Kind::kBool, "a tensor's requires_grad");
  expect(a[5], Kind::kDict, "a tensor's backward hooks");
  if (a.size() == 7 && a[6].kind != Kind::kNone) expect(a[6], Kind::kDict, "a tensor's metadata");
  tensors_.push_back(std::move(t));
  return make(Kind::kTensor, tensors_.size() - 1);
}

// BINPERSID's id: ('storage', storage type, key, location, numel) (torch/serialization.py).
Value Machine::storage(Value pid) {
  expect(pid, Kind::kTuple, "a persistent id");
  const std::vector<Value>& p = seq(pid);
  if (p.size() != 5 || p[0].kind != Kind::kStr || str(p[0]) != "storage") {
    fail("persistent id is not ('storage', type, key, location, numel)");
  }
  const AllowedGlobal& type = *globals_[expect(p[1], Kind::kGlobal, "a storage's type").i];
  if (type.what != Callable::kStorageType) fail("a storage's type is ", type.name);
  const std::string& key = str(expect(p[2], Kind::kStr, "a storage's key"));
  expect(p[3], Kind::kStr, "a storage's location");
  const Value numel = expect(p[4], Kind::kInt, "a storage's size");
  if (numel.i < 0) fail("storage '", key, "' has a negative size");
  auto [it, inserted] = storage_index_.emplace(key, out_.storages.size());
  if (inserted) {
    out_.storages.push_back({key, type.dtype, static_cast<std::uint64_t>(numel.i)});
  } else {
    const PickledStorage& s = out_.storages[it->second];
    if (s.dtype != type.dtype || s.numel != static_cast<std::uint64_t>(numel.i)) {
      fail("storage '", key, "' is referenced as ", safetensors_dtype_name(s.dtype), " x ", s.numel,
           " and as ", safetensors_dtype_name(type.dtype), " x ", numel.i);
    }
  }
  return make(Kind::kStorage, it->second);
}

PickledStateDict Machine::state_dict(Value result) {
  if (result.kind != Kind::kDict) {
    throw_error(source_, ": data.pkl holds ", kind_name(result.kind),
                ", not a state dict (a dict from names to tensors, as save_pretrained writes)");
  }
  std::unordered_set<std::string> names;
  for (const auto& [k, v] : dicts_[result.i]) {
    if (k.kind != Kind::kStr) {
      throw_error(source_, ": data.pkl: the state dict has a key that is ", kind_name(k.kind),
                  ", not a tensor name");
    }
    const std::string& name = str(k);
    if (v.kind != Kind::kTensor) {
      throw_error(source_, ": data.pkl: entry '", name, "' is ", kind_name(v.kind),
                  ", not a tensor; expected a state dict (names to tensors, as save_pretrained "
                  "writes), not a training checkpoint or other object");
    }
    if (!names.insert(name).second) {
      throw_error(source_, ": data.pkl: tensor '", name, "' appears twice in the state dict");
    }
    const TensorObject& t = tensors_[v.i];
    out_.tensors.push_back({name, t.storage, t.offset, t.size, t.stride});
  }
  return std::move(out_);
}

}  // namespace

PickledStateDict unpickle_state_dict(std::span<const std::byte> pickle, const std::string& source) {
  return Machine(pickle, source).run();
}

}  // namespace bertfit
