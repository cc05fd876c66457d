#include "process_group/backend.h"

#include <cstring>

namespace cohort {

Status Backend::broadcast(const Buffer&, int, const OpContext&) {
  return unsupported("broadcast");
}
Status Backend::all_reduce(const Buffer&, ReduceOp, const OpContext&) {
  return unsupported("all_reduce");
}
Status Backend::all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                                     const OpContext& op) {
  if (buffers.size() == 1) return all_reduce(buffers.front(), reduce_op, op);  // nothing to pack
  size_t bytes = 0;
  for (const Buffer& b : buffers) bytes += b.bytes();
  // Kept between calls (a group runs one operation at a time): DDP packs
  // tens of megabytes every step, and a fresh vector would be allocated,
  // zeroed and faulted in each time.
  std::vector<uint8_t>& packed = coalesce_scratch_;
  if (packed.size() < bytes) packed.resize(bytes);
  Buffer whole = buffers.front();
  whole.data = packed.data();
  whole.count = bytes / dtype_size(whole.dtype);
  size_t at = 0;
  for (const Buffer& b : buffers) {
    if (b.count) std::memcpy(packed.data() + at, b.data, b.bytes());
    at += b.bytes();
  }
  Status st = all_reduce(whole, reduce_op, op);
  if (!st.ok()) return st;
  at = 0;
  for (const Buffer& b : buffers) {
    if (b.count) std::memcpy(b.data, packed.data() + at, b.bytes());
    at += b.bytes();
  }
  return st;
}
Status Backend::reduce(const Buffer&, int, ReduceOp, const OpContext&) {
  return unsupported("reduce");
}
Status Backend::all_gather(const std::vector<Buffer>&, const Buffer&, const OpContext&) {
  return unsupported("all_gather");
}
Status Backend::gather(const std::vector<Buffer>&, const Buffer&, int, const OpContext&) {
  return unsupported("gather");
}
Status Backend::scatter(const Buffer&, const std::vector<Buffer>&, int, const OpContext&) {
  return unsupported("scatter");
}
Status Backend::reduce_scatter(const Buffer&, const std::vector<Buffer>&, ReduceOp, const OpContext&) {
  return unsupported("reduce_scatter");
}
Status Backend::all_to_all(const std::vector<Buffer>&, const std::vector<Buffer>&, const OpContext&) {
  return unsupported("all_to_all");
}
Status Backend::barrier(const OpContext&) {
  return unsupported("barrier");
}
Status Backend::exchange_fingerprints(const void*, size_t, void*, uint8_t*, const OpContext&) {
  return unsupported("the fingerprint exchange of COHORT_DEBUG=detail");
}
void Backend::post_send(const Buffer&, int, int, const OpContext&, Completion done) {
  done(unsupported("send"), -1);
}
void Backend::post_recv(const Buffer&, int, int, const OpContext&, Completion done) {
  done(unsupported("recv"), -1);
}
Status Backend::send_now(const Buffer&, int, int, const OpContext&) {
  return unsupported("send on the caller's thread");
}
Status Backend::recv_now(const Buffer&, int, int, const OpContext&, int*) {
  return unsupported("recv on the caller's thread");
}

}  // namespace cohort
