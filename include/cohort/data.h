// data.h: what distributed training reads: which samples each rank takes
// (DistributedSampler, the tutorial's DataPartitioner) and the MNIST data
// set, from IDX files or generated.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cohort {

// DistributedSampler is torch.utils.data.distributed.DistributedSampler:
// each of num_replicas ranks gets every num_replicas-th index of a
// permutation of the data set (seeded with seed + epoch, so it changes
// with set_epoch and is the same on every rank). Without drop_last the
// list is padded by repeating its start so that all ranks get
// ceil(N / num_replicas) samples; with it the tail is dropped. The indices
// are the ones torch's sampler yields for the same arguments.
class DistributedSampler {
 public:
  // num_replicas/rank of -1: the default group's world size and rank.
  explicit DistributedSampler(int64_t dataset_size, int num_replicas = -1, int rank = -1, bool shuffle = true,
                              uint64_t seed = 0, bool drop_last = false);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  // indices: this rank's sample indices for the current epoch, in order.
  std::vector<int64_t> indices() const;
  // size: how many indices each rank gets (torch's len(sampler)).
  int64_t size() const { return num_samples_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
  int64_t total_size_ = 0;
};

// DataPartitioner is the tutorial's: shuffle indices 0..N-1 with `seed`
// (the same on every rank), cut them into fractions `sizes`, and let each
// rank use(rank) its part.
class DataPartitioner {
 public:
  DataPartitioner(int64_t dataset_size, const std::vector<double>& sizes, uint64_t seed = 1234);
  const std::vector<int64_t>& use(int partition) const;

 private:
  std::vector<std::vector<int64_t>> partitions_;
};

// Dataset: images [N, 1, 28, 28] float32, normalised as the tutorial's
// transforms.Normalize((0.1307,), (0.3081,)), and labels [N] int64.
struct Dataset {
  at::Tensor images;
  at::Tensor labels;
  int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// read_idx reads an IDX image file (magic 2051) and label file (2049).
// Throws InvalidArgument naming the file for a wrong magic number, a
// truncated file, or counts that disagree.
Dataset read_idx(const std::string& images_path, const std::string& labels_path);
// read_mnist reads MNIST's files from `dir`: train-images-idx3-ubyte and
// train-labels-idx1-ubyte (or t10k-* when train is false).
Dataset read_mnist(const std::string& dir, bool train);
// write_idx writes uint8 images [N, H, W] and labels [N] as IDX files.
void write_idx(const std::string& images_path, const std::string& labels_path, const at::Tensor& images_u8,
               const at::Tensor& labels);

// synthetic_mnist generates n MNIST-like samples: each class is a fixed
// figure of a few strokes (the same for every seed), and each sample draws
// it shifted, scaled, rotated, thickened and noised at random (from
// `seed`). The tutorial's network learns it to well above 95% accuracy.
Dataset synthetic_mnist(int64_t n, uint64_t seed);

}  // namespace cohort
