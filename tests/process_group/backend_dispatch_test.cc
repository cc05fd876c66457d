// Per-device dispatch ("cpu:cohort,cuda:nccl"): the spec's parsing and its
// errors, and a group whose CPU buffers go to the native backend. The NCCL
// communicator is only made at the first CUDA operation, so this runs on a
// machine without a GPU.
#include <gtest/gtest.h>

#include "cohort/errors.h"
#include "cohort/hash_store.h"
#include "process_group/collective_checks.h"
#include "process_group/dispatch_backend.h"
#include "process_group/thread_ranks.h"

namespace cohort::testing {
namespace {

std::string error_of(const std::string& text) {
  auto spec = parse_backend_spec(text);
  EXPECT_FALSE(spec.ok()) << text << " was accepted";
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << spec.status().message();
  return spec.status().message();
}

TEST(BackendSpec, PlainNamesAndPerDeviceListsAsTorchWritesThem) {
  EXPECT_EQ(parse_backend_spec("cohort").value().cpu, "cohort");
  EXPECT_EQ(parse_backend_spec("gloo").value().cpu, "cohort");
  EXPECT_EQ(parse_backend_spec("mpi").value().cpu, "mpi");
  BackendSpec nccl = parse_backend_spec("nccl").value();
  EXPECT_EQ(nccl.cpu, "");
  EXPECT_EQ(nccl.cuda, "nccl");
  BackendSpec both = parse_backend_spec("cuda:nccl,cpu:gloo").value();
  EXPECT_EQ(both.cpu, "cohort");
  EXPECT_EQ(both.cuda, "nccl");
  EXPECT_EQ(both.canonical(), "cpu:cohort,cuda:nccl");
  EXPECT_EQ(parse_backend_spec("cpu:mpi").value().canonical(), "mpi");
}

TEST(BackendSpec, UnknownNamesAndDevicesSayWhatIsWrong) {
  EXPECT_NE(error_of("tcp").find("unknown backend 'tcp'"), std::string::npos);
  EXPECT_NE(error_of("cpu:nccl").find("'nccl' is not a CPU backend"), std::string::npos);
  EXPECT_NE(error_of("cuda:mpi").find("'mpi' is not a CUDA backend"), std::string::npos);
  EXPECT_NE(error_of("tpu:cohort").find("unknown device 'tpu'"), std::string::npos);
  EXPECT_NE(error_of("cpu:cohort,cpu:mpi").find("device cpu is given twice"), std::string::npos);
  EXPECT_NE(error_of("cpu:cohort,nccl").find("'nccl' is not DEVICE:BACKEND"), std::string::npos);
}

TEST(BackendSpec, InitProcessGroupRefusesABadSpecBeforeJoining) {
  InitOptions init;
  init.backend = "cpu:cohort,cuda:bogus";
  init.store = std::make_shared<HashStore>();
  init.rank = 0;
  init.world_size = 2;  // would wait for rank 1 if the spec were accepted
  try {
    init_process_group(init);
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'bogus' is not a CUDA backend"), std::string::npos) << e.what();
  }
}

constexpr std::chrono::seconds kTimeout{60};

// The groups that name "cuda:nccl" need the NCCL backend built in: without
// it cohort refuses to make them (as torch does), so those tests skip.
#ifdef COHORT_TEST_HAVE_NCCL
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif
constexpr const char* kNoNccl = "cohort is built without NCCL (COHORT_WITH_NCCL=OFF or not found)";

TEST(DispatchGroup, CpuBuffersRunOnTheCpuBackend) {
  if (!kNcclBuilt) GTEST_SKIP() << kNoNccl;
  run_ranks(
      3,
      [](ProcessGroup& g) {
        EXPECT_EQ(g.backend_name(), "cpu:cohort,cuda:nccl");
        check_all_reduce_every_dtype_op_and_size(g);
        check_all_gather_uneven_and_into_one_tensor(g);
        check_all_to_all_uneven_splits(g);
        check_barrier_and_async_work_in_order(g);
        check_point_to_point_ring_and_any_source(g);
      },
      kTimeout, "cpu:cohort,cuda:nccl");
}

TEST(DispatchGroup, ACudaBufferWithNoCudaBackendIsRefusedOnTheCallersThread) {
  run_ranks(2, [](ProcessGroup& g) {
    float x[4] = {};
    Buffer on_gpu = Buffer::of(x, 4);  // never read: refused before anything runs
    on_gpu.device.type = DeviceType::kCUDA;
    try {
      g.all_reduce(on_gpu);
      ADD_FAILURE() << "a CUDA buffer was accepted by backend " << g.backend_name();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("is on a CUDA device but backend cohort has no backend for it"),
                std::string::npos)
          << e.what();
    }
    g.barrier();  // the group still works
  });
}

TEST(DispatchGroup, BuffersOnDifferentDevicesInOneCallAreRefused) {
  if (!kNcclBuilt) GTEST_SKIP() << kNoNccl;
  run_ranks(
      2,
      [](ProcessGroup& g) {
        float in[2] = {}, out[4] = {};
        Buffer input = Buffer::of(in, 2);
        Buffer output = Buffer::of(out, 4);
        output.device.type = DeviceType::kCUDA;
        try {
          g.all_gather_into_tensor(output, input);
          ADD_FAILURE() << "mixed devices were accepted";
        } catch (const InvalidArgument& e) {
          EXPECT_NE(std::string(e.what()).find("output is on a CUDA device but the input is on the CPU"),
                    std::string::npos)
              << e.what();
        }
      },
      kTimeout, "cpu:cohort,cuda:nccl");
}

}  // namespace
}  // namespace cohort::testing
