#pragma once
// The cluster time: a monotonic BSON Timestamp (seconds, increment) stamped on
// every write. Thread-safe.
#include <bson/bson.h>

#include <cstdint>
#include <mutex>

namespace halo::store {

struct Timestamp {
    uint32_t secs = 0;
    uint32_t inc = 0;
    uint64_t asU64() const { return (static_cast<uint64_t>(secs) << 32) | inc; }
    static Timestamp fromU64(uint64_t v) {
        return {static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v)};
    }
    bool isNull() const { return secs == 0 && inc == 0; }
    friend bool operator<(Timestamp a, Timestamp b) { return a.asU64() < b.asU64(); }
    friend bool operator<=(Timestamp a, Timestamp b) { return a.asU64() <= b.asU64(); }
    friend bool operator==(Timestamp a, Timestamp b) { return a.asU64() == b.asU64(); }
};

inline void appendTimestamp(bson_t* b, const char* key, Timestamp t) {
    bson_append_timestamp(b, key, -1, t.secs, t.inc);
}

class LogicalClock {
  public:
    /// The next timestamp: never below wall-clock seconds, strictly increasing.
    Timestamp reserve();
    /// The latest timestamp handed out (or advanced to).
    Timestamp latest() const;
    /// Moves the clock forward to at least `t` (start-up from the oplog; gossip).
    void advanceTo(Timestamp t);

  private:
    mutable std::mutex mu_;
    Timestamp last_;
};

}  // namespace halo::store
