#include "process_group/backend.h"

namespace cohort {

Status Backend::broadcast(const Buffer&, int, const OpContext&) {
  return unsupported("broadcast");
}
Status Backend::all_reduce(const Buffer&, ReduceOp, const OpContext&) {
  return unsupported("all_reduce");
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

}  // namespace cohort
