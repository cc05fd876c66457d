// The tutorial's DataPartitioner: shuffle the indices of a data set with a
// seed every rank shares, cut them into fractions, and let each rank use its
// own part. Here the data set is 1000 synthetic samples; each rank sums the
// samples of its partition, and an all_gather shows that the partitions are
// disjoint and cover what the fractions say.
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "cohort/distributed.h"

// Partition is a view of some samples of a data set, by index.
template <class T>
class Partition {
 public:
  Partition(const std::vector<T>& data, std::vector<size_t> index) : data_(data), index_(std::move(index)) {}
  size_t size() const { return index_.size(); }
  const T& operator[](size_t i) const { return data_[index_[i]]; }

 private:
  const std::vector<T>& data_;
  std::vector<size_t> index_;
};

// DataPartitioner cuts a shuffled index list into `sizes` fractions.
template <class T>
class DataPartitioner {
 public:
  DataPartitioner(const std::vector<T>& data, const std::vector<double>& sizes, unsigned seed = 1234)
      : data_(data) {
    std::vector<size_t> indexes(data.size());
    std::iota(indexes.begin(), indexes.end(), 0);
    std::mt19937 rng(seed);  // the same on every rank
    std::shuffle(indexes.begin(), indexes.end(), rng);
    size_t start = 0;
    for (double frac : sizes) {
      size_t len = static_cast<size_t>(frac * static_cast<double>(data.size()));
      partitions_.emplace_back(indexes.begin() + static_cast<long>(start),
                               indexes.begin() + static_cast<long>(start + len));
      start += len;
    }
  }
  Partition<T> use(int partition) const {
    return Partition<T>(data_, partitions_.at(static_cast<size_t>(partition)));
  }

 private:
  const std::vector<T>& data_;
  std::vector<std::vector<size_t>> partitions_;
};

int main() {
  cohort::init_process_group();
  const int rank = cohort::get_rank(), size = cohort::get_world_size();
  std::vector<int64_t> dataset(1000);
  std::iota(dataset.begin(), dataset.end(), 0);  // sample i is the number i
  std::vector<double> sizes(static_cast<size_t>(size), 1.0 / size);
  DataPartitioner<int64_t> partitioner(dataset, sizes);
  Partition<int64_t> mine = partitioner.use(rank);
  int64_t stats[2] = {static_cast<int64_t>(mine.size()), 0};
  for (size_t i = 0; i < mine.size(); ++i) stats[1] += mine[i];
  std::vector<int64_t> all(2 * static_cast<size_t>(size));
  cohort::all_gather_into_tensor(cohort::Buffer::of(all), cohort::Buffer::of(stats, 2));
  int64_t samples = 0, sum = 0;
  for (int r = 0; r < size; ++r) {
    samples += all[2 * r];
    sum += all[2 * r + 1];
  }
  std::printf("Rank %d has %lld samples (sum %lld); all ranks: %lld samples, sum %lld\n", rank,
              static_cast<long long>(stats[0]), static_cast<long long>(stats[1]),
              static_cast<long long>(samples), static_cast<long long>(sum));
  cohort::destroy_process_group();
}
