#pragma once
// The steps of docs/CONSISTENCY.md that both the proxy and the workers take:
// the metadata names, the departure epoch, promotion (copying documents up
// from the archive without ever resurrecting or regressing one), and deletes
// that leave tombstones. Everything here is standard MongoDB commands.
#include <asio.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "bson/fields.h"
#include "tiering/config.h"
#include "tiering/tier.h"

namespace halo::tiering {

/// A document id, held as {"v": <id>} so any BSON type fits.
using Id = bson::Doc;
Id makeId(const bson_value_t& v);
const bson_value_t* idValue(const Id& id, bson_iter_t* scratch);
/// Reads `_id` of a document into an Id. False when absent.
bool idOf(const bson_t* doc, Id* out);

std::pair<std::string, std::string> splitNs(const std::string& ns);
/// The id's bytes, as a map key.
std::string idKey(const Id& id);
/// {key: {_id: {$in: [ids...]}}}
void appendIdIn(bson_t* out, const char* key, const std::vector<Id>& ids);
/// {key: {_id: {$in: [tombstone keys of ids in ns]}}} (also the pins' keys)
void appendTombstoneIn(bson_t* out, const char* key, const struct Metadata& meta,
                       const std::string& ns, const std::vector<Id>& ids);

/// Names of the metadata collections in the fast tier.
struct Metadata {
    std::string db = "halocline";
    static constexpr const char* kTombstones = "tombstones";
    static constexpr const char* kState = "state";
    static constexpr const char* kPins = "pins";
    static constexpr const char* kRetries = "retries";
    static constexpr const char* kRefused = "refused";
    std::string tombstonesNs() const { return db + "." + kTombstones; }
    std::string stateNs() const { return db + "." + kState; }
    /// The state document a proxy writes when an archive read needs the lazy
    /// feeder to write everything it gathered (CONSISTENCY.md, Lazy mode).
    static constexpr const char* kFeederDemand = "feederDemand";
    /// {ns: "<db.coll>", id: <id>}: the _id of X's tombstone.
    static void appendTombstoneKey(bson_t* out, const char* key, const std::string& ns,
                                   const Id& id);
};

/// What the proxy and the workers share to run the protocol.
/// "0", "1", ... for array keys.
class ArrayKey {
  public:
    const char* operator()(size_t i) {
        const char* k;
        bson_uint32_to_string(static_cast<uint32_t>(i), &k, buf_, sizeof buf_);
        return k;
    }

  private:
    char buf_[16];
};

struct Tiers {
    Tier& fast;
    Tier& archive;
    /// The protocol's own transactions (promotion, eviction): internal
    /// sessions, whose writes change streams leave out.
    SessionPool& fastSessions;
    /// Transactions that do the application's writes (deletes with their
    /// tombstones): their events are the application's.
    SessionPool& appSessions;
    Metadata meta;
    /// Sessions of the proxy's own in the archive, for cold writes of clients
    /// that sent none (cold_write.h); null where no cold write runs.
    SessionPool* archiveSessions = nullptr;
};

/// Whether field `k` of `d` is present and true (bson_iter_as_bool).
bool truthy(const bson_t* d, const char* k);
/// The same, from a field index (no scan of the document).
bool truthy(const bson::Fields& d, const char* k);

/// Appends {w: "majority", j: true}.
void appendMajority(bson_t* cmd);

/// What a promotion reads before it reads the archive (CONSISTENCY.md,
/// Promotion): the departure epoch of `ns` (evictions and tombstone removals),
/// the number of cold writes finished on `ns` (each leaves a mark with its
/// number under its document's tombstone key), and when it read them: a
/// promotion must commit within kPromotionDeadline of `readAt`, so marks older
/// than kColdMarkLifetimeMillis can be swept.
struct Epoch {
    int64_t departures = 0;
    int64_t cold = 0;
    std::chrono::steady_clock::time_point readAt;
};
asio::awaitable<StatusWith<Epoch>> readEpoch(Tiers& t, const std::string& ns);
/// The same through `run` (inside a client's transaction: the values at its snapshot).
asio::awaitable<StatusWith<Epoch>> readEpochWith(CommandRunner run, const Metadata& meta,
                                                 const std::string& ns);
/// The query readEpoch sends, and the Epoch its documents (read at `readAt`) give:
/// for reading the epoch in one round trip with other queries (collectAll).
bson::Doc epochCommand(const Metadata& meta, const std::string& ns);
Epoch epochFrom(const std::vector<bson::Doc>& docs, const std::string& ns,
                std::chrono::steady_clock::time_point readAt);
/// Runs commands on the fast tier outside any transaction.
CommandRunner fastRunner(Tiers& t);
/// A find of the `halocline.state` documents `ids`.
bson::Doc stateFind(const Metadata& meta, const std::vector<std::string>& ids);
inline constexpr std::chrono::seconds kPromotionDeadline{30};
inline constexpr int64_t kColdMarkLifetimeMillis = 60'000;
/// Counts a finished cold write on `ns` (majority, journaled): the number its
/// mark gets, greater than every `Epoch::cold` read before.
asio::awaitable<StatusWith<int64_t>> countColdWrite(Tiers& t, const std::string& ns);
/// The command countColdWrite sends, and the number its reply gives.
bson::Doc countColdWriteCommand(const Metadata& meta, const std::string& ns);
StatusWith<int64_t> coldCountFrom(const bson_t* reply);

/// Of `ids`, the ones present in the fast tier's `ns`, the ones tombstoned,
/// the ones a cold write holds (cold_write.h: a guard, no tombstone), and the
/// number of the last cold write finished on each (its mark; 0: none).
struct FastPresence {
    std::vector<bool> present;
    std::vector<bool> tombstoned;
    std::vector<bool> guarded;
    std::vector<int64_t> marks;
};
asio::awaitable<StatusWith<FastPresence>> fastPresence(Tiers& t, const std::string& ns,
                                                       const std::vector<Id>& ids);
/// Which of `ids` have a document in the fast tier's `ns`.
asio::awaitable<StatusWith<std::vector<bool>>> presentIn(Tiers& t, const std::string& ns,
                                                         const std::vector<Id>& ids);
/// The query presentIn sends, and which of `ids` its documents name.
bson::Doc presentInCommand(const std::string& ns, const std::vector<Id>& ids);
std::vector<bool> presentFrom(const std::vector<bson::Doc>& docs, const std::vector<Id>& ids);
asio::awaitable<StatusWith<std::vector<bool>>> presentInWith(CommandRunner run,
                                                             const std::string& ns,
                                                             const std::vector<Id>& ids);
/// What holds each id's tombstone key: a tombstone, a cold write's guard
/// (kept whole, for finishColdGuard), a finished cold write's mark (its
/// number), or nothing.
struct KeyStates {
    std::vector<bool> dead;
    std::vector<bool> guarded;
    std::vector<int64_t> marks;
    std::vector<bson::Doc> guards;
};
asio::awaitable<StatusWith<KeyStates>> keyStates(Tiers& t, const std::string& ns,
                                                 const std::vector<Id>& ids);
/// The query keyStates sends, and what its documents say of `ids` (any ids
/// among those it asked for).
bson::Doc keyStatesCommand(const Metadata& meta, const std::string& ns, const std::vector<Id>& ids);
KeyStates keyStatesFrom(std::vector<bson::Doc>& tombs, const std::vector<Id>& ids);
asio::awaitable<StatusWith<KeyStates>> keyStatesWith(CommandRunner run, const Metadata& meta,
                                                     const std::string& ns,
                                                     const std::vector<Id>& ids);
/// Of `ids`, the ones tombstoned in the fast tier (fastPresence's second
/// half). A cold write's guard is no tombstone: the archive holds X.
asio::awaitable<StatusWith<std::vector<bool>>> tombstonedIn(Tiers& t, const std::string& ns,
                                                            const std::vector<Id>& ids);

/// CONSISTENCY.md, Promotion: makes every id in `ids` that exists only in the
/// archive present in the fast tier. Returns the number of documents copied up.
asio::awaitable<StatusWith<int64_t>> promoteIds(Tiers& t, const std::string& ns,
                                                const std::vector<Id>& ids);
/// Promotes every archive document matching `filter` (ids first, in chunks).
asio::awaitable<StatusWith<int64_t>> promoteMatching(Tiers& t, const std::string& ns,
                                                     const bson_t* filter);
/// Promotes documents already read from the archive after `epoch` was read
/// (the warmer's batched path). Returns the number copied up. `clearMarks`:
/// some ids may carry cold-write marks numbered at most epoch.cold, which the
/// promotion replaces (without it, a mark costs one failed transaction).
asio::awaitable<StatusWith<int64_t>> promoteDocs(Tiers& t, const std::string& ns,
                                                 const Epoch& epoch,
                                                 const std::vector<bson::Doc>& docs,
                                                 bool clearMarks = false);

/// CONSISTENCY.md, Deletes: deletes what `filter` matches in the fast tier
/// (one document when `limit` is 1) in a transaction that leaves one tombstone
/// per deleted id. With `returnDoc`, the deleted document (findAndModify).
struct DeleteResult {
    /// The statement ran in the archive (a cold write): a retry goes there,
    /// and the archive answers it from its own record of the session.
    bool inArchive = false;
    int64_t n = 0;
    std::optional<bson::Doc> deleted;
    bson::Doc operationTime;  // {t: Timestamp} of the commit, empty if unknown
};
/// CONSISTENCY.md, Pins: ids a write is about to touch that the evictor must
/// leave alone until unpin(). prepareWrite pins every id that may be evicted
/// during the write (present with an age near the horizon, or living only in
/// the archive), then promotes what is missing, so the write finds every
/// document it could touch in the fast tier.
struct Pinned {
    std::string ns;
    std::vector<Id> ids;
    /// With `coldOk`: the one id lives only in the archive (neither in the
    /// fast tier, nor tombstoned, nor guarded); nothing was pinned or
    /// promoted, so the write may run there (cold_write.h).
    bool cold = false;
    /// With PrepareOptions::retryKey: the statement's retry record (findRetry),
    /// read after every promotion this preparation made (false: read it now).
    bool retryRead = false;
    std::optional<DeleteResult> retry;
};
/// How prepareWrite asks the fast tier.
struct PrepareOptions {
    /// The write may run in the archive (Pinned::cold).
    bool coldOk = false;
    /// Ask the ids' tombstone keys in the presence query's round trip, not
    /// after it: for writes whose ids are mostly absent (inserts).
    bool keysUpFront = false;
    /// A retryable statement's key: its record is read in the same round
    /// trip, after the presence query (Pinned::retry).
    const bson_t* retryKey = nullptr;
};
/// What changes which documents a client's filter matches, for the proxy's own
/// queries with that filter: {collation, let}, each when given (the statement's
/// collation before the command's; `let` is the command's). Empty: neither.
bson::Doc matchOptionsOf(const bson::Fields& cmd, const bson_t* stmt = nullptr);
/// Whether `matchOptions` has a collation ("a" may match "A": no exact ids).
bool collated(const bson_t* matchOptions);

asio::awaitable<StatusWith<Pinned>> prepareWrite(Tiers& t, const CollectionPolicy& p, Millis guard,
                                                 const std::vector<Id>& ids,
                                                 const PrepareOptions& o = {});
/// The same for every document `filter` can match (under `matchOptions`: the
/// client's collation and let, matchOptionsOf), in either tier. With `archiveCap`, more than that
/// many matches in the archive are refused (TransactionTooLarge) before anything is pinned.
asio::awaitable<StatusWith<Pinned>> prepareWriteMatching(Tiers& t, const CollectionPolicy& p,
                                                         Millis guard, const bson_t* filter,
                                                         const bson_t* matchOptions = nullptr,
                                                         int64_t archiveCap = 0);
asio::awaitable<void> unpin(Tiers& t, const Pinned& pins);
/// Pins older than this are left by a crashed proxy; the evictor ignores them.
inline constexpr int64_t kStalePinMillis = 10 * 60 * 1000;

/// The statements of a delete with tombstones (DeleteResult), run through `run` inside a
/// transaction the caller commits: the delete and the tombstones, nothing else.
asio::awaitable<StatusWith<DeleteResult>> deleteAndTombstone(
    CommandRunner run, const Metadata& meta, const std::string& ns, const bson_t* filter, int limit,
    const bson_t* sort, const bson_t* matchOptions);
/// With `retryKey` (a retryable write's {lsid, txnNumber, stmt}), the result is
/// recorded in halocline.retries in the same transaction; findRetry() returns it
/// to a retry of the same statement, so a retried delete answers as the first.
asio::awaitable<StatusWith<DeleteResult>> deleteWithTombstones(Tiers& t, const std::string& ns,
                                                               const bson_t* filter, int limit,
                                                               const bson_t* sort,
                                                               const bson_t* matchOptions,
                                                               const bson_t* retryKey = nullptr);
asio::awaitable<StatusWith<std::optional<DeleteResult>>> findRetry(Tiers& t,
                                                                   const bson_t* retryKey);
/// The query findRetry sends, and the record its documents hold.
bson::Doc retryCommand(const Metadata& meta, const bson_t* retryKey);
std::optional<DeleteResult> retryFrom(const std::vector<bson::Doc>& docs);

}  // namespace halo::tiering
