#include "torch/rpc/message.h"

#include <torch/csrc/jit/serialization/pickle.h>

#include <cstring>

#include "cohort/errors.h"
#include "common/buffer_pool.h"
#include "torch/rpc/dist_autograd.h"

namespace cohort::rpc {
namespace {

constexpr uint32_t kHasRRefs = 1;

struct MessageLayout {
  uint32_t flags = 0;
  uint32_t tensors = 0;
  uint64_t pickle_bytes = 0;
  int64_t autograd_context = -1;  // dist_autograd.h's tag
  int64_t autograd_message = -1;
};

struct TensorMeta {
  int8_t dtype = 0;  // c10::ScalarType
  uint8_t dims = 0;
  uint8_t requires_grad = 0;  // part of a distributed autograd send
  uint8_t reserved[5] = {};
  // followed by `dims` int64 sizes
};

constexpr int kMaxDims = 64;

// Tensors from this size up are received into pooled buffers (see
// buffer_pool.h): a fresh one costs its page faults on every message.
constexpr size_t kPooledFrom = 64 << 10;

BufferPool& receive_pool() {
  static BufferPool* pool = new BufferPool(size_t{512} << 20);  // never freed: tensors may outlive main
  return *pool;
}

at::Tensor receive_tensor(const std::vector<int64_t>& sizes, c10::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (bytes < kPooledFrom) return at::empty(sizes, at::TensorOptions().dtype(dtype));
  void* buffer = receive_pool().take(bytes);
  if (!buffer) throw std::bad_alloc();
  return at::from_blob(
      buffer, sizes, [bytes](void* b) { receive_pool().give(b, bytes); }, at::TensorOptions().dtype(dtype));
}

template <class T>
void append(std::vector<uint8_t>& out, const T& value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
bool take(const std::vector<uint8_t>& in, size_t& at, T* value) {
  if (in.size() - at < sizeof(T) || at > in.size()) return false;
  std::memcpy(value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

struct Decoded {
  std::vector<at::Tensor> tensors;
  std::vector<uint8_t> requires_grad;
  dist_autograd::AutogradTag tag;
  size_t pickle_at = 0;
  uint64_t pickle_bytes = 0;
  uint32_t flags = 0;
};

}  // namespace

OutMessage encode(MessageType type, uint64_t id, const c10::IValue& value, bool has_rrefs, int to,
                  bool force_context) {
  std::vector<at::Tensor> table;
  std::vector<char> pickled = torch::jit::pickle(value, &table);
  std::vector<uint8_t> requires_grad(table.size(), 0);
  const dist_autograd::AutogradTag tag = (table.empty() && !force_context) || to < 0
                                             ? dist_autograd::AutogradTag{}
                                             : dist_autograd::record_send(to, table, &requires_grad, force_context);
  auto tensors = std::make_shared<std::vector<at::Tensor>>();
  tensors->reserve(table.size());
  OutMessage m;
  m.type = static_cast<uint32_t>(type);
  m.id = id;
  MessageLayout layout;
  layout.flags = has_rrefs ? kHasRRefs : 0;
  layout.tensors = static_cast<uint32_t>(table.size());
  layout.pickle_bytes = pickled.size();
  layout.autograd_context = tag.context;
  layout.autograd_message = tag.message;
  append(m.head, layout);
  for (size_t i = 0; i < table.size(); ++i) {
    const at::Tensor& t = table[i];
    if (!t.device().is_cpu()) {
      throw InvalidArgument("rpc carries CPU tensors only: argument tensor #" + std::to_string(i) + " is on " +
                            t.device().str() + " (move it to the CPU first)");
    }
    if (t.layout() != c10::kStrided) {
      throw InvalidArgument("rpc carries dense tensors only: tensor #" + std::to_string(i) + " is sparse");
    }
    if (t.dim() > kMaxDims) {
      throw InvalidArgument("rpc carries tensors of up to " + std::to_string(kMaxDims) + " dimensions: tensor #" +
                            std::to_string(i) + " has " + std::to_string(t.dim()));
    }
    at::Tensor c = t.detach().contiguous();
    TensorMeta meta;
    meta.dtype = static_cast<int8_t>(c.scalar_type());
    meta.dims = static_cast<uint8_t>(c.dim());
    meta.requires_grad = requires_grad.empty() ? 0 : requires_grad[i];
    append(m.head, meta);
    for (int64_t s : c.sizes()) append(m.head, s);
    if (c.nbytes() > 0) m.body.push_back(iovec{c.data_ptr(), c.nbytes()});
    tensors->push_back(std::move(c));
  }
  m.head.insert(m.head.end(), pickled.begin(), pickled.end());
  m.keep_alive = std::move(tensors);
  return m;
}

Status prepare_body(InMessage& m) {
  auto decoded = std::make_shared<Decoded>();
  size_t at = 0;
  MessageLayout layout;
  if (!take(m.head, at, &layout)) return invalid_argument("an rpc message too short for its layout");
  decoded->flags = layout.flags;
  decoded->tag = dist_autograd::AutogradTag{layout.autograd_context, layout.autograd_message};
  decoded->tensors.reserve(layout.tensors);
  for (uint32_t i = 0; i < layout.tensors; ++i) {
    TensorMeta meta;
    if (!take(m.head, at, &meta) || meta.dims > kMaxDims) {
      return invalid_argument("an rpc message whose tensor #" + std::to_string(i) + " is not described");
    }
    std::vector<int64_t> sizes(meta.dims);
    for (auto& s : sizes) {
      if (!take(m.head, at, &s) || s < 0) return invalid_argument("an rpc message with a bad tensor size");
    }
    const auto dtype = static_cast<c10::ScalarType>(meta.dtype);
    if (meta.dtype < 0 || meta.dtype >= static_cast<int8_t>(c10::ScalarType::NumOptions)) {
      return invalid_argument("an rpc message with an unknown dtype " + std::to_string(meta.dtype));
    }
    at::Tensor t = receive_tensor(sizes, dtype);
    if (t.nbytes() > 0) m.body.push_back(iovec{t.data_ptr(), t.nbytes()});
    decoded->tensors.push_back(std::move(t));
    decoded->requires_grad.push_back(meta.requires_grad);
  }
  if (m.head.size() - at != layout.pickle_bytes) {
    return invalid_argument("an rpc message whose pickle is " + std::to_string(m.head.size() - at) +
                            " bytes where its layout says " + std::to_string(layout.pickle_bytes));
  }
  decoded->pickle_at = at;
  decoded->pickle_bytes = layout.pickle_bytes;
  m.keep_alive = std::move(decoded);
  return Status::ok_status();
}

c10::IValue decode(const InMessage& m, int from) {
  const auto* d = static_cast<const Decoded*>(m.keep_alive.get());
  if (d->tag.context >= 0 && from >= 0) dist_autograd::attach_recv(from, d->tag, d->tensors, d->requires_grad);
  return torch::jit::unpickle(reinterpret_cast<const char*>(m.head.data()) + d->pickle_at, d->pickle_bytes,
                              nullptr, d->tensors);
}

int64_t autograd_context(const InMessage& m) {
  const auto* d = static_cast<const Decoded*>(m.keep_alive.get());
  return d ? d->tag.context : -1;
}

bool has_rrefs(const InMessage& m) {
  const auto* d = static_cast<const Decoded*>(m.keep_alive.get());
  return d && (d->flags & kHasRRefs);
}

c10::IValue map_leaves(const c10::IValue& v,
                       const std::function<std::optional<c10::IValue>(const c10::IValue&)>& replace) {
  if (auto r = replace(v)) return *r;
  if (v.isList()) {
    c10::List<c10::IValue> in = v.toList();
    // A replaced leaf may be of another type than the list said.
    c10::impl::GenericList out(c10::AnyType::get());
    out.reserve(in.size());
    bool changed = false;
    for (const c10::IValue& e : in) {
      c10::IValue m = map_leaves(e, replace);
      changed |= !m.isSameIdentity(e);
      out.push_back(std::move(m));
    }
    return changed ? c10::IValue(out) : v;
  }
  if (v.isTuple()) {
    const auto& elements = v.toTupleRef().elements();
    std::vector<c10::IValue> out;
    out.reserve(elements.size());
    bool changed = false;
    for (const c10::IValue& e : elements) {
      c10::IValue m = map_leaves(e, replace);
      changed |= !m.isSameIdentity(e);
      out.push_back(std::move(m));
    }
    return changed ? c10::IValue(c10::ivalue::Tuple::create(std::move(out))) : v;
  }
  if (v.isGenericDict()) {
    c10::Dict<c10::IValue, c10::IValue> in = v.toGenericDict();
    c10::impl::GenericDict out(in.keyType(), c10::AnyType::get());
    bool changed = false;
    for (const auto& entry : in) {
      c10::IValue m = map_leaves(entry.value(), replace);
      changed |= !m.isSameIdentity(entry.value());
      out.insert(entry.key(), std::move(m));
    }
    return changed ? c10::IValue(out) : v;
  }
  return v;
}

}  // namespace cohort::rpc
