// data.cc: samplers and the MNIST data set (see include/cohort/data.h).
#include "cohort/data.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>

#include "cohort/distributed.h"
#include "cohort/errors.h"

namespace cohort {

// ---- DistributedSampler ---------------------------------------------------

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (num_replicas_ < 0) num_replicas_ = get_world_size();
  if (rank_ < 0) rank_ = get_rank();
  if (num_replicas_ < 1) throw InvalidArgument("DistributedSampler: num_replicas must be at least 1");
  if (rank_ >= num_replicas_) {
    throw InvalidArgument("DistributedSampler: invalid rank " + std::to_string(rank_) +
                          ", rank should be in the interval [0, " + std::to_string(num_replicas_ - 1) + "]");
  }
  if (dataset_size_ < 0) throw InvalidArgument("DistributedSampler: negative dataset size");
  // torch's arithmetic, so that len(sampler) agrees.
  if (drop_last_ && dataset_size_ % num_replicas_ != 0) {
    num_samples_ = (dataset_size_ - num_replicas_ + num_replicas_ - 1) / num_replicas_;
    if (dataset_size_ < num_replicas_) num_samples_ = 0;
  } else {
    num_samples_ = (dataset_size_ + num_replicas_ - 1) / num_replicas_;
  }
  total_size_ = num_samples_ * num_replicas_;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  if (shuffle_) {
    // torch.randperm with a generator seeded seed + epoch: the same
    // permutation torch's sampler draws.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch_));
    at::Tensor perm = at::randperm(dataset_size_, gen, at::kLong);
    std::copy(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + dataset_size_, all.begin());
  } else {
    std::iota(all.begin(), all.end(), 0);
  }
  if (!drop_last_) {
    const size_t n = all.size();
    for (size_t i = 0; all.size() < static_cast<size_t>(total_size_) && n > 0; ++i) all.push_back(all[i % n]);
  } else {
    all.resize(static_cast<size_t>(total_size_));
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total_size_; i += num_replicas_) mine.push_back(all[static_cast<size_t>(i)]);
  return mine;
}

// ---- DataPartitioner ------------------------------------------------------

DataPartitioner::DataPartitioner(int64_t dataset_size, const std::vector<double>& sizes, uint64_t seed) {
  std::vector<int64_t> indexes(static_cast<size_t>(dataset_size));
  std::iota(indexes.begin(), indexes.end(), 0);
  std::mt19937_64 rng(seed);  // the same on every rank
  std::shuffle(indexes.begin(), indexes.end(), rng);
  size_t start = 0;
  for (double fraction : sizes) {
    const size_t length = static_cast<size_t>(fraction * static_cast<double>(dataset_size));
    const size_t end = std::min(indexes.size(), start + length);
    partitions_.emplace_back(indexes.begin() + static_cast<long>(start),
                             indexes.begin() + static_cast<long>(end));
    start = end;
  }
}

const std::vector<int64_t>& DataPartitioner::use(int partition) const {
  if (partition < 0 || static_cast<size_t>(partition) >= partitions_.size()) {
    throw InvalidArgument("DataPartitioner::use: partition " + std::to_string(partition) +
                          " does not exist (" + std::to_string(partitions_.size()) + " partitions)");
  }
  return partitions_[static_cast<size_t>(partition)];
}

// ---- MNIST: IDX files -----------------------------------------------------

namespace {

constexpr float kMean = 0.1307f, kStd = 0.3081f;

uint32_t read_be32(std::istream& in, const std::string& path) {
  unsigned char b[4];
  if (!in.read(reinterpret_cast<char*>(b), 4)) throw InvalidArgument(path + " is truncated: no IDX header");
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

void write_be32(std::ostream& out, uint32_t v) {
  const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                     static_cast<char>(v)};
  out.write(b, 4);
}

std::vector<uint8_t> read_payload(std::istream& in, size_t bytes, const std::string& path) {
  std::vector<uint8_t> data(bytes);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes));
  if (static_cast<size_t>(in.gcount()) != bytes) {
    throw InvalidArgument(path + " is truncated: expected " + std::to_string(bytes) +
                          " bytes of data, found " + std::to_string(in.gcount()));
  }
  return data;
}

at::Tensor normalise(const at::Tensor& u8_images) {
  return u8_images.to(at::kFloat).div_(255.0f).sub_(kMean).div_(kStd).unsqueeze(1).contiguous();
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path) {
  std::ifstream images(images_path, std::ios::binary), labels(labels_path, std::ios::binary);
  if (!images) throw InvalidArgument("cannot open MNIST images " + images_path);
  if (!labels) throw InvalidArgument("cannot open MNIST labels " + labels_path);
  const uint32_t image_magic = read_be32(images, images_path);
  if (image_magic != 2051) {
    throw InvalidArgument(images_path + " is not an IDX image file: magic number " +
                          std::to_string(image_magic) + ", expected 2051");
  }
  const uint32_t n = read_be32(images, images_path), rows = read_be32(images, images_path),
                 cols = read_be32(images, images_path);
  const uint32_t label_magic = read_be32(labels, labels_path);
  if (label_magic != 2049) {
    throw InvalidArgument(labels_path + " is not an IDX label file: magic number " +
                          std::to_string(label_magic) + ", expected 2049");
  }
  const uint32_t label_count = read_be32(labels, labels_path);
  if (label_count != n) {
    throw InvalidArgument(images_path + " holds " + std::to_string(n) + " images but " + labels_path +
                          " holds " + std::to_string(label_count) + " labels");
  }
  auto pixels = read_payload(images, size_t{n} * rows * cols, images_path);
  auto classes = read_payload(labels, n, labels_path);
  Dataset d;
  at::Tensor u8 = at::from_blob(pixels.data(), {n, rows, cols}, at::kByte);
  d.images = normalise(u8);
  d.labels = at::from_blob(classes.data(), {n}, at::kByte).to(at::kLong);
  return d;
}

Dataset read_mnist(const std::string& dir, bool train) {
  const std::string prefix = dir + "/" + (train ? "train" : "t10k");
  return read_idx(prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte");
}

void write_idx(const std::string& images_path, const std::string& labels_path, const at::Tensor& images_u8,
               const at::Tensor& labels) {
  if (images_u8.dim() != 3 || images_u8.scalar_type() != at::kByte) {
    throw InvalidArgument("write_idx needs uint8 images [N, H, W]");
  }
  std::ofstream images(images_path, std::ios::binary), out_labels(labels_path, std::ios::binary);
  write_be32(images, 2051);
  for (int d = 0; d < 3; ++d) write_be32(images, static_cast<uint32_t>(images_u8.size(d)));
  at::Tensor pixels = images_u8.contiguous();
  images.write(reinterpret_cast<const char*>(pixels.data_ptr<uint8_t>()), pixels.numel());
  at::Tensor classes = labels.to(at::kByte).contiguous();
  write_be32(out_labels, 2049);
  write_be32(out_labels, static_cast<uint32_t>(classes.numel()));
  out_labels.write(reinterpret_cast<const char*>(classes.data_ptr<uint8_t>()), classes.numel());
  if (!images || !out_labels)
    throw InvalidArgument("cannot write IDX files " + images_path + ", " + labels_path);
}

// ---- MNIST: generated -----------------------------------------------------

namespace {

// Each class is a seven-segment figure (top, upper right, lower right,
// bottom, lower left, upper left, middle), the digit's own.
constexpr uint8_t kSegmentsOf[10] = {0b0111111, 0b0000110, 0b1011011, 0b1001111, 0b1100110,
                                     0b1101101, 0b1111101, 0b0000111, 0b1111111, 0b1101111};
// Segment ends in figure units: x in [-0.5, 0.5], y in [-1, 1], y down.
constexpr float kSegments[7][4] = {{-0.5f, -1, 0.5f, -1}, {0.5f, -1, 0.5f, 0},  {0.5f, 0, 0.5f, 1},
                                   {-0.5f, 1, 0.5f, 1},   {-0.5f, 0, -0.5f, 1}, {-0.5f, -1, -0.5f, 0},
                                   {-0.5f, 0, 0.5f, 0}};

float distance_to_segment(float px, float py, float ax, float ay, float bx, float by) {
  const float dx = bx - ax, dy = by - ay;
  const float len2 = dx * dx + dy * dy;
  float t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0;
  t = std::clamp(t, 0.0f, 1.0f);
  const float ex = px - (ax + t * dx), ey = py - (ay + t * dy);
  return std::sqrt(ex * ex + ey * ey);
}

}  // namespace

Dataset synthetic_mnist(int64_t n, uint64_t seed) {
  if (n < 0) throw InvalidArgument("synthetic_mnist: negative sample count");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> pixels(static_cast<size_t>(n) * 28 * 28, 1e9f);  // squared distance to the figure
  std::vector<float> sigma2(static_cast<size_t>(n)), ink(static_cast<size_t>(n));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    const int label = static_cast<int>(rng() % 10);
    labels[static_cast<size_t>(s)] = label;
    const float angle = (u(rng) - 0.5f) * 0.5f, scale = 7.0f + 2.5f * u(rng), slant = (u(rng) - 0.5f) * 0.5f;
    const float cx = 14 + (u(rng) - 0.5f) * 6, cy = 14 + (u(rng) - 0.5f) * 4;
    const float sigma = 0.8f + 0.8f * u(rng);
    sigma2[static_cast<size_t>(s)] = 2 * sigma * sigma;
    ink[static_cast<size_t>(s)] = 0.7f + 0.3f * u(rng);
    const float c = std::cos(angle), sn = std::sin(angle);
    float* img = pixels.data() + s * 784;
    for (int seg = 0; seg < 7; ++seg) {
      if (!(kSegmentsOf[label] >> seg & 1)) continue;
      float e[4];
      for (int k = 0; k < 2; ++k) {
        const float fx = kSegments[seg][2 * k] + slant * kSegments[seg][2 * k + 1] * 0.5f;
        const float fy = kSegments[seg][2 * k + 1];
        e[2 * k] = cx + scale * (c * fx - sn * fy);
        e[2 * k + 1] = cy + scale * (sn * fx + c * fy);
      }
      // Only pixels near the stroke can be lit: its box, widened by 4 sigma.
      const float reach = 4 * sigma;
      const int x0 = std::max(0, static_cast<int>(std::min(e[0], e[2]) - reach));
      const int x1 = std::min(27, static_cast<int>(std::max(e[0], e[2]) + reach) + 1);
      const int y0 = std::max(0, static_cast<int>(std::min(e[1], e[3]) - reach));
      const int y1 = std::min(27, static_cast<int>(std::max(e[1], e[3]) + reach) + 1);
      for (int y = y0; y <= y1; ++y) {
        for (int x = x0; x <= x1; ++x) {
          const float d =
              distance_to_segment(static_cast<float>(x), static_cast<float>(y), e[0], e[1], e[2], e[3]);
          img[y * 28 + x] = std::min(img[y * 28 + x], d * d);
        }
      }
    }
  }
  // Stroke profile, then noise for the whole set at once (vectorised).
  at::Tensor d2 = at::from_blob(pixels.data(), {n, 1, 28, 28}, at::kFloat);
  at::Tensor s2 = at::from_blob(sigma2.data(), {n, 1, 1, 1}, at::kFloat);
  at::Tensor strength = at::from_blob(ink.data(), {n, 1, 1, 1}, at::kFloat);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x9e3779b97f4a7c15ULL);
  at::Tensor images = at::exp(-d2 / s2) * strength + at::randn({n, 1, 28, 28}, gen, at::kFloat) * 0.12f;
  Dataset d;
  d.images = images.clamp_(0, 1).sub_(kMean).div_(kStd);
  d.labels = at::from_blob(labels.data(), {n}, at::kLong).clone();
  return d;
}

}  // namespace cohort
