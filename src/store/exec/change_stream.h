#pragma once
// The $changeStream source: reads the oplog after a resume point, up to the
// oplog's visibility point, and turns entries into change events (insert,
// update, replace, delete, drop, rename, dropDatabase, invalidate) for one
// collection, one database or the whole deployment. Never exhausted: when it
// catches up it returns nullopt and the cursor stays open (tailable).
//
// Resume tokens are {_data: <hex>}: 16 hex digits of cluster time, 8 of the
// event's index within its oplog entry, 2 of kind (event, high-water mark,
// invalidate). Opaque to clients; they compare in stream order.
#include <optional>
#include <string>

#include "store/exec/doc_stream.h"
#include "store/repl/logical_clock.h"

namespace halo::store {

class Oplog;
class Catalog;

struct ResumePoint {
    Timestamp ts;
    uint32_t index = 0;
    uint8_t kind = 0;  // 0 event, 1 high-water mark, 2 invalidate
    bson::Doc toToken() const;
    /// Parses {_data: "..."}; BadValue-like InvalidResumeToken (260) on garbage.
    static ResumePoint fromToken(const bson_t* token);
    bool operator<(const ResumePoint& o) const {
        if (!(ts == o.ts)) return ts < o.ts;
        if (index != o.index) return index < o.index;
        return kind < o.kind;
    }
};

struct ChangeStreamSpec {
    enum class Scope { Collection, Database, Cluster } scope = Scope::Collection;
    std::string db;
    std::string coll;
    std::string fullDocument = "default";  // default | updateLookup | whenAvailable | required
    std::string fullDocumentBeforeChange = "off";
    bool showExpandedEvents = false;
    // Exactly one start point (or none: start after the newest entry).
    std::optional<ResumePoint> resumeAfter;
    std::optional<ResumePoint> startAfter;
    std::optional<Timestamp> startAtOperationTime;

    /// Parses the $changeStream stage's argument for a command on `db`/`coll`
    /// (coll empty for `aggregate: 1`). `admin` + allChangesForCluster: cluster scope.
    static ChangeStreamSpec parse(const bson_t* stageArg, const std::string& db,
                                  const std::string& coll);
};

class ChangeStream : public DocStream {
  public:
    /// Validates the start point against the oplog (ChangeStreamHistoryLost 286).
    ChangeStream(Oplog& oplog, Catalog& catalog, ChangeStreamSpec spec, Session& s);
    std::optional<bson::Doc> next(Session& s) override;
    std::optional<bson::Doc> postBatchResumeToken() const override;
    bool isTailable() const override { return !invalidated_; }
    bool isExhausted() const override { return closed_; }

  private:
    /// Converts one oplog entry into 0..n events appended to pending_.
    void expand(Session& s, const bson_t* entry, Timestamp ts);
    bool matchesNs(const std::string& ns) const;

    Oplog& oplog_;
    Catalog& catalog_;
    ChangeStreamSpec spec_;
    ResumePoint position_;   // last position consumed (events at or before are done)
    Timestamp scannedUpTo_;  // oplog entries up to here have been read
    std::vector<std::pair<ResumePoint, bson::Doc>> pending_;
    size_t pendingPos_ = 0;
    bool invalidated_ = false;  // an invalidate event is queued or sent
    bool closed_ = false;       // the invalidate was returned
};

}  // namespace halo::store
