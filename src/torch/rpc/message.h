// message.h (rpc): what the agent's messages mean, and an IValue as a wire
// message (transport/wire.h): pickled as torch's RPC pickles it, with the
// tensors aside as the body, so that their bytes go from the sender's
// storage straight into the receiver's new tensors.
//
// Head: MessageLayout | one TensorMeta (and its sizes) per tensor | pickle.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <optional>

#include "common/status.h"
#include "transport/wire.h"

namespace cohort::rpc {

// MessageType: the wire header's type. The id is the caller's number for
// a call and its answer; for the RRef messages, see rref.cc.
enum class MessageType : uint32_t {
  kCall = 1,    // (function, args) -> kReply or kError
  kRemote,      // (function, args, rref id, fork id) -> kRemoteAck now; the value stays
  kFetch,       // (rref id) -> kReply or kError once the value is there
  kReply,       // value
  kError,       // (kind, message)
  kRemoteAck,   // the owner recorded the caller's RRef
  kUserDelete,  // (rref id, fork id) -> kDeleteAck
  kDeleteAck,
  kForkRequest,  // (rref id, fork id, parent) -> kForkAck to the sender, kChildAccept to the parent
  kForkAck,      // (rref id, fork id)
  kChildAccept,  // (fork id)
};

// What kind of error a kError carries: how the caller raises it.
enum class ErrorKind : int64_t { kRemote = 0, kInvalidArgument = 1 };

// encode pickles `value`; its tensors (made contiguous) become the body.
// Throws InvalidArgument for a tensor that cannot travel (not on the CPU,
// sparse), naming it. `has_rrefs` marks a value with RRefs in it, so that
// the receiver walks it to make them (see decode).
// `to`: the worker it goes to, for distributed autograd (a send is
// recorded when a context is current and a tensor requires grad); -1 for
// messages that never carry such tensors.
// force_context: inside a distributed autograd context, tag the message
// with it even when none of its tensors requires grad (torch does so for
// every user call: the callee then runs in the context, and a result that
// requires grad, an embedding looked up by plain indices, comes back
// recorded).
OutMessage encode(MessageType type, uint64_t id, const c10::IValue& value, bool has_rrefs = false, int to = -1,
                  bool force_context = false);

// prepare_body is the wire's on_head: it makes the tensors the head
// describes and points the body at their storage.
Status prepare_body(InMessage& m);

// decode is the value of a complete message from worker `from`; tensors
// sent inside a distributed autograd context come out of a recv function
// (-1: a message that carries none).
c10::IValue decode(const InMessage& m, int from = -1);
// autograd_context: the context the message was sent in (-1: none).
int64_t autograd_context(const InMessage& m);
// has_rrefs says whether the sender marked the value as holding RRefs.
bool has_rrefs(const InMessage& m);

// fields of a tuple payload, as an array (indexing a tuple's own storage
// trips GCC's -Warray-bounds on c10's inline elements).
inline c10::ArrayRef<c10::IValue> fields(const c10::IValue& tuple) {
  return tuple.toTupleRef().elements().asArrayRef();
}

// map_leaves rebuilds `v` with every value for which `replace` answers
// something replaced by that answer (lists, tuples and dicts walked);
// containers without a replaced leaf are kept as they are.
c10::IValue map_leaves(const c10::IValue& v, const std::function<std::optional<c10::IValue>(const c10::IValue&)>& replace);

}  // namespace cohort::rpc
