#pragma once
// Pure helpers of the workers, kept apart from I/O so they can be unit tested:
// decoding the time inside a change-stream resume token, turning a batch of
// change events into the set of touched document ids (CONSISTENCY.md, The
// feeder), and the age values the evictor and the warmer compare against.
#include <bson/bson.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "tiering/protocol.h"
#include "tiering/state.h"

namespace halo::tiering {

/// The cluster time inside a resume token ({_data: "82<16 hex digits>..."}):
/// the leading 0x82 is the KeyString type byte of a Timestamp, and the next 8
/// bytes are the Timestamp big-endian (seconds, increment). This holds for
/// mongod's tokens and for our store's. Nothing when the token has another shape.
std::optional<OpTime> resumeTokenTime(const bson_t* token);

/// A BSON Timestamp value as an OpTime. Nothing when `it` holds another type.
std::optional<OpTime> timestampValue(const bson_iter_t* it);
inline uint32_t opTimeSeconds(OpTime t) {
    return static_cast<uint32_t>(t >> 32);
}
inline uint32_t opTimeIncrement(OpTime t) {
    return static_cast<uint32_t>(t & 0xffffffffu);
}

/// A string key of an Id, usable in maps (its BSON bytes).

/// What one batch of change events touched (CONSISTENCY.md, The feeder).
struct TouchedIds {
    /// Per tiered namespace, the distinct ids to re-read and apply, in first-seen order.
    std::map<std::string, std::vector<Id>> byNs;
    int64_t events = 0;             // events in the batch
    int64_t promotionsSkipped = 0;  // inserts that were promotions (the archive has them)
    /// The (ns, id) of those promotions: written in the fast tier, not to apply.
    std::vector<std::pair<std::string, Id>> promoted;
    std::optional<OpTime> lastTime;  // clusterTime of the last event
    int64_t lastWallMs = 0;          // wallTime of the last event (0 if absent)
    /// A proxy wrote the feeder's demand (Metadata::kFeederDemand): an archive
    /// read waits for everything up to it.
    bool demanded = false;
};

/// Classifies a batch of change events (projected to _id, operationType, ns,
/// documentKey, clusterTime, wallTime and fullDocument.promote). An insert into
/// a tiered collection is skipped when the same transaction (same clusterTime)
/// inserted a promotion guard for the same id: that was a promotion and the
/// archive already holds the document. The guard events themselves touch
/// nothing. `guards` carries guard keys across batches (a transaction's events
/// may straddle a batch boundary); pass the same set for consecutive batches.
class ChangeBatchClassifier {
  public:
    ChangeBatchClassifier(std::set<std::string> tieredNs, const Metadata& meta)
        : tiered_(std::move(tieredNs)),
          tombstonesNs_(meta.tombstonesNs()),
          stateNs_(meta.stateNs()) {}
    TouchedIds classify(const std::vector<bson::Doc>& events);

  private:
    std::set<std::string> tiered_;
    std::string tombstonesNs_;
    std::string stateNs_;
    // Promotion guards of the last cluster time seen: "<ns>\0<idKey>".
    OpTime guardTime_ = 0;
    std::set<std::string> guards_;
};

/// The age of a value in milliseconds since the epoch: a date's own value, an
/// ObjectId's creation second * 1000. Nothing for other types.
std::optional<int64_t> ageMillis(const bson_value_t& v);

/// Appends `key: <age bound for ms>`: a date, or for the `_id` age field the
/// smallest ObjectId of the second floor(ms / 1000) (so `$lt` only matches
/// documents created before that second and `$gte` every document of it).
void appendAgeBound(bson_t* out, const char* key, bool idIsAge, int64_t ms);

/// Whether the feeder's batch ended on an event (its postBatchResumeToken is
/// the last event's own token): then more events of the same transaction may
/// follow, and only the time just before the last event is fully applied.
OpTime appliedTimeOfBatch(OpTime tokenTime, bool endedOnEvent);

}  // namespace halo::tiering
