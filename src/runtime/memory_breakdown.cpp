#include "runtime/memory_breakdown.h"

#include <algorithm>
#include <cstdio>

namespace kiln {
namespace {

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%zu", (bytes + (size_t{1} << 19)) >> 20);  // rounded to nearest
  return buf;
}

std::string line(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace

std::string format_memory_size(size_t bytes) {
  static constexpr const char* kUnits[] = {"GiB", "MiB", "KiB"};
  for (int i = 0; i < 3; ++i) {
    const size_t unit = size_t{1} << (10 * (3 - i));
    if (bytes >= unit) return line("%.2f %s", static_cast<double>(bytes) / static_cast<double>(unit), kUnits[i]);
  }
  return std::to_string(bytes) + " bytes";
}

std::string format_memory_breakdown(std::span<const DeviceMemoryBreakdown> devices) {
  // The first column as wide as its longest name (a segmented model's owners are long).
  const auto owner_name = [](const OwnerMemory& o) { return "   - " + o.name + " #" + std::to_string(o.owner); };
  int width = 24;
  for (const DeviceMemoryBreakdown& d : devices) {
    for (const OwnerMemory& o : d.owners) width = std::max(width, static_cast<int>(owner_name(o).size()));
  }
  std::string out = line("%-*s | %7s %7s %7s %7s | %7s %7s %7s %7s | %11s\n", width, "memory breakdown [MiB]", "total",
                         "free", "budget", "counted", "weights", "kv", "compute", "evicted", "unaccounted");
  for (const DeviceMemoryBreakdown& d : devices) {
    const std::string budget = d.budget == kNoBudget ? "-" : mib(d.budget);
    out += line("%-*s | %7s %7s %7s %7s | %7s %7s %7s %7s | %11s\n", width, (" - " + d.device).c_str(),
                mib(d.total).c_str(), mib(d.free).c_str(), budget.c_str(), mib(d.counted).c_str(), "", "", "", "",
                mib(d.unaccounted).c_str());
    for (const OwnerMemory& o : d.owners) {
      out += line("%-*s | %7s %7s %7s %7s | %7s %7s %7s %7zu | %11s\n", width, owner_name(o).c_str(), "", "", "", "",
                  mib(o.bytes[static_cast<int>(MemoryKind::Weights)]).c_str(),
                  mib(o.bytes[static_cast<int>(MemoryKind::Kv)]).c_str(),
                  mib(o.bytes[static_cast<int>(MemoryKind::Compute)] + o.bytes[static_cast<int>(MemoryKind::Scratch)])
                      .c_str(),
                  o.evicted_residents, "");
    }
  }
  return out;
}

}  // namespace kiln
