#pragma once
// The CUDA backend's resources, owned the RAII way: device and pinned host buffers, and the
// events its phase clock records. Only kernels/cuda_backend.cu includes it.
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "common/cuda_check.h"
#include "kernels/compute_backend.h"

namespace tp {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (data_) cudaFree(data_);
  }
  void allocate(size_t n) {
    if (data_) cudaCheck(cudaFree(data_));
    data_ = nullptr;
    size_ = n;
    if (n) cudaCheck(cudaMalloc(&data_, n * sizeof(T)));
  }
  T* get() const { return data_; }
  size_t size() const { return size_; }
  void swap(DeviceBuffer& other) {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Page-locked host memory, so host-to-device copies from it run asynchronously.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
  }
  void allocate(size_t n) {
    if (data_) cudaCheck(cudaFreeHost(data_));
    data_ = nullptr;
    if (n) cudaCheck(cudaMallocHost(&data_, n * sizeof(float)));
  }
  float* get() const { return data_; }

 private:
  float* data_ = nullptr;
};

class EventPhaseClock final : public PhaseClock {
 public:
  explicit EventPhaseClock(cudaStream_t stream) : stream_(stream) {
    for (auto& e : events_) cudaCheck(cudaEventCreate(&e));
  }
  ~EventPhaseClock() override {
    for (auto& e : events_) cudaEventDestroy(e);
  }
  void mark(Mark m) override { cudaCheck(cudaEventRecord(events_[int(m)], stream_)); }
  double seconds_between(Mark from, Mark to) override {
    cudaCheck(cudaEventSynchronize(events_[int(to)]));
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, events_[int(from)], events_[int(to)]));
    return ms * 1e-3;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t events_[int(Mark::kCount)];
};

// Each step's clock reuses the backend's events: a step resolves its marks before the next
// begins, and creating five events a step costs more than recording them.
class BorrowedPhaseClock final : public PhaseClock {
 public:
  explicit BorrowedPhaseClock(EventPhaseClock& events) : events_(events) {}
  void mark(Mark m) override { events_.mark(m); }
  double seconds_between(Mark from, Mark to) override { return events_.seconds_between(from, to); }

 private:
  EventPhaseClock& events_;
};

}  // namespace tp
