#pragma once
// The database profiler's settings, as mongod keeps them: a level per database
// (0 off, 1 slow operations, 2 everything) with an optional filter, and the
// server-wide slowms and sampleRate. In memory only (mongod's --profile is
// not a start-up option here).
//
// Thread-safety: all methods are thread-safe; anyWatched() and slowMs() are one
// atomic load each, so the dispatcher pays nothing for a fast command while
// profiling is off everywhere.
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bson/doc.h"

namespace halo::query {
class Matcher;
}

namespace halo::store {

class ProfileSettings {
  public:
    struct Database {
        int level = 0;
        std::shared_ptr<const query::Matcher> filter;  // null: slowms and sampleRate decide
        bson::Doc filterSpec;                          // as given, for the profile command
    };
    struct Snapshot {
        Database db;
        int slowMs = 100;
        double sampleRate = 1.0;
    };

    /// Whether some database profiles (level 1 or 2) or has a filter (which
    /// also decides its slow-query log lines at level 0).
    bool anyWatched() const { return watchedDatabases_.load() > 0; }
    /// The server-wide slowms (one atomic load).
    int slowMs() const { return slowMsNow_.load(std::memory_order_relaxed); }
    Snapshot get(const std::string& db) const;
    /// The server-wide settings at start-up (--slowms, --slowOpSampleRate).
    void setServerDefaults(int slowMs, double sampleRate);

    /// Applies a profile command's changes (absent: unchanged); returns the
    /// settings from before. `filter` set to nullopt keeps it; a null pointer
    /// inside removes it ("unset").
    Snapshot update(
        const std::string& db, std::optional<int> level, std::optional<int> slowMs,
        std::optional<double> sampleRate,
        std::optional<std::pair<std::shared_ptr<const query::Matcher>, bson::Doc>> filter);

  private:
    mutable std::mutex mu_;
    std::map<std::string, Database> dbs_;
    int slowMs_ = 100;
    double sampleRate_ = 1.0;
    std::atomic<int> watchedDatabases_{0};
    std::atomic<int> slowMsNow_{100};
};

}  // namespace halo::store
