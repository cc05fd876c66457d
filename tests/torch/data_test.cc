// data_test.cc: tensor collectives, DistributedSampler (against torch's
// own, run by the Python whose torch the build links: COHORT_PYTHON), the
// partitioner, IDX files and the generated MNIST.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "cohort/data.h"
#include "cohort/errors.h"
#include "cohort/tensor.h"
#include "torch/torch_ranks.h"

namespace cohort {
namespace {

using testing::run_torch_ranks;

TEST(TensorCollectives, TakeTensorsWithTorchSignatures) {
  run_torch_ranks(3, [](const GroupPtr& g) {
    const int rank = g->rank();
    at::Tensor t = torch::full({2, 3}, static_cast<float>(rank + 1));
    all_reduce(t, ReduceOp::SUM, g);
    EXPECT_TRUE(torch::equal(t, torch::full({2, 3}, 6.0f)));

    at::Tensor b = torch::arange(4, torch::kInt64) * (rank + 1);
    broadcast(b, /*src=*/2, g);
    EXPECT_TRUE(torch::equal(b, torch::arange(4, torch::kInt64) * 3));

    std::vector<at::Tensor> parts;
    for (int q = 0; q < 3; ++q) parts.push_back(torch::empty({2}, torch::kBFloat16));
    auto work = all_gather(parts, torch::full({2}, static_cast<float>(rank)).to(torch::kBFloat16), g, true);
    work->wait();
    for (int q = 0; q < 3; ++q)
      EXPECT_EQ(parts[static_cast<size_t>(q)][1].item<float>(), static_cast<float>(q));

    // Uneven all_to_all_single: rank r sends r+1 rows to each peer.
    at::Tensor in = torch::full({3 * (rank + 1), 2}, static_cast<double>(rank), torch::kFloat64);
    at::Tensor out = torch::empty({1 + 2 + 3, 2}, torch::kFloat64);
    all_to_all_single(out, in, {1, 2, 3}, {rank + 1, rank + 1, rank + 1}, g);
    EXPECT_EQ(out[0][0].item<double>(), 0.0);
    EXPECT_EQ(out[2][1].item<double>(), 1.0);
    EXPECT_EQ(out[5][0].item<double>(), 2.0);
  });
}

TEST(TensorCollectives, BatchIsendIrecvAndAllReduceCoalescedTakeTorchsArguments) {
  run_torch_ranks(3, [](const GroupPtr& g) {
    const int rank = g->rank(), next = (rank + 1) % 3, prev = (rank + 2) % 3;
    at::Tensor to_next = torch::full({4}, static_cast<float>(rank));
    at::Tensor from_prev = torch::zeros({4});
    auto works = batch_isend_irecv(
        {TensorP2POp{P2POp::kRecv, from_prev, prev}, TensorP2POp{P2POp::kSend, to_next, next}}, g);
    ASSERT_EQ(works.size(), 2u);
    for (auto& w : works) w->wait();
    EXPECT_TRUE(torch::equal(from_prev, torch::full({4}, static_cast<float>(prev))));

    std::vector<at::Tensor> parts = {torch::full({2, 2}, static_cast<double>(rank), torch::kFloat64),
                                     torch::full({3}, static_cast<double>(10 * rank), torch::kFloat64)};
    all_reduce_coalesced(parts, ReduceOp::MAX, g, true)->wait();
    EXPECT_TRUE(torch::equal(parts[0], torch::full({2, 2}, 2.0, torch::kFloat64)));
    EXPECT_TRUE(torch::equal(parts[1], torch::full({3}, 20.0, torch::kFloat64)));
  });
}

TEST(TensorCollectives, OnAGroupThisRankIsNotInEveryCallDoesNothing) {
  // What new_group hands a rank outside the group (its global ranks 1, 2).
  const GroupPtr outside = ProcessGroup::non_member({1, 2}, "group_1");
  at::Tensor t = torch::full({3}, 5.0f);
  EXPECT_TRUE(all_reduce(t, ReduceOp::SUM, outside)->is_completed());
  EXPECT_TRUE(all_reduce_coalesced({t}, ReduceOp::SUM, outside)->is_completed());
  EXPECT_TRUE(broadcast(t, 1, outside)->is_completed());
  EXPECT_EQ(recv(t, 1, outside), -1);  // torch's recv returns -1 there too
  auto works = batch_isend_irecv({TensorP2POp{P2POp::kSend, t, 2}}, outside);
  ASSERT_EQ(works.size(), 1u);
  EXPECT_TRUE(works[0]->is_completed());
  EXPECT_TRUE(torch::equal(t, torch::full({3}, 5.0f)));
  EXPECT_EQ(outside->rank(), -1);
  EXPECT_EQ(outside->size(), -1);
}

TEST(TensorCollectives, ObjectCollectivesCarryIValuesOfEveryKindAndSize) {
  run_torch_ranks(3, [](const GroupPtr& g) {
    const int rank = g->rank();
    // Each rank's object differs in type and size: a string, a tensor, a
    // dict holding a list and a tensor.
    auto object_of = [](int r) -> c10::IValue {
      if (r == 0) return c10::IValue(std::string(100, 'z'));
      if (r == 1) return c10::IValue(torch::arange(1000, torch::kInt64));
      c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
      d.insert("steps", c10::IValue(c10::List<int64_t>({1, 2, 3})));
      d.insert("weights", c10::IValue(torch::full({2, 2}, 0.5)));
      return c10::IValue(d);
    };
    auto same = [&](const c10::IValue& got, int r) {
      if (r == 0) return got.isString() && got.toStringRef() == std::string(100, 'z');
      if (r == 1) return got.isTensor() && torch::equal(got.toTensor(), torch::arange(1000, torch::kInt64));
      if (!got.isGenericDict()) return false;
      auto d = got.toGenericDict();
      return d.at("steps").toIntVector() == std::vector<int64_t>{1, 2, 3} &&
             torch::equal(d.at("weights").toTensor(), torch::full({2, 2}, 0.5));
    };
    std::vector<c10::IValue> all(3);
    all_gather_object(all, object_of(rank), g);
    for (int q = 0; q < 3; ++q) EXPECT_TRUE(same(all[static_cast<size_t>(q)], q)) << "all_gather from " << q;

    std::vector<c10::IValue> list(2);
    if (rank == 1) list = {object_of(2), c10::IValue(int64_t{42})};
    broadcast_object_list(list, /*src=*/1, g);
    EXPECT_TRUE(same(list[0], 2));
    EXPECT_EQ(list[1].toInt(), 42);

    std::vector<c10::IValue> gathered(3);
    gather_object(object_of(rank), rank == 2 ? &gathered : nullptr, /*dst=*/2, g);
    if (rank == 2) {
      for (int q = 0; q < 3; ++q)
        EXPECT_TRUE(same(gathered[static_cast<size_t>(q)], q)) << "gather from " << q;
    }

    std::vector<c10::IValue> inputs;
    if (rank == 0) inputs = {object_of(1), object_of(2), object_of(0)};
    std::vector<c10::IValue> out(1);
    scatter_object_list(out, inputs, /*src=*/0, g);
    EXPECT_TRUE(same(out[0], (rank + 1) % 3));
  });
}

TEST(TensorCollectives, RejectWhatTheyCannotSendByName) {
  try {
    to_buffer(torch::ones({4, 4}).t(), "all_reduce's tensor");
    ADD_FAILURE() << "a transposed tensor was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not contiguous (shape [4, 4], strides [1, 4])"), std::string::npos)
        << e.what();
  }
  try {
    to_buffer(torch::ones({2}, torch::kComplexFloat), "broadcast's tensor");
    ADD_FAILURE() << "a complex tensor was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("broadcast's tensor has dtype ComplexFloat"), std::string::npos)
        << e.what();
  }
}

// The indices torch's own DistributedSampler yields over range(10) with 3
// replicas, seed 7, epoch 2: one line per (shuffle, drop_last, rank), or
// nothing when that Python fails. The build found libtorch through that
// Python's torch package, so the comparison never lacks a reference.
std::vector<std::vector<int64_t>> torch_sampler_lines() {
  const std::string cmd =
      "\"" COHORT_PYTHON_EXECUTABLE
      "\" -c \"import torch.utils.data.distributed as d\n"
      "for sh in (True, False):\n"
      " for dl in (False, True):\n"
      "  for r in range(3):\n"
      "   s=d.DistributedSampler(range(10),num_replicas=3,rank=r,shuffle=sh,seed=7,drop_last=dl)\n"
      "   s.set_epoch(2)\n"
      "   print(' '.join(map(str,s)) or '-')\" 2>/dev/null";
  std::vector<std::vector<int64_t>> lines;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return lines;
  char line[4096];
  while (std::fgets(line, sizeof line, p)) {
    std::vector<int64_t> v;
    for (char* tok = std::strtok(line, " \n"); tok; tok = std::strtok(nullptr, " \n")) {
      if (tok[0] != '-') v.push_back(std::atoll(tok));
    }
    lines.push_back(v);
  }
  pclose(p);
  return lines;
}

TEST(DistributedSampler, YieldsTheIndicesTorchsSamplerYields) {
  const auto expected = torch_sampler_lines();
  ASSERT_FALSE(expected.empty()) << COHORT_PYTHON_EXECUTABLE
                                 << " printed no indices: is its torch importable?";
  ASSERT_EQ(expected.size(), 12u);
  size_t line = 0;
  for (bool shuffle : {true, false}) {
    for (bool drop_last : {false, true}) {
      for (int rank = 0; rank < 3; ++rank) {
        DistributedSampler mine(10, 3, rank, shuffle, 7, drop_last);
        mine.set_epoch(2);
        EXPECT_EQ(mine.indices(), expected[line++])
            << "rank " << rank << " shuffle " << shuffle << " drop_last " << drop_last;
      }
    }
  }
}

TEST(DistributedSampler, CoversTheDataSetPadsEvenlyAndReshufflesPerEpoch) {
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    DistributedSampler s(10, 4, rank, true, 0, false);
    EXPECT_EQ(s.size(), 3);
    for (int64_t i : s.indices()) seen.insert(i);
  }
  EXPECT_EQ(seen.size(), 12u);  // padded to 3 per rank
  for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  DistributedSampler s(1000, 2, 0);
  auto first = s.indices();
  s.set_epoch(1);
  EXPECT_NE(first, s.indices());
  EXPECT_EQ(DistributedSampler(10, 4, 0, false, 0, true).size(), 2);
  EXPECT_THROW(DistributedSampler(10, 2, 2), InvalidArgument);
}

TEST(DataPartitioner, CutsDisjointPartsOfTheGivenFractions) {
  DataPartitioner p(1000, {0.7, 0.2, 0.1});
  std::set<int64_t> all;
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    total += p.use(i).size();
    all.insert(p.use(i).begin(), p.use(i).end());
  }
  EXPECT_EQ(p.use(0).size(), 700u);
  EXPECT_EQ(p.use(2).size(), 100u);
  EXPECT_EQ(all.size(), total);
  EXPECT_THROW(p.use(3), InvalidArgument);
}

TEST(Mnist, ReadsTheIdxFilesItWrote) {
  const std::string dir = ::testing::TempDir();
  at::Tensor images = torch::randint(0, 256, {5, 28, 28}, torch::kByte);
  at::Tensor labels = torch::tensor({3, 1, 4, 1, 5}, torch::kLong);
  write_idx(dir + "/train-images-idx3-ubyte", dir + "/train-labels-idx1-ubyte", images, labels);
  Dataset d = read_mnist(dir, true);
  ASSERT_EQ(d.size(), 5);
  EXPECT_EQ(d.images.sizes(), (std::vector<int64_t>{5, 1, 28, 28}));
  EXPECT_TRUE(torch::equal(d.labels, labels));
  at::Tensor back = (d.images.squeeze(1) * 0.3081 + 0.1307) * 255;
  EXPECT_TRUE(torch::allclose(back, images.to(torch::kFloat), 0, 1e-3));
  // A truncated image file, and a label file in the image slot.
  {
    std::ofstream cut(dir + "/cut-images", std::ios::binary);
    std::ifstream whole(dir + "/train-images-idx3-ubyte", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(whole)), {});
    cut.write(bytes.data(), 100);
  }
  try {
    read_idx(dir + "/cut-images", dir + "/train-labels-idx1-ubyte");
    ADD_FAILURE() << "a truncated file was read";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("cut-images is truncated: expected 3920 bytes"), std::string::npos)
        << e.what();
  }
  try {
    read_idx(dir + "/train-labels-idx1-ubyte", dir + "/train-labels-idx1-ubyte");
    ADD_FAILURE() << "a label file was read as images";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("magic number 2049, expected 2051"), std::string::npos) << e.what();
  }
}

TEST(Mnist, SyntheticDataIsDeterministicAndHasEveryClass) {
  Dataset a = synthetic_mnist(500, 1), b = synthetic_mnist(500, 1), c = synthetic_mnist(500, 2);
  EXPECT_TRUE(torch::equal(a.images, b.images));
  EXPECT_FALSE(torch::equal(a.images, c.images));
  EXPECT_EQ(a.images.sizes(), (std::vector<int64_t>{500, 1, 28, 28}));
  auto counts = torch::bincount(a.labels, {}, 10);
  EXPECT_GT(counts.min().item<int64_t>(), 25);
  // Classes differ: the mean images of two classes are far apart.
  at::Tensor m0 = a.images.index({a.labels == 0}).mean(0), m1 = a.images.index({a.labels == 1}).mean(0);
  EXPECT_GT((m0 - m1).abs().mean().item<float>(), 0.1f);
}

}  // namespace
}  // namespace cohort
