// The collective checks of the matrix (docs/design.md), shared by every
// harness: each runs on one rank of a group and checks its results against
// reference.h. The ranks-as-threads matrix (collective_matrix_test.cc) and
// the MPI backend's program under mpirun (mpi_collectives_test.cc) call the
// same functions.
#include "process_group/collective_checks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "process_group/reference.h"
#include "transport/shm/host_slots.h"

namespace cohort::testing {
namespace {

// The most bytes a rank's post holds on one host: the small checks below
// take sizes on both sides of it.
constexpr size_t kPostBytes = shm::HostSlots::kPostBytes;

std::string label(DType d, ReduceOp op, size_t n) {
  return std::string(dtype_name(d)) + " " + reduce_op_name(op) + " x" + std::to_string(n);
}

// Per-rank counts that differ: rank q contributes q+1 (or 0 for rank 1).
size_t uneven(int q, size_t scale) {
  return q == 1 ? 0 : (static_cast<size_t>(q) + 1) * scale;
}

}  // namespace

void check_all_reduce_every_dtype_op_and_size(ProcessGroup& g) {
  const int world = g.size();
  for (DType d : all_dtypes()) {
    for (ReduceOp op : ops_for(d)) {
      for (size_t n : counts_for(d, op)) {
        TypedBuffer buf(d, n);
        fill_contributions(buf, op, g.rank());
        AllReduceOptions o;
        o.op = op;
        g.all_reduce(buf.view(), o);
        const PeriodicValues result = PeriodicValues::reduction(d, op, world);
        for (size_t i = 0; i < n; ++i) {
          double want = result.at(i);
          if (!close_enough(d, buf.at(i), want)) {
            ADD_FAILURE() << "rank " << g.rank() << " " << label(d, op, n) << " [" << i << "] = " << buf.at(i)
                          << ", expected " << want;
            break;
          }
        }
      }
    }
  }
}

// all_reduce_coalesced over pieces allocated apart, cut differently on each
// rank (one of them empty), the total agreeing: small (packed into one
// buffer) and large (on one host the ranks read each other's pieces in
// place), with every float32 op.
void check_all_reduce_coalesced_with_splits_that_differ_by_rank(ProcessGroup& g) {
  const int world = g.size();
  const DType d = DType::kFloat32;
  // The last case cuts rank 0's buffer into ~100000 pieces: more than a
  // shared-memory slot can list (1 MiB / 16 bytes a piece), so rank 0
  // publishes its table from its own memory and the others from their slot.
  struct Case {
    size_t n;
    bool tiny_pieces_on_rank0;
  };
  for (Case c : {Case{10, false}, Case{300001, false}, Case{300001, true}}) {
    const size_t n = c.n;
    for (ReduceOp op : ops_for(d)) {
      if (c.tiny_pieces_on_rank0 && op.kind != ReduceOp::SUM) continue;
      const bool tiny = c.tiny_pieces_on_rank0 && g.rank() == 0;
      std::vector<TypedBuffer> pieces;
      for (size_t at = 0, k = 0; at < n; ++k) {
        const size_t len =
            std::min(n - at, tiny ? 1 + k % 5 : n / static_cast<size_t>(g.rank() + 2) + 7 * k + 1);
        pieces.emplace_back(d, len);
        fill_contributions(pieces.back(), op, g.rank(), at);
        if (k == 0) pieces.emplace_back(d, 0);
        at += len;
      }
      std::vector<Buffer> views;
      for (TypedBuffer& p : pieces) views.push_back(p.view());
      AllReduceOptions o;
      o.op = op;
      g.all_reduce_coalesced(views, o);
      const PeriodicValues result = PeriodicValues::reduction(d, op, world);
      size_t at = 0;
      for (const TypedBuffer& p : pieces) {
        for (size_t i = 0; i < p.count(); ++i, ++at) {
          const double want = result.at(at);
          if (!close_enough(d, p.at(i), want)) {
            ADD_FAILURE() << "rank " << g.rank() << " " << label(d, op, n) << " (" << pieces.size()
                          << " pieces) [" << at << "] = " << p.at(i) << ", expected " << want;
            return;
          }
        }
      }
    }
  }
}

void check_reduce_every_dtype_op_and_size(ProcessGroup& g) {
  const int world = g.size();
  for (int root : {0, world - 1}) {
    for (DType d : all_dtypes()) {
      for (ReduceOp op : ops_for(d)) {
        for (size_t n : counts_for(d, op)) {
          TypedBuffer buf(d, n);
          fill_contributions(buf, op, g.rank());
          ReduceOptions o;
          o.op = op;
          o.dst = root;
          g.reduce(buf.view(), o);
          const PeriodicValues want_here = g.rank() == root ? PeriodicValues::reduction(d, op, world)
                                                            : PeriodicValues::contribution_of(d, op, g.rank());
          for (size_t i = 0; i < n; ++i) {
            double want = want_here.at(i);
            if (!close_enough(d, buf.at(i), want)) {
              ADD_FAILURE() << "rank " << g.rank() << " root " << root << " " << label(d, op, n) << " [" << i
                            << "] = " << buf.at(i) << ", expected " << want;
              break;
            }
          }
        }
      }
    }
  }
}

void check_reduce_scatter_every_dtype_op_and_size(ProcessGroup& g) {
  const int world = g.size();
  for (DType d : all_dtypes()) {
    for (ReduceOp op : ops_for(d)) {
      for (size_t n : counts_for(d, op)) {
        // Block q holds elements [q*n, (q+1)*n) of a virtual vector, so
        // every block's values differ.
        TypedBuffer input(d, n * static_cast<size_t>(world));
        fill_contributions(input, op, g.rank());
        TypedBuffer output(d, n);
        ReduceScatterOptions o;
        o.op = op;
        g.reduce_scatter_tensor(output.view(), input.view(), o);
        const size_t base = static_cast<size_t>(g.rank()) * n;
        const PeriodicValues result = PeriodicValues::reduction(d, op, world);
        for (size_t i = 0; i < n; ++i) {
          double want = result.at(base + i);
          if (!close_enough(d, output.at(i), want)) {
            ADD_FAILURE() << "rank " << g.rank() << " " << label(d, op, n) << " [" << i
                          << "] = " << output.at(i) << ", expected " << want;
            break;
          }
        }
      }
    }
  }
}

void check_broadcast_from_every_root(ProcessGroup& g) {
  const int world = g.size();
  for (int root = 0; root < world; ++root) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{13}, size_t{700001}}) {
      std::vector<int32_t> v(n, -1);
      if (g.rank() == root) {
        for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 3 + root);
      }
      BroadcastOptions o;
      o.src = root;
      g.broadcast(Buffer::of(v), o);
      for (size_t i = 0; i < n; ++i) {
        if (v[i] != static_cast<int32_t>(i * 3 + root)) {
          ADD_FAILURE() << "rank " << g.rank() << " root " << root << " n " << n << " [" << i
                        << "] = " << v[i];
          break;
        }
      }
    }
  }
}

void check_all_gather_uneven_and_into_one_tensor(ProcessGroup& g) {
  const int world = g.size();
  // 300007 floats into one tensor: several segments of a pipelined
  // (hierarchical) all_gather, the last one short.
  for (size_t scale : {size_t{1}, size_t{5}, size_t{100003}, size_t{300007}}) {
    // The lists' blocks grow with the rank (uneven), so what each rank
    // receives grows as the square of the world: from 3 ranks on the large
    // scales shrink with the world, which keeps the largest blocks over a
    // megabyte (at 16 ranks 37500 doubles a rank: 0.3 to 4.8 MB) where 16
    // ranks used to take 5 GB, mostly page faults.
    const size_t list_scale = scale > 5 && world > 2 ? scale * 2 / static_cast<size_t>(world) : scale;
    std::vector<double> mine(uneven(g.rank(), list_scale));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = g.rank() * 1000.0 + static_cast<double>(i);
    std::vector<std::vector<double>> outs(static_cast<size_t>(world));
    std::vector<Buffer> views;
    for (int q = 0; q < world; ++q) {
      outs[q].assign(uneven(q, list_scale), -1);
      views.push_back(Buffer::of(outs[q]));
    }
    g.all_gather(views, Buffer::of(mine));
    for (int q = 0; q < world; ++q) {
      for (size_t i = 0; i < outs[q].size(); ++i) {
        ASSERT_EQ(outs[q][i], q * 1000.0 + static_cast<double>(i)) << "rank " << g.rank() << " block " << q;
      }
    }
    std::vector<float> same(scale, static_cast<float>(g.rank()));
    std::vector<float> flat(scale * static_cast<size_t>(world), -1);
    g.all_gather_into_tensor(Buffer::of(flat), Buffer::of(same));
    for (size_t i = 0; i < flat.size(); ++i) ASSERT_EQ(flat[i], static_cast<float>(i / scale));
  }
}

void check_gather_and_scatter_at_every_root(ProcessGroup& g) {
  const int world = g.size();
  for (int root = 0; root < world; ++root) {
    // The large count (several segments a peer) at the first, a middle
    // and the last root: which root it is changes only the peers' order,
    // which the small counts check at every root; at 8 ranks every root
    // made this check the matrix's slowest under the sanitizers.
    const bool large_here = root == 0 || root == world / 2 || root == world - 1;
    for (size_t n : {size_t{0}, size_t{3}, size_t{300007}}) {
      if (n > 3 && !large_here) continue;
      std::vector<int64_t> mine(n, g.rank() + 10 * root);
      std::vector<std::vector<int64_t>> outs;
      std::vector<Buffer> views;
      if (g.rank() == root) {
        outs.assign(static_cast<size_t>(world), std::vector<int64_t>(n, -1));
        for (auto& o : outs) views.push_back(Buffer::of(o));
      }
      GatherOptions go;
      go.dst = root;
      g.gather(views, Buffer::of(mine), go);
      for (size_t q = 0; q < outs.size(); ++q) {
        for (int64_t v : outs[q]) ASSERT_EQ(v, static_cast<int64_t>(q) + 10 * root);
      }
      std::vector<int64_t> got(n, -1);
      std::vector<std::vector<int64_t>> ins;
      std::vector<Buffer> in_views;
      if (g.rank() == root) {
        for (int q = 0; q < world; ++q) ins.emplace_back(n, q * 7 + root);
        for (auto& i : ins) in_views.push_back(Buffer::of(i));
      }
      ScatterOptions so;
      so.src = root;
      g.scatter(Buffer::of(got), in_views, so);
      for (int64_t v : got) ASSERT_EQ(v, g.rank() * 7 + root);
    }
  }
}

void check_reduce_scatter_uneven_blocks(ProcessGroup& g) {
  const int world = g.size();
  std::vector<std::vector<int32_t>> ins;
  std::vector<Buffer> views;
  for (int q = 0; q < world; ++q) {
    ins.emplace_back(uneven(q, 1001), g.rank() + q);
    views.push_back(Buffer::of(ins.back()));
  }
  std::vector<int32_t> out(uneven(g.rank(), 1001), -1);
  g.reduce_scatter(Buffer::of(out), views);
  // Sum over ranks r of (r + my rank).
  int32_t want = world * (world - 1) / 2 + world * g.rank();
  for (int32_t v : out) ASSERT_EQ(v, want);
}

void check_reduce_scatter_tensor_in_place(ProcessGroup& g) {
  const int world = g.size();
  // NCCL-style in place: the output is this rank's block of the input;
  // small (through the posts, on one host), larger, and over a megabyte a
  // block (several segments a step on the network ring, a short last one).
  for (const size_t n : {size_t{3}, size_t{1001}, size_t{300007}}) {
    std::vector<int32_t> data(n * static_cast<size_t>(world));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i % 7) + g.rank();
    Buffer output = Buffer::of(data.data() + static_cast<size_t>(g.rank()) * n, n);
    g.reduce_scatter_tensor(output, Buffer::of(data));
    for (size_t i = 0; i < n; ++i) {
      size_t global = static_cast<size_t>(g.rank()) * n + i;
      int32_t want = static_cast<int32_t>(global % 7) * world + world * (world - 1) / 2;
      ASSERT_EQ(output.count, n);
      ASSERT_EQ(data[global], want) << "rank " << g.rank() << " [" << i << "]";
    }
  }
}

void check_all_to_all_uneven_splits(ProcessGroup& g) {
  const int world = g.size();
  const int r = g.rank();
  // Rank r sends (r + q) % 3 + 1 elements to rank q, valued 100*r + q.
  auto count = [](int from, int to) { return static_cast<size_t>((from + to) % 3 + 1) * 1000; };
  std::vector<std::vector<float>> ins, outs;
  std::vector<Buffer> in_views, out_views;
  for (int q = 0; q < world; ++q) {
    ins.emplace_back(count(r, q), static_cast<float>(100 * r + q));
    outs.emplace_back(count(q, r), -1.0f);
  }
  for (int q = 0; q < world; ++q) {
    in_views.push_back(Buffer::of(ins[q]));
    out_views.push_back(Buffer::of(outs[q]));
  }
  g.all_to_all(out_views, in_views);
  for (int q = 0; q < world; ++q) {
    for (float v : outs[q]) ASSERT_EQ(v, static_cast<float>(100 * q + r)) << "from rank " << q;
  }
  std::vector<size_t> in_splits, out_splits;
  std::vector<float> flat_in, flat_out;
  for (int q = 0; q < world; ++q) {
    in_splits.push_back(count(r, q));
    out_splits.push_back(count(q, r));
    flat_in.insert(flat_in.end(), count(r, q), static_cast<float>(100 * r + q));
  }
  size_t total = 0;
  for (size_t s : out_splits) total += s;
  flat_out.assign(total, -1);
  g.all_to_all_single(Buffer::of(flat_out), Buffer::of(flat_in), out_splits, in_splits);
  size_t off = 0;
  for (int q = 0; q < world; ++q) {
    for (size_t i = 0; i < out_splits[q]; ++i) ASSERT_EQ(flat_out[off + i], static_cast<float>(100 * q + r));
    off += out_splits[q];
  }
}

// Blocks of up to 1.2 MB, uneven by pair: on one host the exchange goes
// through slot-sized chunks, and the ranks agree on how many from the
// largest block any of them sends.
void check_all_to_all_even_splits(ProcessGroup& g) {
  const int world = g.size();
  const int r = g.rank();
  // Element k of rank q's block for rank t is (31q + 7t + k) % 101.
  auto value = [](int from, int to, size_t k) { return static_cast<int>((31 * from + 7 * to + k) % 101); };
  for (size_t block : {size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<int32_t> in(block * world), out(block * world, -1);
    std::vector<double> din(block * world), dout(block * world, -1);
    std::vector<uint8_t> bin(block * world), bout(block * world, 255);
    for (int q = 0; q < world; ++q) {
      for (size_t k = 0; k < block; ++k) {
        in[q * block + k] = value(r, q, k);
        din[q * block + k] = value(r, q, k) + 0.5;
        bin[q * block + k] = static_cast<uint8_t>(value(r, q, k));
      }
    }
    g.all_to_all_single(Buffer::of(out), Buffer::of(in), {}, {});
    g.all_to_all_single(Buffer::of(dout), Buffer::of(din), {}, {});
    // The list form, blocks in separate buffers.
    std::vector<Buffer> in_views, out_views;
    for (int q = 0; q < world; ++q) {
      in_views.push_back(Buffer::of(bin.data() + q * block, block));
      out_views.push_back(Buffer::of(bout.data() + q * block, block));
    }
    g.all_to_all(out_views, in_views);
    for (int q = 0; q < world; ++q) {
      for (size_t k = 0; k < block; ++k) {
        ASSERT_EQ(out[q * block + k], value(q, r, k)) << "int32 from rank " << q << ", block " << block;
        ASSERT_EQ(dout[q * block + k], value(q, r, k) + 0.5) << "float64 from rank " << q;
        ASSERT_EQ(bout[q * block + k], value(q, r, k)) << "uint8 from rank " << q;
      }
    }
  }
}

void check_all_to_all_uneven_splits_larger_than_a_slot(ProcessGroup& g) {
  const int world = g.size();
  const int r = g.rank();
  auto count = [](int from, int to) { return static_cast<size_t>((from + 2 * to) % 3) * 150001 + 7; };
  std::vector<size_t> in_splits, out_splits;
  std::vector<int32_t> flat_in;
  for (int q = 0; q < world; ++q) {
    in_splits.push_back(count(r, q));
    out_splits.push_back(count(q, r));
    for (size_t i = 0; i < count(r, q); ++i)
      flat_in.push_back(static_cast<int32_t>(1000000 * r + 1000 * q) + static_cast<int32_t>(i % 997));
  }
  std::vector<int32_t> flat_out(std::accumulate(out_splits.begin(), out_splits.end(), size_t{0}), -1);
  g.all_to_all_single(Buffer::of(flat_out), Buffer::of(flat_in), out_splits, in_splits);
  size_t off = 0;
  for (int q = 0; q < world; ++q) {
    for (size_t i = 0; i < out_splits[q]; ++i) {
      ASSERT_EQ(flat_out[off + i],
                static_cast<int32_t>(1000000 * q + 1000 * r) + static_cast<int32_t>(i % 997))
          << "from rank " << q << " [" << i << "]";
    }
    off += out_splits[q];
  }
}

// Many small broadcasts in a row, from changing roots, of sizes on both
// sides of the posts' limit (kPostBytes), with an all_reduce now and then: on
// one host a root may run many broadcasts ahead of its readers, through
// its ring of posts (32 of them), and must never overwrite one not yet
// read. One reader per root sleeps early in the root's run of 60, so the
// root does get more than 32 ahead of it.
void check_small_broadcasts_run_ahead_from_changing_roots(ProcessGroup& g) {
  const int world = g.size();
  // int32 elements: 4 B to 1.17 posts. Only posts in the first 45 of a
  // run: a broadcast through the slots holds the root within two of its
  // readers.
  constexpr size_t kPost = kPostBytes / sizeof(int32_t);
  const size_t sizes[] = {1, 2, 10, kPost - 1, kPost, kPost + 1, kPost * 117 / 100};
  for (int i = 0; i < 300; ++i) {
    const int root = (i / 60) % world;
    if (i % 60 == 5 && g.rank() == (root + 1) % world)
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const size_t n = sizes[static_cast<size_t>(i) % (i % 60 < 45 ? 5 : 7)];
    std::vector<int32_t> data(n, -1);
    if (g.rank() == root) {
      for (size_t k = 0; k < n; ++k) data[k] = i * 1000 + static_cast<int32_t>(k);
    }
    BroadcastOptions o;
    o.src = root;
    g.broadcast(Buffer::of(data), o);
    for (size_t k = 0; k < n; ++k)
      ASSERT_EQ(data[k], i * 1000 + static_cast<int32_t>(k)) << "broadcast " << i;
    if (i % 100 == 99) {
      std::vector<int64_t> ones(3, 1);  // through the posts, as the broadcasts
      g.all_reduce(Buffer::of(ones));
      ASSERT_EQ(ones, std::vector<int64_t>(3, world));
    }
  }
}

// Small reductions in a row to changing roots: on one host the others
// write into their posts and go on without waiting for the root, so they
// run ahead of it (the root sleeps early in its run of 60, so they get
// more than 32 ahead) and must never overwrite a post it has not read.
void check_small_reduces_run_ahead_of_their_root(ProcessGroup& g) {
  const int world = g.size();
  // int64 elements: 8 B to two posts. Only posts in the first 45 of a run:
  // a reduction through the slots holds every rank with the root.
  constexpr size_t kPost = kPostBytes / sizeof(int64_t);
  const size_t sizes[] = {1, 3, 64, kPost - 1, kPost, kPost + 1, 2 * kPost};
  for (int i = 0; i < 300; ++i) {
    const int root = (i / 60) % world;
    if (i % 60 == 5 && g.rank() == root) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const size_t n = sizes[static_cast<size_t>(i) % (i % 60 < 45 ? 5 : 7)];
    std::vector<int64_t> data(n);
    for (size_t k = 0; k < n; ++k) data[k] = (g.rank() + 1) * (i * 1000 + static_cast<int64_t>(k));
    ReduceOptions o;
    o.dst = root;
    g.reduce(Buffer::of(data), o);
    if (g.rank() != root) continue;
    const int64_t ranks = world * (world + 1) / 2;  // the sum of rank + 1
    for (size_t k = 0; k < n; ++k)
      ASSERT_EQ(data[k], ranks * (i * 1000 + static_cast<int64_t>(k))) << "reduce " << i;
  }
}

// Small all_gathers, all_reduces and reduce_scatters (through the posts on
// one host)
// where one rank now and then comes late, so that the others wait for its
// post rather than find it there, and where the ranks then run ahead of
// each other, with values that change every time.
void check_small_exchanges_with_a_late_rank(ProcessGroup& g) {
  const int world = g.size();
  const int r = g.rank();
  for (int i = 0; i < 120; ++i) {
    if (i % 10 == 3 && r == (i / 10) % world) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // int32 elements per rank: through the posts up to a post for the
    // all_gather and the all_reduce, up to a post in all for the
    // reduce_scatter (kPost / world: exactly one), through the slots
    // beyond (ranks that outnumber the cores: from 1 KiB in all).
    constexpr size_t kPost = kPostBytes / sizeof(int32_t);
    const size_t sizes[] = {1, 2, 3, 4, 5, kPost / static_cast<size_t>(world), kPost, kPost + 1};
    const size_t n = sizes[i % 8];
    std::vector<int32_t> in(n), gathered(n * static_cast<size_t>(world), -1);
    for (size_t k = 0; k < n; ++k) in[k] = i * 100000 + r * 100 + static_cast<int32_t>(k);
    g.all_gather_into_tensor(Buffer::of(gathered), Buffer::of(in));
    for (int q = 0; q < world; ++q) {
      for (size_t k = 0; k < n; ++k) {
        ASSERT_EQ(gathered[static_cast<size_t>(q) * n + k], i * 100000 + q * 100 + static_cast<int32_t>(k))
            << "all_gather " << i << " from rank " << q;
      }
    }
    // The all_reduce: in the stamp's word up to 8 bytes, through the posts
    // up to a post, through the slots beyond.
    std::vector<int32_t> summed = in;
    g.all_reduce(Buffer::of(summed));
    for (size_t k = 0; k < n; ++k) {
      ASSERT_EQ(summed[k], world * (i * 100000 + static_cast<int32_t>(k)) + 100 * world * (world - 1) / 2)
          << "all_reduce " << i;
    }
    std::vector<int32_t> blocks(n * static_cast<size_t>(world)), mine(n, -1);
    for (size_t k = 0; k < blocks.size(); ++k) blocks[k] = i + r + static_cast<int32_t>(k);
    g.reduce_scatter_tensor(Buffer::of(mine), Buffer::of(blocks));
    for (size_t k = 0; k < n; ++k) {
      const int32_t at = static_cast<int32_t>(static_cast<size_t>(r) * n + k);
      ASSERT_EQ(mine[k], world * (i + at) + world * (world - 1) / 2) << "reduce_scatter " << i;
    }
  }
}

void check_barrier_and_async_work_in_order(ProcessGroup& g) {
  const int world = g.size();
  std::vector<std::shared_ptr<Work>> works;
  std::vector<std::vector<int32_t>> bufs(8, std::vector<int32_t>(1000, g.rank()));
  for (auto& b : bufs) {
    AllReduceOptions o;
    o.async_op = true;
    works.push_back(g.all_reduce(Buffer::of(b), o));
  }
  BarrierOptions bo;
  bo.async_op = true;
  works.push_back(g.barrier(bo));
  for (auto& w : works) EXPECT_TRUE(w->wait());
  for (auto& b : bufs) EXPECT_EQ(b[999], world * (world - 1) / 2);
  for (auto& w : works) EXPECT_TRUE(w->is_success());
}

void check_point_to_point_ring_and_any_source(ProcessGroup& g) {
  const int world = g.size();
  const int r = g.rank();
  const int right = (r + 1) % world, left = (r + world - 1) % world;
  // The tutorial's pattern: isend right, recv left, wait.
  for (size_t n : {size_t{1}, size_t{4099}, size_t{1 << 20}}) {
    std::vector<float> out(n, static_cast<float>(r)), in(n, -1);
    auto s = g.isend(Buffer::of(out), right, 7);
    P2POptions po;
    po.tag = 7;
    g.recv(Buffer::of(in), left, po);
    s->wait();
    ASSERT_EQ(in[n - 1], static_cast<float>(left));
  }
  // irecv first on every rank, then send: must not deadlock.
  std::vector<int32_t> got(10, -1), mine(10, r);
  auto pending = g.irecv(Buffer::of(got), left, 3);
  g.send(Buffer::of(mine), right, [] {
    P2POptions o;
    o.tag = 3;
    return o;
  }());
  pending->wait();
  EXPECT_EQ(got[0], left);
  // Receive from any source: rank 0 hears from everyone, in any order.
  if (r == 0) {
    std::vector<bool> heard(static_cast<size_t>(world), false);
    for (int k = 1; k < world; ++k) {
      int32_t v = -1;
      auto w = g.irecv(Buffer::of(&v, 1), kAnySourceRank, 11);
      w->wait();
      ASSERT_EQ(v, w->source_rank()) << "the payload names its sender";
      heard[v] = true;
    }
    for (int k = 1; k < world; ++k) EXPECT_TRUE(heard[k]);
  } else {
    int32_t v = r;
    g.isend(Buffer::of(&v, 1), 0, 11)->wait();
  }
  // batch_isend_irecv: everyone exchanges with both neighbours at once.
  std::vector<double> to_left(50, r), to_right(50, r + 0.5), from_left(50), from_right(50);
  auto works = g.batch_isend_irecv({{P2POp::kSend, Buffer::of(to_left), left, 1},
                                    {P2POp::kSend, Buffer::of(to_right), right, 2},
                                    {P2POp::kRecv, Buffer::of(from_left), left, 2},
                                    {P2POp::kRecv, Buffer::of(from_right), right, 1}});
  for (auto& w : works) w->wait();
  EXPECT_EQ(from_left[0], left + 0.5);
  EXPECT_EQ(from_right[0], right);
  g.barrier();
}

void check_isend_moves_while_sender_waits_in_collective(ProcessGroup& g) {
  const int world = g.size();
  // Rank 0's message is larger than a shared-memory ring, so it is still
  // in flight when rank 0 enters the all_reduce, where it waits for rank
  // 1, which first waits for the message.
  std::vector<float> big(1 << 20, 2.5f);
  std::shared_ptr<Work> sent;
  if (g.rank() == 0) sent = g.isend(Buffer::of(big), 1, 5);
  if (g.rank() == 1) {
    std::fill(big.begin(), big.end(), 0.0f);
    P2POptions o;
    o.tag = 5;
    g.recv(Buffer::of(big), 0, o);
    EXPECT_EQ(big.back(), 2.5f);
  }
  std::vector<int64_t> one(1000, 1);
  g.all_reduce(Buffer::of(one));
  EXPECT_EQ(one[999], world);
  if (sent) sent->wait();
}

// Blocking send and recv run on the caller's thread when the group is
// idle, isend and irecv through the worker: mixed, the messages between two
// ranks must still arrive in the order of the calls.
void check_blocking_point_to_point_keeps_order_with_isend(ProcessGroup& g) {
  std::vector<float> big(1 << 20);  // larger than a ring: still in flight
  int32_t small = -1, last = -1;
  if (g.rank() == 0) {
    std::fill(big.begin(), big.end(), 1.5f);
    small = 7;
    last = 8;
    auto queued = g.isend(Buffer::of(big), 1, 1);
    auto sent = g.send(Buffer::of(&small, 1), 1, [] {
      P2POptions o;
      o.tag = 2;
      return o;
    }());
    EXPECT_NE(sent->description().find("send to 1 tag 2 (p2p #"), std::string::npos) << sent->description();
    g.send(Buffer::of(&last, 1), 1, [] {
      P2POptions o;
      o.tag = 3;
      return o;
    }());
    queued->wait();
  } else if (g.rank() == 1) {
    P2POptions o;
    o.tag = 1;
    g.recv(Buffer::of(big), 0, o);
    o.tag = 2;
    g.recv(Buffer::of(&small, 1), 0, o);
    o.tag = 3;
    auto any = g.recv(Buffer::of(&last, 1), kAnySourceRank, o);
    EXPECT_EQ(any->source_rank(), 0) << "a blocking recv from any rank names its sender";
    EXPECT_EQ(big.back(), 1.5f);
    EXPECT_EQ(small, 7);
    EXPECT_EQ(last, 8);
  }
  // Back and forth, blocking on both sides: every value arrives in turn.
  if (g.rank() < 2) {
    const int peer = 1 - g.rank();
    int64_t value = 0;
    for (int i = 0; i < 200; ++i) {
      int64_t got = -1;
      if (g.rank() == 0) {
        g.send(Buffer::of(&value, 1), peer);
        g.recv(Buffer::of(&got, 1), peer);
        ASSERT_EQ(got, value + 1);
      } else {
        g.recv(Buffer::of(&got, 1), peer);
        ASSERT_EQ(got, value);
        int64_t answer = got + 1;
        g.send(Buffer::of(&answer, 1), peer);
      }
      value += 2;
    }
  }
  g.barrier();
}

const std::vector<CollectiveCheck>& collective_checks() {
  static const std::vector<CollectiveCheck> kChecks = {
      {"AllReduceEveryDtypeOpAndSize", check_all_reduce_every_dtype_op_and_size, 1},
      {"ReduceEveryDtypeOpAndSizeToFirstAndLastRank", check_reduce_every_dtype_op_and_size, 1},
      {"AllReduceCoalescedWithSplitsThatDifferByRank",
       check_all_reduce_coalesced_with_splits_that_differ_by_rank, 1},
      {"ReduceScatterEveryDtypeOpAndSize", check_reduce_scatter_every_dtype_op_and_size, 1},
      {"BroadcastFromEveryRoot", check_broadcast_from_every_root, 1},
      {"AllGatherWithUnevenCountsAndIntoOneTensor", check_all_gather_uneven_and_into_one_tensor, 1},
      {"GatherAndScatterAtEveryRoot", check_gather_and_scatter_at_every_root, 1},
      {"ReduceScatterWithUnevenBlocks", check_reduce_scatter_uneven_blocks, 1},
      {"ReduceScatterTensorInPlace", check_reduce_scatter_tensor_in_place, 1},
      {"AllToAllListsAndSingleWithUnevenSplits", check_all_to_all_uneven_splits, 1},
      {"AllToAllUnevenSplitsLargerThanASlot", check_all_to_all_uneven_splits_larger_than_a_slot, 1},
      {"SmallBroadcastsRunAheadFromChangingRoots", check_small_broadcasts_run_ahead_from_changing_roots, 1},
      {"SmallReducesRunAheadOfTheirRoot", check_small_reduces_run_ahead_of_their_root, 1},
      {"SmallExchangesWithALateRank", check_small_exchanges_with_a_late_rank, 1},
      {"BarrierAndAsyncWorkInOrder", check_barrier_and_async_work_in_order, 1},
      {"PointToPointRingAndAnySource", check_point_to_point_ring_and_any_source, 2},
      {"IsendKeepsMovingWhileItsSenderWaitsInACollective", check_isend_moves_while_sender_waits_in_collective,
       2},
      {"BlockingPointToPointKeepsOrderWithIsend", check_blocking_point_to_point_keeps_order_with_isend, 2},
  };
  return kChecks;
}

}  // namespace cohort::testing
