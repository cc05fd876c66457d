#include "process_group/dispatch_backend.h"

#include <algorithm>

namespace cohort {
namespace {

std::string canonical_cpu(const std::string& name) {
  return name == "native" || name == "gloo" ? "cohort" : name;
}

}  // namespace

std::string BackendSpec::canonical() const {
  if (cuda.empty()) return cpu;
  if (cpu.empty()) return cuda;
  return "cpu:" + cpu + ",cuda:" + cuda;
}

Result<BackendSpec> parse_backend_spec(const std::string& text) {
  BackendSpec spec;
  const std::string known =
      " (use \"cohort\", \"mpi\", \"nccl\" or per device, e.g. \"cpu:cohort,cuda:nccl\")";
  if (text.find(':') == std::string::npos) {
    const std::string name = canonical_cpu(text);
    if (name == "cohort" || name == "mpi") {
      spec.cpu = name;
    } else if (name == "nccl") {
      spec.cuda = name;
    } else {
      return invalid_argument("unknown backend '" + text + "'" + known);
    }
    return spec;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
      return invalid_argument("backend '" + text + "': '" + item + "' is not DEVICE:BACKEND" + known);
    }
    const std::string device = item.substr(0, colon), name = canonical_cpu(item.substr(colon + 1));
    std::string* slot;
    if (device == "cpu") {
      if (name != "cohort" && name != "mpi") {
        return invalid_argument("backend '" + text + "': '" + item.substr(colon + 1) +
                                "' is not a CPU backend (cpu takes cohort or mpi)");
      }
      slot = &spec.cpu;
    } else if (device == "cuda") {
      if (name != "nccl") {
        return invalid_argument("backend '" + text + "': '" + item.substr(colon + 1) +
                                "' is not a CUDA backend (cuda takes nccl)");
      }
      slot = &spec.cuda;
    } else {
      return invalid_argument("backend '" + text + "': unknown device '" + device + "' (cpu or cuda)");
    }
    if (!slot->empty())
      return invalid_argument("backend '" + text + "': device " + device + " is given twice");
    *slot = name;
    start = end + 1;
  }
  return spec;
}

DispatchBackend::DispatchBackend(std::string name, std::unique_ptr<Backend> cpu,
                                 std::unique_ptr<Backend> cuda)
    : Backend(std::move(name)), cpu_(std::move(cpu)), cuda_(std::move(cuda)) {}

Backend* DispatchBackend::backend_for(DeviceType type) const {
  return type == DeviceType::kCUDA ? cuda_.get() : cpu_.get();
}

Backend* DispatchBackend::on(const Device& device, Status* st) const {
  Backend* b = backend_for(device.type);
  if (!b) {
    *st = invalid_argument(std::string("backend ") + name() + " has no backend for " +
                           (device.type == DeviceType::kCUDA ? "CUDA" : "CPU") + " buffers");
  }
  return b;
}

Status DispatchBackend::broadcast(const Buffer& buffer, int root, const OpContext& op) {
  Status st;
  Backend* b = on(buffer.device, &st);
  return b ? b->broadcast(buffer, root, op) : st;
}
Status DispatchBackend::all_reduce(const Buffer& buffer, ReduceOp reduce_op, const OpContext& op) {
  Status st;
  Backend* b = on(buffer.device, &st);
  return b ? b->all_reduce(buffer, reduce_op, op) : st;
}
Status DispatchBackend::all_reduce_coalesced(const std::vector<Buffer>& buffers, ReduceOp reduce_op,
                                             const OpContext& op) {
  Status st;
  Backend* b = on(buffers.front().device, &st);
  return b ? b->all_reduce_coalesced(buffers, reduce_op, op) : st;
}
Status DispatchBackend::reduce(const Buffer& buffer, int root, ReduceOp reduce_op, const OpContext& op) {
  Status st;
  Backend* b = on(buffer.device, &st);
  return b ? b->reduce(buffer, root, reduce_op, op) : st;
}
Status DispatchBackend::all_gather(const std::vector<Buffer>& outputs, const Buffer& input,
                                   const OpContext& op) {
  Status st;
  Backend* b = on(input.device, &st);
  return b ? b->all_gather(outputs, input, op) : st;
}
Status DispatchBackend::gather(const std::vector<Buffer>& outputs, const Buffer& input, int root,
                               const OpContext& op) {
  Status st;
  Backend* b = on(input.device, &st);
  return b ? b->gather(outputs, input, root, op) : st;
}
Status DispatchBackend::scatter(const Buffer& output, const std::vector<Buffer>& inputs, int root,
                                const OpContext& op) {
  Status st;
  Backend* b = on(output.device, &st);
  return b ? b->scatter(output, inputs, root, op) : st;
}
Status DispatchBackend::reduce_scatter(const Buffer& output, const std::vector<Buffer>& inputs,
                                       ReduceOp reduce_op, const OpContext& op) {
  Status st;
  Backend* b = on(output.device, &st);
  return b ? b->reduce_scatter(output, inputs, reduce_op, op) : st;
}
Status DispatchBackend::all_to_all(const std::vector<Buffer>& outputs, const std::vector<Buffer>& inputs,
                                   const OpContext& op) {
  Status st;
  Backend* b = on(inputs.empty() ? Device{} : inputs[0].device, &st);
  return b ? b->all_to_all(outputs, inputs, op) : st;
}
Status DispatchBackend::barrier(const OpContext& op) {
  return (cpu_ ? cpu_ : cuda_)->barrier(op);
}

void DispatchBackend::post_send(const Buffer& buffer, int dst, int tag, const OpContext& op,
                                Completion done) {
  Status st;
  Backend* b = on(buffer.device, &st);
  if (!b) return done(st, -1);
  b->post_send(buffer, dst, tag, op, std::move(done));
}
void DispatchBackend::post_recv(const Buffer& buffer, int src, int tag, const OpContext& op,
                                Completion done) {
  Status st;
  Backend* b = on(buffer.device, &st);
  if (!b) return done(st, -1);
  b->post_recv(buffer, src, tag, op, std::move(done));
}

bool DispatchBackend::has_pending() {
  return (cpu_ && cpu_->has_pending()) || (cuda_ && cuda_->has_pending());
}

void DispatchBackend::progress(Deadline until) {
  const bool both = cpu_ && cuda_ && cpu_->has_pending() && cuda_->has_pending();
  // With requests on both, neither may block the other for long: each gets
  // a short slice, and the worker calls again while any are pending.
  const Deadline slice =
      both ? Deadline::sooner(until, Deadline::after(std::chrono::milliseconds(1))) : until;
  for (Backend* b : {cpu_.get(), cuda_.get()}) {
    if (b && b->has_pending()) b->progress(slice);
  }
}

void DispatchBackend::wake() {
  if (cpu_) cpu_->wake();
  if (cuda_) cuda_->wake();
}

void DispatchBackend::abort(const Status& reason) {
  if (cpu_) cpu_->abort(reason);
  if (cuda_) cuda_->abort(reason);
}

std::string DispatchBackend::describe_links() const {
  std::string out;
  for (Backend* b : {cpu_.get(), cuda_.get()}) {
    if (!b) continue;
    const std::string links = b->describe_links();
    out += (out.empty() ? "" : "; ") + b->name() + (links.empty() ? "" : " ") + links;
  }
  return out;
}

bool DispatchBackend::may_run_inline() const {
  return (!cpu_ || cpu_->may_run_inline()) && (!cuda_ || cuda_->may_run_inline());
}

}  // namespace cohort
