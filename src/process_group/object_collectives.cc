// The object collectives of cohort/object_collectives.h, as torch writes
// them in distributed_c10d.py: every rank's size first (an int64 each),
// then the bytes, each padded to the largest so that one all_gather,
// gather or scatter of equal pieces carries them.
#include "cohort/object_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "cohort/errors.h"

namespace cohort {
namespace {

GroupPtr group_or_default(const GroupPtr& group) {
  return group ? group : default_group();
}

void check_length(const char* op, const char* list, size_t got, size_t want) {
  if (got != want) {
    throw InvalidArgument(std::string(op) + ": " + list + " has " + std::to_string(got) +
                          " entries, but the group has " + std::to_string(want) +
                          " ranks (one entry per rank)");
  }
}

// Padded holds one byte string per rank, each padded to `width`, in one
// block (what all_gather_into_tensor, gather and scatter move).
struct Padded {
  size_t width = 0;
  std::vector<uint8_t> block;
  Buffer piece(size_t i) { return Buffer::of(block.data() + i * width, width); }
};

size_t largest(const std::vector<int64_t>& sizes) {
  int64_t most = 0;
  for (int64_t s : sizes) most = std::max(most, s);
  return static_cast<size_t>(most);
}

Bytes unpad(const uint8_t* data, int64_t size) {
  return Bytes(data, data + size);
}

}  // namespace

void all_gather_object(std::vector<Bytes>& object_list, const Bytes& obj, const GroupPtr& group_in) {
  const GroupPtr group = group_or_default(group_in);
  if (!group->is_member()) return;
  const size_t n = static_cast<size_t>(group->size());
  check_length("all_gather_object", "object_list", object_list.size(), n);
  int64_t mine = static_cast<int64_t>(obj.size());
  std::vector<int64_t> sizes(n);
  group->all_gather_into_tensor(Buffer::of(sizes), Buffer::of(&mine, 1));
  Padded all{largest(sizes), {}};
  all.block.resize(all.width * n);
  std::vector<uint8_t> padded(obj);
  padded.resize(all.width);
  group->all_gather_into_tensor(Buffer::of(all.block), Buffer::of(padded));
  for (size_t q = 0; q < n; ++q) object_list[q] = unpad(all.block.data() + q * all.width, sizes[q]);
}

void broadcast_object_list(std::vector<Bytes>& object_list, int src, const GroupPtr& group_in) {
  const GroupPtr group = group_or_default(group_in);
  if (!group->is_member()) return;
  BroadcastOptions o;
  o.src = get_group_rank(group, src);
  std::vector<int64_t> sizes(object_list.size());
  if (group->rank() == o.src) {
    for (size_t i = 0; i < object_list.size(); ++i) sizes[i] = static_cast<int64_t>(object_list[i].size());
  }
  // The length itself first, so that a rank whose list is of another
  // length learns it instead of mixing up the messages that follow.
  int64_t length = static_cast<int64_t>(object_list.size());
  group->broadcast(Buffer::of(&length, 1), o);
  check_length("broadcast_object_list", "this rank's object_list", object_list.size(),
               static_cast<size_t>(length));
  group->broadcast(Buffer::of(sizes), o);
  size_t total = 0;
  for (int64_t s : sizes) total += static_cast<size_t>(s);
  std::vector<uint8_t> block(total);
  if (group->rank() == o.src) {
    size_t at = 0;
    for (const Bytes& b : object_list) {
      if (!b.empty()) std::memcpy(block.data() + at, b.data(), b.size());
      at += b.size();
    }
  }
  group->broadcast(Buffer::of(block), o);
  size_t at = 0;
  for (size_t i = 0; i < object_list.size(); ++i) {
    object_list[i] = unpad(block.data() + at, sizes[i]);
    at += static_cast<size_t>(sizes[i]);
  }
}

void gather_object(const Bytes& obj, std::vector<Bytes>* object_gather_list, int dst,
                   const GroupPtr& group_in) {
  const GroupPtr group = group_or_default(group_in);
  if (!group->is_member()) return;
  const size_t n = static_cast<size_t>(group->size());
  GatherOptions o;
  o.dst = get_group_rank(group, dst);
  const bool root = group->rank() == o.dst;
  if (root) {
    if (!object_gather_list)
      throw InvalidArgument("gather_object: object_gather_list is null on dst " + std::to_string(dst));
    check_length("gather_object", "object_gather_list", object_gather_list->size(), n);
  }
  // Every rank needs the largest size to pad to: the sizes go to all.
  int64_t mine = static_cast<int64_t>(obj.size());
  std::vector<int64_t> sizes(n);
  group->all_gather_into_tensor(Buffer::of(sizes), Buffer::of(&mine, 1));
  Padded all{largest(sizes), {}};
  std::vector<uint8_t> padded(obj);
  padded.resize(all.width);
  std::vector<Buffer> pieces;
  if (root) {
    all.block.resize(all.width * n);
    for (size_t q = 0; q < n; ++q) pieces.push_back(all.piece(q));
  }
  group->gather(pieces, Buffer::of(padded), o);
  if (root) {
    for (size_t q = 0; q < n; ++q)
      (*object_gather_list)[q] = unpad(all.block.data() + q * all.width, sizes[q]);
  }
}

void scatter_object_list(std::vector<Bytes>& scatter_object_output_list,
                         const std::vector<Bytes>& scatter_object_input_list, int src,
                         const GroupPtr& group_in) {
  const GroupPtr group = group_or_default(group_in);
  if (!group->is_member()) return;
  const size_t n = static_cast<size_t>(group->size());
  if (scatter_object_output_list.empty()) {
    throw InvalidArgument(
        "scatter_object_list: scatter_object_output_list is empty; give a list of at least one entry");
  }
  ScatterOptions o;
  o.src = get_group_rank(group, src);
  const bool root = group->rank() == o.src;
  if (root)
    check_length("scatter_object_list", "scatter_object_input_list", scatter_object_input_list.size(), n);
  // The root tells every rank the width it pads to, then each its size.
  std::vector<int64_t> sizes(n);
  int64_t width = 0;
  if (root) {
    for (size_t q = 0; q < n; ++q) sizes[q] = static_cast<int64_t>(scatter_object_input_list[q].size());
    width = static_cast<int64_t>(largest(sizes));
  }
  BroadcastOptions b;
  b.src = o.src;
  group->broadcast(Buffer::of(&width, 1), b);
  int64_t my_size = 0;
  std::vector<Buffer> size_pieces;
  if (root) {
    for (size_t q = 0; q < n; ++q) size_pieces.push_back(Buffer::of(&sizes[q], 1));
  }
  group->scatter(Buffer::of(&my_size, 1), size_pieces, o);
  Padded all{static_cast<size_t>(width), {}};
  std::vector<Buffer> pieces;
  if (root) {
    all.block.resize(all.width * n);
    for (size_t q = 0; q < n; ++q) {
      const Bytes& b_q = scatter_object_input_list[q];
      if (!b_q.empty()) std::memcpy(all.block.data() + q * all.width, b_q.data(), b_q.size());
      pieces.push_back(all.piece(q));
    }
  }
  std::vector<uint8_t> mine(all.width);
  group->scatter(Buffer::of(mine), pieces, o);
  scatter_object_output_list[0] = unpad(mine.data(), my_size);
}

}  // namespace cohort
