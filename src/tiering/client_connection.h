#pragma once
// One client connection of the proxy (src/tiering/proxy.h): the class, and the
// reply and command helpers its files share. The connection's commands live in
// one file per family: client_connection.cpp (framing, dispatch, forwarding,
// DDL on both tiers), proxy_reads.cpp (reads, cursors), proxy_writes.cpp
// (writes, cold writes, deletes with tombstones), proxy_transactions.cpp,
// proxy_streams.cpp (change streams), proxy_admin.cpp (status, currentOp,
// killOp, feeder control, routing explanations). Internal to halo_tiering.
#include <asio.hpp>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/query/matcher.h"
#include "store/query/projection.h"
#include "store/rules/fail_command.h"
#include "tiering/proxy.h"
#include "tiering/transactions.h"
#include "wire/message.h"

namespace halo::tiering {

OpTime toOpTime(const bson_iter_t& it);

void appendOpTime(bson_t* b, const char* key, OpTime t);

std::string str(const bson_t* d, const char* k);

/// A getMore or killCursors on a cursor another user opened (mongod: 13).
Status notCursorOwner(const char* cmd, int64_t id, const std::string& ns);

Status interrupted();

bson::Doc errorDoc(const Status& s);

/// The afterClusterTime of a command's readConcern, 0 when none.
OpTime afterClusterTime(const bson_t* cmd);

/// A copy of `cmd` fit to send to a tier: without the client's $clusterTime
/// (it belongs to the proxy's clock), and for the archive without
/// afterClusterTime (the archive has its own clock; the proxy waits instead).
bson::Doc forwardBody(const bson_t* cmd, bool toArchive);

/// The whole request frame for a tier: the new body plus the client's
/// document sequences, copied byte for byte.
Frame buildForward(const wire::OpMsg& msg, const bson_t* body);

StatusWith<bson::Doc> bodyOf(const Frame& f);

bool isWriteCommand(std::string_view c);

bool isReadCommand(std::string_view c);

bool isDdlCommand(std::string_view c);

/// A client's getMore for a tier: the tier's cursor id, without the proxy's fields.
bson::Doc getMoreBody(const bson_t* cmd, int64_t remoteId);

/// The proxy's error on a change stream's aggregate or getMore, labelled
/// ResumableChangeStreamError where mongod labels it (a network or retriable
/// error: a tier's connection failed), so the driver resumes from its token.
bson::Doc streamError(const Status& s);

struct StreamBatch;
struct MergedShape;

/// Documents of an array field or a document sequence named `name`, as byte
/// spans (a bson::View must not be copied: a static bson_t points into itself).
std::vector<std::span<const uint8_t>> statements(const wire::OpMsg& msg, const bson::Fields& body,
                                                 const char* name);

/// A find whose answer is empty exactly when no document has the _id: the
/// filter names nothing else, and no skip, collation or index bounds can
/// exclude the document.
bool plainIdLookup(const bson::Fields& cmd);

/// {lsid, txnNumber, stmt} of a retryable write's statement; empty when the
/// command is not a retryable write.
bson::Doc retryKeyOf(const bson::Fields& cmd, int stmt);

std::optional<std::vector<Id>> idsNamedBy(const bson_t* filter);

/// The archive command of a cold write: the client's command with only
/// `stmt` (under `arrayKey`; none for findAndModify, whose command is its
/// statement), the session `lsid`/`txnNumber`, and the protocol's majority,
/// journaled write concern.
bson::Doc coldCommand(const bson_t* cmd, const char* arrayKey, const bson_t* stmt,
                      const bson_t* lsid, int64_t txnNumber);

/// An error inside a transaction, with mongod's TransientTransactionError
/// label when the driver may retry the whole transaction.
bson::Doc txnErrorDoc(const Status& s);

/// The projection (`fields`) of a findAndModify that removes: the proxy
/// removes through its own delete (with tombstones) and applies the client's
/// projection to the removed document itself, with the store's query library.
struct RemoveProjection {
    std::unique_ptr<query::Matcher> matcher;  // positional projections check the query
    std::optional<query::Projection> projection;
    /// The removed document as the client asked for it, or the projection's error.
    StatusWith<bson::Doc> apply(const bson_t* doc) const;
};
/// Parsed before anything is removed: a bad projection fails as on mongod.
StatusWith<RemoveProjection> removeProjection(const bson_t* cmd);

/// Whether an aggregate's first pipeline stage is `stage`.
bool firstStageIs(const bson_t* cmd, std::string_view stage);

/// Whether a createIndexes command creates an index whose key is exactly the
/// one the proxy gives the fast tier on the age field ({ageField: 1}).
bool createsAgeIndex(const CollectionPolicy& p, const wire::OpMsg& msg, const bson_t* cmd);

asio::awaitable<Status> dropIndex(Tier& tier, const std::string& ns, const std::string& index);

// ---------------------------------------------------------------------------
// One client connection.

class ClientConnection : public net::FrameHandler {
  public:
    ClientConnection(Proxy& p, const net::ConnectionInfo& info)
        : p_(p),
          info_(info),
          slot_(p.operations(), info.id, info.remote),
          auth_(p.config().authorization, p.users(), p.authCounters(), info.remote,
                info.peerSubject) {}

    asio::awaitable<net::HandlerResult> onFrame(net::Frame frame) override;

  private:
    using Reply = StatusWith<bson::Doc>;

    /// Runs one command (any exception becomes an error reply) and completes
    /// the reply: the proxy's clock, and recoveryToken in a transaction.
    /// `fields`: cmd's top-level fields, read once by the caller.
    asio::awaitable<bson::Doc> runCommand(const wire::OpMsg& msg, const bson_t* cmd,
                                          const bson::Fields& fields, const std::string& db);
    /// listDatabases for a user without the listDatabases privilege.
    asio::awaitable<bson::Doc> listAuthorizedDatabases(const wire::OpMsg& msg, const bson_t* body);
    /// OK unless the command's lsid belongs to another user (Proxy::claimSession).
    Status sessionAllowed(const bson_t* cmd);
    /// A legacy OP_QUERY command: only those MongoDB 6.0+ still takes that way.
    asio::awaitable<bson::Doc> legacyCommand(const Frame& frame);
    /// `txn`: the client transaction the command is a statement of.
    asio::awaitable<bson::Doc> dispatch(const wire::OpMsg& msg, const bson_t* cmd,
                                        const std::string& db, const std::optional<TxnKey>& txn);
    /// A command as dispatch hands it to a handler.
    struct Request {
        const wire::OpMsg& msg;
        const bson_t* cmd;
        const std::string& db;
        const std::string& name;
        const bson_iter_t& first;  // the command's first element
    };
    /// The commands the proxy answers by name; every other command is routed
    /// by the collection it names (dispatch). `beforeAuth`: the handshake and
    /// authentication, which run before the privilege check.
    struct Command {
        std::function<asio::awaitable<bson::Doc>(ClientConnection&, const Request&)> run;
        bool beforeAuth = false;
    };
    static const std::unordered_map<std::string_view, Command>& commands();
    asio::awaitable<bson::Doc> helloCommand(const Request& r);
    /// saslStart, saslContinue, authenticate, logout, connectionStatus.
    asio::awaitable<bson::Doc> authCommand(const Request& r);
    /// {ok: 1} with the clock (ping).
    bson::Doc okReply();
    /// _isSelf: the proxy's own process id, never a tier's.
    bson::Doc isSelf();
    bson::Doc hello(const bson_t* cmd);
    bson::Doc status();
    /// haloclinePauseFeeder: <millis> (0 resumes): docs/OPERATIONS.md.
    asio::awaitable<bson::Doc> pauseFeeder(const bson_iter_t& arg);
    /// haloclineFlushFeeder: waits until the archive holds every write
    /// acknowledged before it (docs/OPERATIONS.md).
    asio::awaitable<bson::Doc> flushFeeder(const bson_t* cmd);
    asio::awaitable<bson::Doc> explainRouting(const bson_t* cmd, const std::string& db);
    /// explain: the chosen tier's plan plus a `halocline` section naming the tier and why.
    asio::awaitable<bson::Doc> explain(const wire::OpMsg& msg, const bson_t* cmd,
                                       const std::string& db);
    /// Where a command (in `db`) goes, and why (haloclineExplain and explain).
    struct Routing {
        std::string name;
        std::string ns;
        const CollectionPolicy* policy = nullptr;
        Decision decision;
    };
    Routing routingOf(const bson_t* inner, const std::string& db);
    void appendRouting(bson_t* out, const Routing& r);

    /// Sends to a tier and rewrites the reply for the client.
    asio::awaitable<bson::Doc> forward(Tier& tier, const wire::OpMsg& msg, const bson_t* body,
                                       const std::string& ns, bool fastTiered);
    asio::awaitable<Reply> send(Tier& tier, const wire::OpMsg& msg, const bson_t* body);
    /// The reply with the proxy's clock, and a new cursor registered under a
    /// proxy id (marked as `kind` is: a change stream's).
    bson::Doc rewriteReply(Tier& tier, const bson_t* reply, const std::string& ns, bool fastTiered,
                           const CursorEntry* kind = nullptr);
    /// Registers a cursor of this connection's current command (its user and
    /// session) and returns the proxy's id for it.
    int64_t addCursor(CursorEntry e);
    /// The reply with the proxy's clock and each non-zero cursor id mapped by `mapCursor`.
    bson::Doc rewriteReplyWith(Tier& tier, const bson_t* reply,
                               const std::function<int64_t(int64_t)>& mapCursor);
    void appendClock(bson_t* out, OpTime operationTime);
    /// A find's reply holding every document of a merged read (no cursor left open).

    asio::awaitable<bson::Doc> getMore(const bson_t* cmd);
    asio::awaitable<bson::Doc> killCursors(const bson_t* cmd);
    /// DDL on both tiers, the archive first. For a tiered collection `p`, an
    /// application index on the age field replaces the proxy's own one.
    asio::awaitable<bson::Doc> bothTiers(const wire::OpMsg& msg, const bson_t* cmd,
                                         const CollectionPolicy* p = nullptr);

    asio::awaitable<bson::Doc> tieredRead(const CollectionPolicy& p, std::string_view name,
                                          const wire::OpMsg& msg, const bson_t* cmd);
    /// A change stream on a tiered collection (changeStreams: true): the fast
    /// tier's, without the protocol's own writes (CONSISTENCY.md, Change streams).
    asio::awaitable<bson::Doc> changeStream(const CollectionPolicy& p, const wire::OpMsg& msg,
                                            const bson_t* cmd);
    /// Whether a database or cluster stream may cover the tiered collections
    /// `scope` (each needs changeStreams: true); 115 naming one that does not.
    Status mergedStreamAllowed(const std::vector<const CollectionPolicy*>& scope,
                               const std::string& db);
    /// A change stream on a database or the cluster covering the tiered
    /// collections `scope`: the fast tier's stream for them merged with the
    /// archive's for the rest (CONSISTENCY.md, Change streams).
    asio::awaitable<bson::Doc> mergedChangeStream(
        const wire::OpMsg& msg, const bson_t* cmd,
        const std::vector<const CollectionPolicy*>& scope);
    asio::awaitable<bson::Doc> mergedGetMore(const CursorEntry& e, int64_t id, const bson_t* cmd);
    /// The client's batch of a merged stream from one batch of each tier;
    /// advances the stream's positions. `id`: the proxy's cursor id, 0 when done.
    asio::awaitable<bson::Doc> mergedBatch(MergedStream& s, StreamBatch& fast, StreamBatch& archive,
                                           const char* key, int64_t id);
    /// A change stream's reply (first batch or getMore) with each event
    /// completed by completeEvent.
    asio::awaitable<bson::Doc> completeEvents(const CollectionPolicy& p, const bson_t* reply,
                                              bool lookup);
    /// An event as mongod would show it: without the session of the proxy's
    /// own delete transaction; with `lookup`, an update's fullDocument that the
    /// fast tier no longer had (evicted since) read through the proxy's routing.
    asio::awaitable<bson::Doc> completeEvent(const CollectionPolicy& p, const bson_t* event,
                                             bool lookup);
    asio::awaitable<bson::Doc> tieredWrite(const CollectionPolicy& p, std::string_view name,
                                           const wire::OpMsg& msg, const bson_t* cmd);
    asio::awaitable<bson::Doc> tieredDelete(const CollectionPolicy& p, const wire::OpMsg& msg,
                                            const bson_t* cmd);
    asio::awaitable<bson::Doc> tieredRemove(const CollectionPolicy& p, const bson_t* cmd);
    /// findAndModify's reply for a delete (`value` the deleted document).
    bson::Doc removeReply(const DeleteResult& r, const RemoveProjection& projection);

    /// A statement of a client transaction (CONSISTENCY.md, Transactions):
    /// its reply, or nullopt when it runs in the archive like any command on
    /// an untiered collection.
    asio::awaitable<std::optional<bson::Doc>> transactionStatement(
        const TxnKey& k, const wire::OpMsg& msg, const bson_t* cmd, std::string_view name,
        const std::string& ns, const CollectionPolicy* policy);
    /// A statement on a tiered collection, in the fast tier after promotion.
    asio::awaitable<bson::Doc> tieredTxnStatement(const CollectionPolicy& p, std::string_view name,
                                                  const wire::OpMsg& msg, const bson_t* cmd);
    /// commitTransaction and abortTransaction, sent to the transaction's tier.
    asio::awaitable<bson::Doc> endTransaction(const wire::OpMsg& msg, const bson_t* cmd);
    /// What a statement of a transaction may touch, pinned and promoted; the
    /// candidates snapshotHolds() checks for a statement after the first.
    struct TxnNeed {
        std::vector<Id> ids;
        bool range = false;
    };
    asio::awaitable<Status> prepareInTxn(const CollectionPolicy& p, const bson_t* filter,
                                         const bson_t* matchOptions,
                                         std::optional<std::vector<Id>> ids,
                                         std::vector<Pinned>* pins, std::vector<TxnNeed>* needs);
    /// prepareInTxn for a read command (its filter, or the id it looks up);
    /// nothing for a read the fast tier provably answers whole.
    asio::awaitable<Status> prepareRead(const CollectionPolicy& p, std::string_view name,
                                        const bson_t* cmd, std::vector<Pinned>* pins,
                                        std::vector<TxnNeed>* needs);
    /// A read with readConcern snapshot outside a transaction: on the fast tier,
    /// at the snapshot, after what it may see was copied up (CONSISTENCY.md).
    asio::awaitable<bson::Doc> snapshotRead(const CollectionPolicy& p, std::string_view name,
                                            const wire::OpMsg& msg, const bson_t* cmd);
    /// Pins and promotes what a write with `filter` can touch under
    /// `matchOptions` (matchOptionsOf) (appends to `pins`).
    asio::awaitable<Status> prepare(const CollectionPolicy& p, const bson_t* filter,
                                    const bson_t* matchOptions, std::vector<Pinned>* pins);
    /// CONSISTENCY.md, Cold writes: the one statement `stmt` of `cmd` (of
    /// kind "update", "delete" or "findAndModify") runs in the archive when
    /// its document lives only there, and a retry of a statement that ran
    /// there goes there again: the archive's reply. nullopt: the write runs
    /// in the fast tier, prepared (`pins`) like any other.
    asio::awaitable<StatusWith<std::optional<bson::Doc>>> prepareOrWriteCold(
        const CollectionPolicy& p, std::string_view kind, const bson_t* cmd, const char* arrayKey,
        const bson_t* stmt, const bson_t* filter, std::vector<Pinned>* pins);
    /// Unpins in the background: the write is done, so the client need not
    /// wait for the pins' own journal sync (a pin a crash leaves behind goes
    /// stale and the evictor ignores it, kStalePinMillis).
    void release(std::vector<Pinned>& pins);
    asio::awaitable<Status> awaitFeeder(const std::string& ns, OpTime after);
    /// $collStats on a tiered collection: the archive's figures, plus the fast
    /// tier's count and sizes in a `halocline` section of each result.
    asio::awaitable<bson::Doc> collStats(const CollectionPolicy& p, const wire::OpMsg& msg,
                                         const bson_t* cmd);
    /// OK unless the read could include a document the archive refused
    /// (CONSISTENCY.md, Refused documents): then an error naming it.
    asio::awaitable<Status> checkRefused(const CollectionPolicy& p, std::string_view name,
                                         const bson_t* cmd);

    /// currentOp/$currentOp (the proxy's own operations), killOp, connPoolStats.
    asio::awaitable<bson::Doc> currentOp(const bson_t* cmd, const std::string& name);
    bson::Doc killOp(const bson_t* cmd);
    /// killSessions, killAllSessions and killAllSessionsByPattern: the client
    /// sessions they name, never the proxy's own (its workers' and promotions'
    /// sessions on the tiers).
    asio::awaitable<bson::Doc> killSessions(const Request& r);
    bson::Doc connPoolStats();

    /// Test commands (proxy_testing.cpp): configureFailPoint; failCommand
    /// before a command runs (an error reply, or nothing: run it) and after
    /// (a writeConcernError it makes up).
    bson::Doc configureFailPoint(const bson_t* cmd);
    asio::awaitable<std::optional<bson::Doc>> failCommandBefore(std::string_view name,
                                                                const std::string& db,
                                                                const bson_t* cmd);
    void failCommandAfter(std::string_view name, const std::string& db, const bson_t* cmd,
                          bson::Doc& reply);
    /// A merged read's reply: the first batch as asked, the rest held by the
    /// proxy under a cursor id of its own (bufferedGetMore serves it).
    bson::Doc mergedReply(const MergedShape& shape, std::string_view name, const bson_t* cmd,
                          const std::string& ns, std::vector<bson::Doc> docs);
    bson::Doc bufferedGetMore(const CursorEntry& e, int64_t id, const bson_t* cmd);
    /// failGetMoreAfterCursorCheckout: the error for a getMore on cursor `id`
    /// (`e`), which is gone; nothing when the point does not fire.
    std::optional<bson::Doc> failGetMoreAfterCheckout(const bson_t* cmd, const CursorEntry& e,
                                                      int64_t id);
    store::FailPointTarget failPointTarget(std::string_view name, const std::string& db,
                                           const bson_t* cmd) const;

    Proxy& p_;
    net::ConnectionInfo info_;
    bson::Doc clientMetadata_;      // the handshake's `client` document
    bool closeAfterReply_ = false;  // failCommand's closeConnection: no reply, the connection goes
    OperationSlot slot_;
    // The running command's top-level fields (runCommand's index), for lookups
    // on the hot path; null between commands.
    const bson::Fields* fields_ = nullptr;
    /// `cmd`'s field index: the running command's when `cmd` is it, else one
    /// read into `own` (a pass over `cmd`, as one lookup would cost).
    const bson::Fields& fieldsOf(const bson_t* cmd, std::optional<bson::Fields>& own) const {
        if (fields_ && fields_->doc() == cmd) return *fields_;
        return own.emplace(cmd);
    }
    ClientAuth auth_;
    std::optional<wire::Compressor> compressor_;
    int32_t nextResponseId_ = 1;
};

}  // namespace halo::tiering
