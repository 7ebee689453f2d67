#pragma once
// The database profiler's settings, as mongod keeps them: a level per database
// (0 off, 1 slow operations, 2 everything) with an optional filter, and the
// server-wide slowms and sampleRate. In memory only (mongod's --profile is
// not a start-up option here).
//
// Thread-safety: all methods are thread-safe; anyEnabled() is one atomic load,
// so the dispatcher pays nothing while profiling is off everywhere.
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

    bool anyEnabled() const { return enabledDatabases_.load() > 0; }
    Snapshot get(const std::string& db) const;

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
    std::atomic<int> enabledDatabases_{0};
};

}  // namespace halo::store
