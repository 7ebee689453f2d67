#pragma once
// CONSISTENCY.md, Cold writes: an update, findAndModify or delete of one
// document that lives only in the archive, and whose age the write leaves
// alone, runs in the archive, where the document lives, instead of being
// copied up, written, copied back by the feeder and evicted again.
//
// The write holds a guard in the fast tier while it runs: a document under
// X's tombstone key, {_id: {ns, id}, cold: <version>, at, cmd, retry}, which
// promotions wait for (they write the same key), reads and the feeder ignore
// (it is no delete), and which any proxy can finish if its writer died: `cmd`
// is the archive command with a session and txnNumber, so running it again is
// a retry the archive answers without running it twice. Once the write is
// done the guard becomes a mark (kColdMarkField).
#include <asio.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "bson/doc.h"
#include "tiering/config.h"
#include "tiering/protocol.h"

namespace halo::tiering {

/// The document a single write statement may update or delete in the archive
/// (nullopt: it must take the promoting path). `kind` is "update" (`stmt` one
/// of its updates), "delete" (one of its deletes) or "findAndModify" (`stmt`
/// the command). Eligible: the filter names one `_id` by equality, no upsert,
/// and an update made of operators none of which writes the age field's
/// top-level field (so the document's age, and with it every routing proof,
/// stays as it was).
std::optional<Id> coldTarget(std::string_view kind, const bson_t* stmt, const CollectionPolicy& p);

/// The guard's field that marks it (tombstonedIn and the feeder skip it).
inline constexpr const char* kColdGuardField = "cold";
/// What a guard becomes once its write is done: {_id: {ns, id}, mark: <n>, at},
/// n from countColdWrite. A promotion that counted fewer cold writes before it
/// read the archive may hold X's old version, and its guard meets the mark; a
/// later cold write replaces it. The evictor sweeps marks after
/// kColdMarkLifetimeMillis. Neither a tombstone nor a guard.
inline constexpr const char* kColdMarkField = "mark";

/// Runs `archiveCmd` (a write naming X, with `lsid`, `txnNumber` and a write
/// concern) in the archive if X lives only there: takes X's guard, runs the
/// command, and releases the guard in the background (recording `retryKey`,
/// when given, as run in the archive). nullopt: X is in the fast tier,
/// tombstoned or guarded by another write, and nothing was done. When the
/// archive never answered, the guard stays for finishColdGuard (the command's
/// outcome is unknown).
asio::awaitable<StatusWith<std::optional<bson::Doc>>> runCold(Tiers& t, const std::string& ns,
                                                              const Id& id,
                                                              const bson_t* archiveCmd,
                                                              const bson_t* retryKey);

/// Finishes a guard another writer left (CONSISTENCY.md, Cold writes, a
/// writer that died): runs its command again and releases it.
asio::awaitable<Status> finishColdGuard(Tiers& t, const std::string& ns, const bson_t* guard);

/// Whether `guard` is held by the retryable statement `retryKey` (its first
/// attempt: a retry of it runs the cold path, which finishes the guard).
bool sameRetry(const bson_t* guard, const bson_t* retryKey);

/// How long ago a guard was taken (its `at`).
int64_t coldGuardAgeMillis(const bson_t* guard);
/// A guard older than this (or waited for this long) is finished by the
/// promotion that meets it; a younger one is waited for.
inline constexpr int64_t kColdGuardPatienceMillis = 5'000;

}  // namespace halo::tiering
