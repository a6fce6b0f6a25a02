// A counting wrapper around PyTorch's CPU allocator (the one c10::GetCPUAllocator() returns
// when install() runs): every tensor allocation and free of the process, in every thread
// (autograd, gloo workers), under one mutex, so the running total, its peak and the order of
// events are exact across threads. dist_truth.py's second meter, beside the profiler's
// allocation stream. Bytes are the sizes asked for (the CPU allocator does not round).
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

std::mutex mu;
int64_t current = 0, peak = 0, allocs = 0;
bool logging = false;
// (time ns, thread hash, bytes (+alloc, -free; 0 for a mark), running total, mark name, address)
using Event = std::tuple<int64_t, int64_t, int64_t, int64_t, std::string, int64_t>;
std::vector<Event> events;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t thread_key() { return (int64_t)std::hash<std::thread::id>{}(std::this_thread::get_id()); }

void record(int64_t n, void* ptr) {  // under mu
  current += n;
  if (n > 0) ++allocs;
  if (current > peak) peak = current;
  if (logging)
    events.emplace_back(now_ns(), thread_key(), n, current, std::string(), (int64_t)(intptr_t)ptr);
}

struct Block {
  c10::DataPtr orig;
  int64_t n;
};
// data pointer -> the original allocation: the DataPtr handed out has its data pointer as its
// context (raw_allocate, which oneDNN's scratch buffers use, asserts get() == get_context())
std::unordered_map<void*, Block> blocks;

c10::DeleterFnPtr base_raw_deleter = nullptr;
int64_t unknown_frees = 0;

void counting_delete(void* p) {
  if (p == nullptr) return;
  c10::DataPtr orig;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = blocks.find(p);
    if (it == blocks.end()) {
      // raw memory from before install(), freed through raw_deleter() now: the original
      // allocator's own deleter, not counted
      ++unknown_frees;
      if (base_raw_deleter) base_raw_deleter(p);
      return;
    }
    orig = std::move(it->second.orig);
    int64_t n = it->second.n;
    blocks.erase(it);
    record(-n, p);
  }
  // orig's own deleter frees the memory here, outside the lock
}

struct Counting final : c10::Allocator {
  c10::Allocator* base = nullptr;
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr orig = base->allocate(n);
    void* data = orig.get();
    if (data == nullptr) return orig;  // zero bytes
    std::lock_guard<std::mutex> g(mu);
    blocks.emplace(data, Block{std::move(orig), (int64_t)n});
    record((int64_t)n, data);
    return c10::DataPtr(data, data, &counting_delete, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

Counting counting;

void install() {
  if (counting.base) return;
  counting.base = c10::GetCPUAllocator();
  base_raw_deleter = counting.base->raw_deleter();
  c10::SetCPUAllocator(&counting, /*priority=*/100);
  TORCH_CHECK(c10::GetCPUAllocator() == &counting, "alloc_counter: the CPU allocator was not replaced");
}

bool installed() { return counting.base != nullptr && c10::GetCPUAllocator() == &counting; }

std::tuple<int64_t, int64_t, int64_t, int64_t> stats() {
  std::lock_guard<std::mutex> g(mu);
  return {current, peak, allocs, unknown_frees};
}

void reset_peak() {
  std::lock_guard<std::mutex> g(mu);
  peak = current;
}

void mark(const std::string& name) {
  std::lock_guard<std::mutex> g(mu);
  if (logging)
    events.emplace_back(now_ns(), thread_key(), 0, current, name, 0);
}

void set_logging(bool on) {
  std::lock_guard<std::mutex> g(mu);
  logging = on;
}

std::vector<Event> take_events() {
  std::lock_guard<std::mutex> g(mu);
  auto out = std::move(events);
  events.clear();
  return out;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install, "wrap the CPU allocator (before any tensor of the measurement exists)");
  m.def("installed", &installed);
  m.def("stats", &stats, "(live bytes, peak since reset_peak, allocations, frees of blocks from before install)");
  m.def("reset_peak", &reset_peak);
  m.def("mark", &mark, "a named point in the event log");
  m.def("set_logging", &set_logging);
  m.def("take_events", &take_events, "[(ns, thread, bytes, running total, mark, address)] since the last take");
}
