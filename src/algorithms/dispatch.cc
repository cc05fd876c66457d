#include "algorithms/dispatch.h"

namespace cohort {

bool runs_over_messages(Algorithm algorithm) {
  return algorithm != Algorithm::kShmDirect && algorithm != Algorithm::kHierarchical &&
         algorithm != Algorithm::kHierarchicalShares;
}

Status run_message_passing(AlgoContext& c, Algorithm a, const MessagePassingCall& call) {
  if (!runs_over_messages(a) || !registry_entry(a).runs(call.collective)) {
    return invalid_argument(std::string(algorithm_name(a)) + " does not run " +
                            collective_name(call.collective) + " over messages");
  }
  switch (call.collective) {
    case Collective::kAllReduce:
      return all_reduce(c, call.buffer, call.op, a);
    case Collective::kBroadcast:
      if (a == Algorithm::kChain) return chain_broadcast(c, call.buffer, call.root);
      if (a == Algorithm::kScatterAllGather) return scatter_all_gather_broadcast(c, call.buffer, call.root);
      if (a == Algorithm::kPipelinedTree) return pipelined_tree_broadcast(c, call.buffer, call.root);
      if (a == Algorithm::kKnomialTree) return knomial_broadcast(c, call.buffer, call.root);
      return broadcast(c, call.buffer, call.root);
    case Collective::kReduce:
      if (a == Algorithm::kHalvingGather) return halving_gather_reduce(c, call.buffer, call.root, call.op);
      if (a == Algorithm::kPipelinedTree) return pipelined_tree_reduce(c, call.buffer, call.root, call.op);
      if (a == Algorithm::kKnomialTree) return knomial_reduce(c, call.buffer, call.root, call.op);
      return reduce(c, call.buffer, call.root, call.op);
    case Collective::kAllGather:
      if (a == Algorithm::kBruck) return bruck_all_gather(c, call.input, *call.outputs);
      return all_gather(c, call.input, *call.outputs);
    case Collective::kGather:
      return gather(c, call.input, *call.outputs, call.root);
    case Collective::kScatter:
      return scatter(c, call.output, *call.inputs, call.root);
    case Collective::kReduceScatter:
      if (a == Algorithm::kRecursiveHalving)
        return halving_reduce_scatter(c, call.output, *call.inputs, call.op);
      return reduce_scatter(c, call.output, *call.inputs, call.op);
    case Collective::kAllToAll:
      if (a == Algorithm::kBruck) {
        return call.even_blocks ? bruck_all_to_all_uniform(c, *call.outputs, *call.inputs)
                                : bruck_all_to_all(c, *call.outputs, *call.inputs);
      }
      return all_to_all(c, *call.outputs, *call.inputs);
    case Collective::kBarrier:
      return barrier(c);
  }
  return invalid_argument("unknown collective");
}

}  // namespace cohort
