// fifo.h: a first-in, first-out queue that stops allocating once warm.
//
// The engine queues sends per peer and keeps unexpected messages per peer;
// std::deque allocates and frees a block every few elements, a cost per
// message. Fifo keeps one vector and a read position: popping moves the
// position, and the vector's storage is reused once it has drained (or,
// when it never drains, once half of it lies behind the position).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace cohort {

template <class T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;
  using const_iterator = typename std::vector<T>::const_iterator;

  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  const T& front() const { return items_[head_]; }

  void push_back(T item) {
    if (empty()) {
      items_.clear();
      head_ = 0;
    } else if (items_.size() == items_.capacity() && head_ >= items_.size() / 2) {
      // Full, with half of it already consumed: slide the live part down
      // instead of growing.
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    items_.push_back(std::move(item));
  }
  void pop_front() {
    items_[head_] = T();  // release what the element holds now
    ++head_;
  }
  // erase removes one element anywhere (the first one cheaply).
  void erase(iterator it) {
    if (it == begin()) return pop_front();
    items_.erase(it);
  }
  // take_all empties the queue into the returned one.
  Fifo take_all() {
    Fifo out;
    out.items_.swap(items_);
    out.head_ = head_;
    head_ = 0;
    items_.clear();
    return out;
  }

  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  const_iterator end() const { return items_.end(); }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace cohort
