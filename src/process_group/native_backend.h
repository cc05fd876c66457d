// native_backend.h: cohort's own backend: the algorithms of src/algorithms
// over a Transport (TCP, with shared-memory rings between ranks on one host),
// plus the direct shared-memory algorithms when the ranks share a host.
#pragma once

#include <memory>
#include <vector>

#include "algorithms/choice_log.h"
#include "algorithms/selection.h"
#include "process_group/backend.h"
#include "transport/connect_group.h"

namespace cohort {
namespace shm {
class Arena;
}

class NativeBackend : public Backend {
 public:
  // `arena`: this host's shared memory when other ranks of the group are
  // here (connect_group.h), for the direct algorithms; may be null.
  // `kinds`: which kind of link reaches each peer, as connecting chose
  // (for describe_links; empty when not known).
  NativeBackend(std::unique_ptr<Transport> transport, std::shared_ptr<shm::Arena> arena,
                PeerKinds kinds = {});

  Status broadcast(const Buffer& buffer, int root, const OpContext& op) override;
  Status all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) override;
  Status all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                              const OpContext& op) override;
  Status reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) override;
  Status all_gather(const std::vector<Buffer>& outputs, const Buffer& input, const OpContext& op) override;
  Status gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                const OpContext& op) override;
  Status scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                 const OpContext& op) override;
  Status reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs, ReduceOp reduce_op,
                        const OpContext& op) override;
  Status all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                    const OpContext& op) override;
  Status barrier(const OpContext& op) override;
  void post_send(const Buffer& buffer, int dst, int tag, const OpContext& op, Completion done) override;
  void post_recv(const Buffer& buffer, int src, int tag, const OpContext& op, Completion done) override;
  bool p2p_now() const override { return true; }
  Status send_now(const Buffer& buffer, int dst, int tag, const OpContext& op) override;
  Status recv_now(const Buffer& buffer, int src, int tag, const OpContext& op, int* source) override;
  bool has_pending() override { return transport_->has_pending(); }
  void progress(Deadline until) override { transport_->progress(until); }
  void wake() override { transport_->wake(); }
  void abort(const Status& reason) override { transport_->interrupt(reason); }
  std::vector<int> lost_peers() const override;
  bool can_shrink() const override { return true; }
  // Fingerprints travel as messages of their own kind (kFingerprint, tag
  // n), so that they cannot mix with collective #n's, whatever the ranks do.
  bool has_fingerprint_exchange() const override { return true; }
  Status exchange_fingerprints(const void* mine, size_t bytes, void* all, uint8_t* arrived,
                               const OpContext& op) override;
  // Ranks that share a host map one segment (transport/shm/symmetric.h).
  Result<std::shared_ptr<SymmetricMemory>> alloc_symmetric(Store* store, uint64_t id, size_t bytes,
                                                           Deadline deadline) override;
  std::string describe_links() const override;

 private:
  // context builds an algorithm's context; `direct`: a direct
  // shared-memory algorithm, which gets the deadline unconverted.
  struct AlgoContext context(const OpContext& op, bool direct);
  // choose asks the algorithm table, knowing where this group's ranks are
  // (and logs the choice with COHORT_DEBUG=info). Where the table forces
  // shm_direct's way within the host, it checks here, before the call,
  // that the way can run it, and the next context() carries the way.
  Result<Algorithm> choose(Collective collective, size_t bytes, const OpContext& op);
  // direct_done passes on a direct (shared-memory) algorithm's status; on
  // failure it first fails the transport, which tells the peers why.
  Status direct_done(Status st, const OpContext& op);
  // premultiply applies PREMUL_SUM's factor to the input before an
  // all_reduce (nothing for other ops).
  static void premultiply(const Buffer& buffer, ReduceOp reduce_op);
  // folded_scale is what the shared-memory all_reduce multiplies each
  // reduced block by: 1/size for AVG, whose division is folded into the
  // reduction (no second pass over the buffer; DDP averages every bucket
  // this way), else 1.
  double folded_scale(ReduceOp reduce_op) const;
  std::unique_ptr<Transport> transport_;
  std::shared_ptr<shm::Arena> arena_;
  PeerKinds kinds_;
  Topology topology_ = Topology::kNetwork;
  std::vector<uint8_t> scratch_;  // reused by every operation (worker thread only)
  std::vector<uint8_t> premul_;   // PREMUL_SUM's scaled copy of the inputs
  bool log_choices_ = false;      // COHORT_DEBUG is info or detail, read at creation
  // The algorithm table of this group's shape, and of its steps between
  // hosts (all_reduce's leaders, all_gather's and reduce_scatter's
  // columns), built at creation and again when the config changes
  // (COHORT_ALGO): a choice is then an array lookup. Touched by the
  // driving thread only.
  GroupShape shape_;
  AlgorithmTable table_;
  AlgorithmTable leaders_table_;
  AlgorithmTable columns_table_;
  uint64_t table_generation_ = ~uint64_t{0};
  ChoiceLog choice_log_;
  ShmWay forced_way_ = ShmWay::kByRule;  // the last choose()'s, for context()
  std::vector<SendRequest> fingerprint_sends_;  // reused by exchange_fingerprints
  std::vector<RecvRequest> fingerprint_recvs_;
};

}  // namespace cohort
