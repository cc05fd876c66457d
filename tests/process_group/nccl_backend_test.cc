// The NCCL backend on CUDA buffers: ranks as threads, one GPU each, over a
// shared HashStore (the ncclUniqueId bootstrap). Without two usable GPUs
// every test skips with a one-line reason (the CI machines have none).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "cohort/errors.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

// gpus_or_skip_reason returns "" when `need` GPUs are usable, else why not.
std::string skip_reason(int need) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorString(e);
  if (n < need) return "needs " + std::to_string(need) + " CUDA devices, found " + std::to_string(n);
  return "";
}

constexpr std::chrono::seconds kTimeout{60};

// A CUDA buffer of n floats on device `dev`, filled with `value`.
struct DeviceFloats {
  float* data = nullptr;
  size_t n;
  DeviceFloats(int dev, size_t count, float value) : n(count) {
    cudaSetDevice(dev);
    cudaMalloc(reinterpret_cast<void**>(&data), n * sizeof(float));
    std::vector<float> host(n, value);
    cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  ~DeviceFloats() { cudaFree(data); }
  Buffer view(int dev) {
    Buffer b = Buffer::of(data, n);
    b.device = Device{DeviceType::kCUDA, dev};
    return b;
  }
  std::vector<float> host() const {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
  }
};

TEST(NcclBackend, AllReduceAndBroadcastOnCudaBuffers) {
  const std::string why = skip_reason(2);
  if (!why.empty()) GTEST_SKIP() << why;
  run_ranks(
      2,
      [](ProcessGroup& g) {
        const int dev = g.rank();  // one GPU per rank
        DeviceFloats x(dev, 1 << 20, static_cast<float>(g.rank() + 1));
        g.all_reduce(x.view(dev));
        EXPECT_EQ(x.host().back(), 3.0f);
        DeviceFloats y(dev, 1000, static_cast<float>(g.rank() * 10));
        BroadcastOptions o;
        o.src = 1;
        g.broadcast(y.view(dev), o);
        EXPECT_EQ(y.host()[999], 10.0f);
        g.barrier();
      },
      kTimeout, "nccl");
}

TEST(NcclBackend, DispatchSendsCpuBuffersToCohortAndCudaBuffersToNccl) {
  const std::string why = skip_reason(2);
  if (!why.empty()) GTEST_SKIP() << why;
  run_ranks(
      2,
      [](ProcessGroup& g) {
        const int dev = g.rank();  // one GPU per rank
        DeviceFloats x(dev, 4096, 1.0f);
        g.all_reduce(x.view(dev));
        EXPECT_EQ(x.host()[0], 2.0f);
        std::vector<float> cpu(4096, 2.0f);
        g.all_reduce(Buffer::of(cpu));
        EXPECT_EQ(cpu[0], 4.0f);
      },
      kTimeout, "cpu:cohort,cuda:nccl");
}

TEST(NcclBackend, BitwiseOpsAreRefused) {
  const std::string why = skip_reason(2);
  if (!why.empty()) GTEST_SKIP() << why;
  run_ranks(
      2,
      [](ProcessGroup& g) {
        const int dev = g.rank();  // one GPU per rank
        DeviceFloats x(dev, 16, 1.0f);
        Buffer b = x.view(dev);
        b.dtype = DType::kInt32;
        AllReduceOptions o;
        o.op = ReduceOp::BAND;
        EXPECT_THROW(g.all_reduce(b, o), Error);
      },
      kTimeout, "nccl");
}

}  // namespace
}  // namespace cohort::testing
