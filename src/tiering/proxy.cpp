#include "tiering/proxy.h"

#include <fmt/format.h>

#include <functional>
#include <future>
#include <limits>
#include <set>
#include <span>

#include "common/clock.h"
#include "common/log.h"
#include "net/tls.h"
#include "store/query/matcher.h"
#include "tiering/client_auth.h"
#include "tiering/cold_write.h"
#include "tiering/merged_read.h"
#include "tiering/transactions.h"
#include "tiering/worker_context.h"
#include "tiering/workers.h"
#include "wire/message.h"

namespace halo::tiering {

namespace {

constexpr int32_t kDefaultMaxWire = 17;  // MongoDB 6.0

OpTime toOpTime(const bson_iter_t& it) {
    if (!BSON_ITER_HOLDS_TIMESTAMP(&it)) return 0;
    uint32_t t, i;
    bson_iter_timestamp(&it, &t, &i);
    return (static_cast<OpTime>(t) << 32) | i;
}

void appendOpTime(bson_t* b, const char* key, OpTime t) {
    bson_append_timestamp(b, key, -1, static_cast<uint32_t>(t >> 32),
                          static_cast<uint32_t>(t & 0xffffffff));
}

std::string str(const bson_t* d, const char* k) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

/// A getMore or killCursors on a cursor another user opened (mongod: 13).
Status notCursorOwner(const char* cmd, int64_t id, const std::string& ns) {
    auto [db, coll] = splitNs(ns);
    return Status(ErrorCode::Unauthorized,
                  fmt::format("not authorized on {} to execute command {{ {}: {}, collection: "
                              "\"{}\" }}: the cursor belongs to another user",
                              db, cmd, id, coll));
}

Status interrupted() {
    return Status(ErrorCode::Interrupted, "operation was interrupted");
}

bson::Doc errorDoc(const Status& s) {
    bson::Doc d;
    BSON_APPEND_DOUBLE(d.mut(), "ok", 0.0);
    bson::appendMessage(d.mut(), "errmsg", s.reason());
    BSON_APPEND_INT32(d.mut(), "code", s.codeNumber());
    std::string name(codeName(s.code()));
    BSON_APPEND_UTF8(d.mut(), "codeName", name.c_str());
    return d;
}

/// The afterClusterTime of a command's readConcern, 0 when none.
OpTime afterClusterTime(const bson_t* cmd) {
    bson_t rc;
    if (!bson::subDocument(cmd, "readConcern", &rc)) return 0;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, &rc, "afterClusterTime")) return 0;
    return toOpTime(it);
}

/// A copy of `cmd` fit to send to a tier: without the client's $clusterTime
/// (it belongs to the proxy's clock), and for the archive without
/// afterClusterTime (the archive has its own clock; the proxy waits instead).
bson::Doc forwardBody(const bson_t* cmd, bool toArchive) {
    bson::Doc out;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        // recoveryToken is the proxy's own (see withRecoveryToken): no tier needs it.
        if (k == "$clusterTime" || k == "recoveryToken") continue;
        if (toArchive && k == "readConcern" && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t rc;
            bson_iter_recurse(&it, &rc);
            bson_t sub;
            bson_append_document_begin(out.mut(), "readConcern", -1, &sub);
            while (bson_iter_next(&rc))
                if (std::string_view(bson_iter_key(&rc)) != "afterClusterTime")
                    bson_append_iter(&sub, nullptr, 0, &rc);
            bson_append_document_end(out.mut(), &sub);
            continue;
        }
        bson_append_iter(out.mut(), nullptr, 0, &it);
    }
    return out;
}

/// The whole request frame for a tier: the new body plus the client's
/// document sequences, copied byte for byte.
Frame buildForward(const wire::OpMsg& msg, const bson_t* body) {
    std::vector<bson::View> views;
    size_t total = 0;
    for (auto& s : msg.sequences) total += s.documents.size();
    views.reserve(total);
    std::vector<std::pair<std::string, std::vector<const bson_t*>>> seqs;
    for (auto& s : msg.sequences) {
        std::vector<const bson_t*> docs;
        for (auto& d : s.documents) {
            views.emplace_back(d.data(), d.size());
            docs.push_back(views.back().get());
        }
        seqs.emplace_back(s.identifier, std::move(docs));
    }
    // Never moreToCome (nor exhaustAllowed): the tier answers every request the
    // proxy sends, so a tier connection always holds exactly one reply to read.
    // A client's moreToCome request is still unanswered towards the client.
    return seqs.empty() ? wire::buildOpMsg(0, 0, body)
                        : wire::buildOpMsgWithSequences(0, 0, body, seqs);
}

StatusWith<bson::Doc> bodyOf(const Frame& f) {
    // A tier's reply: bounds only (Validation::Bounds); clients' requests are validated fully.
    auto m = wire::parseOpMsg(f, wire::Validation::Bounds);
    if (!m.isOK()) return m.getStatus();
    return bson::Doc::copyOf(m.getValue().body.data(), m.getValue().body.size());
}

bool isWriteCommand(std::string_view c) {
    return c == "insert" || c == "update" || c == "delete" || c == "findAndModify" ||
           c == "findandmodify";
}

bool isReadCommand(std::string_view c) {
    return c == "find" || c == "count" || c == "distinct" || c == "aggregate";
}

bool isDdlCommand(std::string_view c) {
    return c == "create" || c == "createIndexes" || c == "dropIndexes" || c == "drop" ||
           c == "collMod" || c == "deleteIndexes";
}

/// Documents of an array field or a document sequence named `name`, as byte
/// spans (a bson::View must not be copied: a static bson_t points into itself).
std::vector<std::span<const uint8_t>> statements(const wire::OpMsg& msg, const bson_t* body,
                                                 const char* name) {
    std::vector<std::span<const uint8_t>> out;
    for (auto& s : msg.sequences)
        if (s.identifier == name)
            for (auto& d : s.documents) out.push_back(d);
    bson_iter_t it, arr;
    if (bson_iter_init_find(&it, body, name) && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr)) {
        while (bson_iter_next(&arr)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) continue;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&arr, &len, &data);
            out.emplace_back(data, len);
        }
    }
    return out;
}

/// {lsid, txnNumber, stmt} of a retryable write's statement; empty when the
/// command is not a retryable write.
/// A find whose answer is empty exactly when no document has the _id: the
/// filter names nothing else, and no skip, collation or index bounds can
/// exclude the document.
bool plainIdLookup(const bson_t* cmd) {
    bson_t filter;
    if (!bson::subDocument(cmd, "filter", &filter) || bson_count_keys(&filter) != 1) return false;
    for (const char* k : {"skip", "collation", "min", "max"})
        if (bson_has_field(cmd, k)) return false;
    return true;
}

bson::Doc retryKeyOf(const bson_t* cmd, int stmt) {
    bson::Doc key;
    bson_t lsid;
    bson_iter_t it;
    if (!bson::subDocument(cmd, "lsid", &lsid) || !bson_iter_init_find(&it, cmd, "txnNumber") ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return key;
    BSON_APPEND_DOCUMENT(key.mut(), "lsid", &lsid);
    BSON_APPEND_INT64(key.mut(), "txnNumber", bson_iter_as_int64(&it));
    BSON_APPEND_INT32(key.mut(), "stmt", stmt);
    return key;
}

std::optional<std::vector<Id>> idsNamedBy(const bson_t* filter) {
    if (auto id = exactId(filter)) {
        std::vector<Id> v;
        v.push_back(std::move(*id));
        return v;
    }
    bson_iter_t it, sub, arr;
    if (bson_iter_init_find(&it, filter, "_id") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &sub) && bson_iter_next(&sub) &&
        std::string_view(bson_iter_key(&sub)) == "$in" && BSON_ITER_HOLDS_ARRAY(&sub)) {
        bson_iter_t again = sub;
        if (bson_iter_next(&again)) return std::nullopt;  // more operators than $in
        std::vector<Id> v;
        bson_iter_recurse(&sub, &arr);
        while (bson_iter_next(&arr)) {
            if (BSON_ITER_HOLDS_REGEX(&arr)) return std::nullopt;
            v.push_back(makeId(*bson_iter_value(&arr)));
        }
        return v;
    }
    return std::nullopt;
}

/// The archive command of a cold write: the client's command with only
/// `stmt` (under `arrayKey`; none for findAndModify, whose command is its
/// statement), the session `lsid`/`txnNumber`, and the protocol's majority,
/// journaled write concern.
bson::Doc coldCommand(const bson_t* cmd, const char* arrayKey, const bson_t* stmt,
                      const bson_t* lsid, int64_t txnNumber) {
    bson::Doc out;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "lsid" || k == "txnNumber" || k == "writeConcern" || k == "$clusterTime" ||
            k == "recoveryToken" || (arrayKey && k == arrayKey))
            continue;
        bson_append_iter(out.mut(), nullptr, 0, &it);
    }
    if (arrayKey) {
        bson_t arr;
        bson_append_array_begin(out.mut(), arrayKey, -1, &arr);
        bson_append_document(&arr, "0", 1, stmt);
        bson_append_array_end(out.mut(), &arr);
    }
    BSON_APPEND_DOCUMENT(out.mut(), "lsid", lsid);
    BSON_APPEND_INT64(out.mut(), "txnNumber", txnNumber);
    appendMajority(out.mut());
    return out;
}

/// An error inside a transaction, with mongod's TransientTransactionError
/// label when the driver may retry the whole transaction.
bson::Doc txnErrorDoc(const Status& s) {
    bson::Doc d = errorDoc(s);
    if (transientInTransaction(s)) {
        bson_t labels;
        BSON_APPEND_ARRAY_BEGIN(d.mut(), "errorLabels", &labels);
        BSON_APPEND_UTF8(&labels, "0", "TransientTransactionError");
        bson_append_array_end(d.mut(), &labels);
    }
    return d;
}

/// A findAndModify that removes, as the proxy runs it on a tiered collection.
Status removeSupported(const bson_t* cmd) {
    bson_t fields;
    if (bson::subDocument(cmd, "fields", &fields) && !bson_empty(&fields))
        return Status(ErrorCode::InvalidOptions,
                      "halocline: findAndModify with remove and a projection is not supported "
                      "on a tiered collection");
    return Status::OK();
}

/// Whether an aggregate's first pipeline stage is `stage`.
bool firstStageIs(const bson_t* cmd, std::string_view stage) {
    bson_t pipeline;
    bson_iter_t it, st;
    return bson::subDocument(cmd, "pipeline", &pipeline) && bson_iter_init(&it, &pipeline) &&
           bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &st) &&
           bson_iter_next(&st) && stage == bson_iter_key(&st);
}

/// Whether a createIndexes command creates an index whose key is exactly the
/// one the proxy gives the fast tier on the age field ({ageField: 1}).
bool createsAgeIndex(const CollectionPolicy& p, const wire::OpMsg& msg, const bson_t* cmd) {
    for (auto spec : statements(msg, cmd, "indexes")) {
        bson::View v(spec.data(), spec.size());
        bson_t key;
        bson_iter_t it;
        if (!bson::subDocument(v.get(), "key", &key) || bson_count_keys(&key) != 1 ||
            !bson_iter_init(&it, &key) || !bson_iter_next(&it))
            continue;
        if (p.ageField == bson_iter_key(&it) && BSON_ITER_HOLDS_NUMBER(&it) &&
            bson_iter_as_double(&it) == 1.0)
            return true;
    }
    return false;
}

asio::awaitable<Status> dropIndex(Tier& tier, const std::string& ns, const std::string& index) {
    auto [db, coll] = splitNs(ns);
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "dropIndexes", coll.c_str());
    BSON_APPEND_UTF8(c.mut(), "index", index.c_str());
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    auto r = co_await tier.runOk(c.get());
    co_return r.getStatus();
}

}  // namespace

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
    asio::awaitable<bson::Doc> runCommand(const wire::OpMsg& msg, const bson_t* cmd,
                                          const std::string& db);
    /// listDatabases for a user without the listDatabases privilege.
    asio::awaitable<bson::Doc> listAuthorizedDatabases(const wire::OpMsg& msg, const bson_t* body);
    /// OK unless the command's lsid belongs to another user (Proxy::claimSession).
    Status sessionAllowed(const bson_t* cmd);
    /// A legacy OP_QUERY command: only those MongoDB 6.0+ still takes that way.
    asio::awaitable<bson::Doc> legacyCommand(const Frame& frame);
    asio::awaitable<bson::Doc> dispatch(const wire::OpMsg& msg, const bson_t* cmd,
                                        const std::string& db);
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
    bson::Doc removeReply(const DeleteResult& r);

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
                                         const bson_t* collation,
                                         std::optional<std::vector<Id>> ids,
                                         std::vector<Pinned>* pins, std::vector<TxnNeed>* needs);
    /// Pins and promotes what a write with `filter` can touch (appends to `pins`).
    asio::awaitable<Status> prepare(const CollectionPolicy& p, const bson_t* filter,
                                    std::vector<Pinned>* pins);
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
    bson::Doc connPoolStats();

    Proxy& p_;
    net::ConnectionInfo info_;
    OperationSlot slot_;
    ClientAuth auth_;
    std::optional<wire::Compressor> compressor_;
    int32_t nextResponseId_ = 1;
};

asio::awaitable<net::HandlerResult> ClientConnection::onFrame(net::Frame frame) {
    auto hsw = wire::parseHeader(frame);
    if (!hsw.isOK() || static_cast<size_t>(hsw.getValue().messageLength) != frame.size())
        co_return net::HandlerResult{std::nullopt, true};
    wire::Header h = hsw.getValue();
    std::optional<wire::Compressor> replyCompressor;
    if (h.opCode == static_cast<int32_t>(wire::OpCode::Compressed)) {
        auto d = wire::decompress(h, std::span<const uint8_t>(frame).subspan(wire::kHeaderSize));
        if (!d.isOK()) co_return net::HandlerResult{std::nullopt, true};
        replyCompressor = static_cast<wire::Compressor>(frame[wire::kHeaderSize + 8]);
        if (*replyCompressor == wire::Compressor::Noop) replyCompressor.reset();
        frame = std::move(d.getValue());
        h = wire::parseHeader(frame).getValue();
    }
    auto finish = [&](Frame out) -> net::HandlerResult {
        if (replyCompressor) {
            auto c = wire::compress(out, *replyCompressor);
            if (c.isOK()) out = std::move(c.getValue());
        }
        return {std::move(out), false};
    };
    if (h.opCode == static_cast<int32_t>(wire::OpCode::Query)) {
        bson::Doc reply = co_await legacyCommand(frame);
        co_return finish(wire::buildOpReply(nextResponseId_++, h.requestId, reply.get()));
    }
    if (h.opCode != static_cast<int32_t>(wire::OpCode::Msg))
        co_return net::HandlerResult{std::nullopt, true};
    auto m = wire::parseOpMsg(frame);
    bson::Doc reply;
    // moreToCome: the client expects no reply (w: 0 writes). The command still
    // runs to completion before the next message is read, as on mongod.
    // exhaustAllowed is honoured by never streaming: each request gets one reply.
    bool moreToCome = false;
    if (!m.isOK()) {
        reply = errorDoc(m.getStatus());
    } else {
        moreToCome = (m.getValue().flags & wire::kMoreToCome) != 0;
        bson::View body(m.getValue().body.data(), m.getValue().body.size());
        std::string db = str(body.get(), "$db");
        if (db.empty())
            reply = errorDoc(
                Status(ErrorCode::Location40571, "OP_MSG requests require a $db argument"));
        else
            reply = co_await runCommand(m.getValue(), body.get(), db);
    }
    if (moreToCome) co_return net::HandlerResult{std::nullopt, false};
    co_return finish(wire::buildOpMsg(nextResponseId_++, h.requestId, reply.get()));
}

Status ClientConnection::sessionAllowed(const bson_t* cmd) {
    std::string principal = auth_.principal();
    if (principal.empty()) return Status::OK();
    bson_t lsid;
    bson_iter_t it;
    if (!bson::subDocument(cmd, "lsid", &lsid) || !bson_iter_init_find(&it, &lsid, "id") ||
        !BSON_ITER_HOLDS_BINARY(&it))
        return Status::OK();
    bson_subtype_t st;
    uint32_t len;
    const uint8_t* data;
    bson_iter_binary(&it, &st, &len, &data);
    return p_.claimSession(std::string(reinterpret_cast<const char*>(data), len), principal);
}

asio::awaitable<bson::Doc> ClientConnection::legacyCommand(const Frame& frame) {
    auto q = wire::parseOpQuery(frame);
    if (!q.isOK()) co_return errorDoc(q.getStatus());
    const std::string& ns = q.getValue().fullCollectionName;
    auto dot = ns.find('.');
    if (dot == std::string::npos || ns.substr(dot + 1) != "$cmd")
        co_return errorDoc(
            Status(ErrorCode::Location5739101,
                   "OP_QUERY is no longer supported. The client driver may require an upgrade."));
    bson::View v(q.getValue().query.data(), q.getValue().query.size());
    const bson_t* cmd = v.get();
    bson_t inner;
    if (bson::subDocument(cmd, "$query", &inner) || bson::subDocument(cmd, "query", &inner))
        cmd = &inner;
    bson_iter_t it;
    std::string name;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it)) name = bson_iter_key(&it);
    Status allowed = wire::checkOpQueryCommand(name);
    if (!allowed.isOK()) co_return errorDoc(allowed);
    // The same command as an OP_MSG body would carry it.
    std::string db = ns.substr(0, dot);
    bson::Doc body;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it))
        if (std::string_view(bson_iter_key(&it)) != "$db")
            bson_append_iter(body.mut(), nullptr, 0, &it);
    BSON_APPEND_UTF8(body.mut(), "$db", db.c_str());
    co_return co_await runCommand(wire::OpMsg{}, body.get(), db);
}

asio::awaitable<bson::Doc> ClientConnection::runCommand(const wire::OpMsg& msg, const bson_t* cmd,
                                                        const std::string& db) {
    bson::Doc reply;
    slot_.begin(cmd, db, auth_.principal());
    try {
        Status own = sessionAllowed(cmd);
        if (!own.isOK())
            reply = errorDoc(own);
        else
            reply = co_await dispatch(msg, cmd, db);
    } catch (const DBException& e) {
        reply = errorDoc(e.status());
    } catch (const std::exception& e) {
        reply = errorDoc(Status(ErrorCode::InternalError, e.what()));
    }
    slot_.end();
    // Every reply carries the clock (docs/CONSISTENCY.md, Clocks and sessions),
    // errors included, as mongod's do.
    if (!bson_has_field(reply.get(), "$clusterTime")) appendClock(reply.mut(), 0);
    // In a transaction, the token a driver resends with commitTransaction or
    // abortTransaction, to this or another proxy (mongos' recoveryToken).
    if (bson_has_field(cmd, "txnNumber") && bson_has_field(cmd, "autocommit") &&
        !bson_has_field(reply.get(), "recoveryToken")) {
        std::optional<TxnTable::Entry> e;
        if (auto k = txnKeyOf(cmd)) e = p_.transactions().find(*k);
        Tier& tier = e && e->side == TxnSide::Fast ? p_.fast() : p_.archive();
        bson_t tok;
        BSON_APPEND_DOCUMENT_BEGIN(reply.mut(), "recoveryToken", &tok);
        BSON_APPEND_UTF8(&tok, "recoveryShardId", tier.name().c_str());
        bson_append_document_end(reply.mut(), &tok);
    }
    co_return reply;
}

bson::Doc ClientConnection::hello(const bson_t* cmd) {
    TierInfo f = p_.fast().info(), a = p_.archive().info();
    bson::Doc d;
    bool modern = bson_has_field(cmd, "hello");
    if (modern)
        BSON_APPEND_BOOL(d.mut(), "isWritablePrimary", true);
    else
        BSON_APPEND_BOOL(d.mut(), "ismaster", true);
    if (truthy(cmd, "helloOk")) BSON_APPEND_BOOL(d.mut(), "helloOk", true);
    BSON_APPEND_UTF8(d.mut(), "msg", "isdbgrid");
    BSON_APPEND_INT32(d.mut(), "maxBsonObjectSize",
                      std::min(f.maxBsonObjectSize, a.maxBsonObjectSize));
    BSON_APPEND_INT32(d.mut(), "maxMessageSizeBytes",
                      std::min(f.maxMessageSizeBytes, a.maxMessageSizeBytes));
    BSON_APPEND_INT32(d.mut(), "maxWriteBatchSize",
                      std::min(f.maxWriteBatchSize, a.maxWriteBatchSize));
    BSON_APPEND_DATE_TIME(d.mut(), "localTime", nowMillis());
    BSON_APPEND_INT64(d.mut(), "logicalSessionTimeoutMinutes",
                      std::min(f.logicalSessionTimeoutMinutes, a.logicalSessionTimeoutMinutes));
    BSON_APPEND_INT64(d.mut(), "connectionId", static_cast<int64_t>(info_.id));
    BSON_APPEND_INT32(d.mut(), "minWireVersion", std::max(f.minWireVersion, a.minWireVersion));
    int32_t maxWire = std::min(f.maxWireVersion ? f.maxWireVersion : kDefaultMaxWire,
                               a.maxWireVersion ? a.maxWireVersion : kDefaultMaxWire);
    BSON_APPEND_INT32(d.mut(), "maxWireVersion", maxWire);
    BSON_APPEND_BOOL(d.mut(), "readOnly", false);
    bson_t comp;
    if (bson::subDocument(cmd, "compression", &comp)) {
        bson_iter_t it;
        bson_iter_init(&it, &comp);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) continue;
            wire::Compressor c;
            if (wire::compressorFromName(bson_iter_utf8(&it, nullptr), &c) &&
                c != wire::Compressor::Noop) {
                bson_t arr;
                BSON_APPEND_ARRAY_BEGIN(d.mut(), "compression", &arr);
                BSON_APPEND_UTF8(&arr, "0", bson_iter_utf8(&it, nullptr));
                bson_append_array_end(d.mut(), &arr);
                compressor_ = c;
                break;
            }
        }
    }
    appendClock(d.mut(), 0);
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    return d;
}

void ClientConnection::appendClock(bson_t* out, OpTime operationTime) {
    OpTime now = p_.state().fastClusterTime.load();
    if (operationTime) appendOpTime(out, "operationTime", operationTime);
    if (!now) return;
    bson_t ct, sig;
    BSON_APPEND_DOCUMENT_BEGIN(out, "$clusterTime", &ct);
    appendOpTime(&ct, "clusterTime", now);
    BSON_APPEND_DOCUMENT_BEGIN(&ct, "signature", &sig);
    uint8_t zeros[20] = {};
    bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zeros, sizeof zeros);
    BSON_APPEND_INT64(&sig, "keyId", 0);
    bson_append_document_end(&ct, &sig);
    bson_append_document_end(out, &ct);
}

asio::awaitable<ClientConnection::Reply> ClientConnection::send(Tier& tier, const wire::OpMsg& msg,
                                                                const bson_t* body) {
    slot_.sentTo(tier.name().c_str());
    auto r = co_await tier.roundTrip(buildForward(msg, body));
    if (!r.isOK()) co_return r.getStatus();
    if (slot_.killed()) co_return interrupted();
    co_return bodyOf(r.getValue());
}

bson::Doc ClientConnection::rewriteReply(Tier& tier, const bson_t* reply, const std::string& ns,
                                         bool fastTiered, const CursorEntry* kind) {
    return rewriteReplyWith(tier, reply, [&](int64_t remote) {
        CursorEntry e;
        if (kind) {
            e.changeStream = kind->changeStream;
            e.updateLookup = kind->updateLookup;
        }
        e.tier = &tier;
        e.remoteId = remote;
        e.ns = ns;
        e.fastTiered = fastTiered;
        e.owner = auth_.principal();
        std::vector<CursorEntry> dropped;
        int64_t id = p_.cursors().add(std::move(e), &dropped);
        if (!dropped.empty()) p_.killRemote(dropped);
        return id;
    });
}

bson::Doc ClientConnection::rewriteReplyWith(Tier& tier, const bson_t* reply,
                                             const std::function<int64_t(int64_t)>& mapCursor) {
    bool fromFast = &tier == &p_.fast();
    bson::Doc out;
    OpTime opTime = 0;
    bson_iter_t it;
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "$clusterTime") {
            bson_iter_t sub;
            if (fromFast && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
                bson_iter_find(&sub, "clusterTime"))
                p_.state().noteFastTime(toOpTime(sub));
            continue;
        }
        if (k == "operationTime") {
            if (fromFast) {
                opTime = toOpTime(it);
                p_.state().noteFastTime(opTime);
            }
            continue;
        }
        if (k == "cursor" && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t c;
            bson_iter_recurse(&it, &c);
            bson_t sub;
            bson_append_document_begin(out.mut(), "cursor", 6, &sub);
            while (bson_iter_next(&c)) {
                if (std::string_view(bson_iter_key(&c)) == "id") {
                    int64_t remote = bson_iter_as_int64(&c);
                    BSON_APPEND_INT64(&sub, "id", remote == 0 ? 0 : mapCursor(remote));
                    continue;
                }
                bson_append_iter(&sub, nullptr, 0, &c);
            }
            bson_append_document_end(out.mut(), &sub);
            continue;
        }
        bson_append_iter(out.mut(), nullptr, 0, &it);
    }
    if (!fromFast) opTime = p_.state().fastClusterTime.load();
    appendClock(out.mut(), opTime);
    return out;
}

asio::awaitable<bson::Doc> ClientConnection::forward(Tier& tier, const wire::OpMsg& msg,
                                                     const bson_t* body, const std::string& ns,
                                                     bool fastTiered) {
    auto r = co_await send(tier, msg, body);
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    co_return rewriteReply(tier, r.getValue().get(), ns, fastTiered);
}

namespace {

/// {ping: 1, $db: "admin"}, built once: archive reads send it on every call.
const bson_t* pingCommand() {
    static const bson::Doc cmd = [] {
        bson::Doc d;
        BSON_APPEND_INT32(d.mut(), "ping", 1);
        BSON_APPEND_UTF8(d.mut(), "$db", "admin");
        return d;
    }();
    return cmd.get();
}

}  // namespace

asio::awaitable<Status> ClientConnection::awaitFeeder(const std::string& ns, OpTime after) {
    if (!p_.config().causalReads && after == 0) co_return Status::OK();
    slot_.sentTo(p_.fast().name().c_str());
    auto timeout = p_.config().causalWaitTimeout;
    if (!p_.config().causalReads)
        co_return co_await p_.awaitApplied(after, ns, timeout, [this] { return slot_.killed(); });
    // Every write acknowledged before this read, through this proxy or any
    // other, is at or before the fast tier's time now.
    auto r = co_await p_.writesBefore();
    if (!r.isOK()) co_return r.getStatus();
    co_return co_await p_.awaitApplied(std::max(after, r.getValue()), ns, timeout,
                                       [this] { return slot_.killed(); });
}

asio::awaitable<bson::Doc> ClientConnection::dispatch(const wire::OpMsg& msg, const bson_t* cmd,
                                                      const std::string& db) {
    bson_iter_t first;
    if (!bson_iter_init(&first, cmd) || !bson_iter_next(&first))
        co_return errorDoc(Status(ErrorCode::Location40571, "empty command"));
    std::string name = bson_iter_key(&first);
    if (!bson_utf8_validate(db.data(), db.size(), false))
        // As the store and mongod refuse it: it would come back in namespaces and messages.
        co_return errorDoc(Status(ErrorCode::InvalidNamespace,
                                  fmt::format("Invalid database name: '{}': names must be valid "
                                              "UTF-8",
                                              bson::printableUtf8(db))));
    if (Status named = bson::commandTargetUtf8(cmd, db); !named.isOK()) co_return errorDoc(named);
    if (name == "hello" || name == "isMaster" || name == "ismaster") {
        bson::Doc d = hello(cmd);
        co_await auth_.appendToHello(cmd, d.mut());
        co_return d;
    }
    if (name == "ping") {
        bson::Doc d;
        BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
        appendClock(d.mut(), 0);
        co_return d;
    }
    // Authentication happens here, never on a tier: forwarded, these would act on
    // a pooled tier connection that the proxy authenticated as itself.
    if (!auth_.enabled() && (name == "saslStart" || name == "saslContinue" ||
                             name == "authenticate" || name == "logout"))
        co_return errorDoc(
            Status(ErrorCode::CommandNotSupported,
                   fmt::format("halocline: {} is not supported: client authentication is "
                               "disabled at this proxy (security.authorization); connect "
                               "without credentials",
                               name)));
    if (name == "saslStart" || name == "saslContinue") {
        // (Not a conditional expression: GCC 12 miscompiles co_await inside ?:.)
        StatusWith<bson::Doc> r = bson::Doc();
        if (name == "saslStart")
            r = co_await auth_.saslStart(cmd, db);
        else
            r = co_await auth_.saslContinue(cmd, db);
        if (!r.isOK()) co_return errorDoc(r.getStatus());
        BSON_APPEND_DOUBLE(r.getValue().mut(), "ok", 1.0);
        co_return std::move(r.getValue());
    }
    if (name == "authenticate") {
        Status s = co_await auth_.authenticate(cmd, db);
        if (!s.isOK()) co_return errorDoc(s);
        bson::Doc d;
        BSON_APPEND_UTF8(d.mut(), "dbname", "$external");
        BSON_APPEND_UTF8(d.mut(), "user",
                         auth_.principal().substr(0, auth_.principal().rfind('@')).c_str());
        BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
        co_return d;
    }
    if (name == "logout" || name == "connectionStatus") {
        bson::Doc d;
        if (name == "logout")
            auth_.logout();
        else
            auth_.appendConnectionStatus(cmd, d.mut());
        BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
        co_return d;
    }
    if (Status allowed = co_await auth_.check(name, db, cmd, msg.sequences); !allowed.isOK())
        co_return errorDoc(allowed);
    if (name == "_isSelf") {
        // Which process answers: the proxy itself, never a tier behind it.
        static const bson_oid_t self = [] {
            bson_oid_t o;
            bson_oid_init(&o, nullptr);
            return o;
        }();
        bson::Doc d;
        BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
        BSON_APPEND_OID(d.mut(), "id", &self);
        co_return d;
    }
    if (name == "haloclineStatus") co_return status();
    if (name == "haloclinePauseFeeder") co_return co_await pauseFeeder(first);
    if (name == "haloclineFlushFeeder") co_return co_await flushFeeder(cmd);
    // The proxy's own operations and pools, as mongos answers for its own.
    if (name == "currentOp") co_return co_await currentOp(cmd, name);
    if (name == "killOp") co_return killOp(cmd);
    if (name == "connPoolStats") co_return connPoolStats();
    if (name == "aggregate" && db == "admin" && firstStageIs(cmd, "$currentOp"))
        co_return co_await currentOp(cmd, name);
    if (name == "haloclineExplain") co_return co_await explainRouting(cmd, db);
    if (name == "getMore") co_return co_await getMore(cmd);
    if (name == "killCursors") co_return co_await killCursors(cmd);
    if (name == "endSessions" || name == "killSessions" || name == "killAllSessions")
        co_return co_await bothTiers(msg, cmd);

    // The namespace a collection command names.
    std::string ns;
    if (BSON_ITER_HOLDS_UTF8(&first)) ns = db + "." + bson_iter_utf8(&first, nullptr);
    const CollectionPolicy* policy = ns.empty() ? nullptr : p_.config().policyFor(ns);
    if (name == "explain") co_return co_await explain(msg, cmd, db);
    if (name == "commitTransaction" || name == "abortTransaction")
        co_return co_await endTransaction(msg, cmd);
    if (auto txn = txnKeyOf(cmd)) {
        auto r = co_await transactionStatement(*txn, msg, cmd, name, ns, policy);
        if (r) co_return std::move(*r);
    }
    if (name == "aggregate" && !policy) {
        // A database- or cluster-wide change stream would miss or distort tiered writes.
        bson_t pipeline;
        bson_iter_t it, st;
        if (bson::subDocument(cmd, "pipeline", &pipeline) && bson_iter_init(&it, &pipeline) &&
            bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &st) &&
            bson_iter_next(&st) && std::string_view(bson_iter_key(&st)) == "$changeStream" &&
            ns.empty()) {
            for (const auto& c : p_.config().collections) {
                if (db == "admin" || splitNs(c.ns).first == db)
                    co_return errorDoc(Status(
                        ErrorCode::CommandNotSupported,
                        fmt::format("halocline: a change stream over {} would include the tiered "
                                    "collection {}, which is not supported; watch untiered "
                                    "collections individually",
                                    db == "admin" ? std::string("the cluster") : "database " + db,
                                    c.ns)));
            }
        }
    }
    if (policy) {
        if (isReadCommand(name)) co_return co_await tieredRead(*policy, name, msg, cmd);
        if (isWriteCommand(name)) co_return co_await tieredWrite(*policy, name, msg, cmd);
        if (isDdlCommand(name)) co_return co_await bothTiers(msg, cmd, policy);
        if (name == "renameCollection")
            co_return errorDoc(Status(ErrorCode::IllegalOperation,
                                      "halocline: renaming a tiered collection is not supported"));
        // listIndexes, collStats, validate...: the archive holds the whole collection.
    }
    if (name == "renameCollection" || name == "dropDatabase") {
        for (const auto& c : p_.config().collections) {
            bool hit = name == "dropDatabase"
                           ? splitNs(c.ns).first == db
                           : str(cmd, "renameCollection") == c.ns || str(cmd, "to") == c.ns;
            if (hit && name == "renameCollection")
                co_return errorDoc(Status(ErrorCode::IllegalOperation,
                                          "halocline: renaming to or from a tiered collection "
                                          "is not supported"));
            if (hit) co_return co_await bothTiers(msg, cmd);
        }
    }
    // Everything else is the archive's: untiered collections pass through untouched.
    bson::Doc body = forwardBody(cmd, true);
    if (name == "listDatabases" && auth_.enabled() &&
        access::listDatabasesScope(cmd, auth_.privileges()) ==
            access::ListDatabasesScope::kAuthorizedOnly)
        co_return co_await listAuthorizedDatabases(msg, body.get());
    co_return co_await forward(p_.archive(), msg, body.get(), ns, false);
}

asio::awaitable<bson::Doc> ClientConnection::listAuthorizedDatabases(const wire::OpMsg& msg,
                                                                     const bson_t* body) {
    // As mongod for a user without listDatabases: only the databases it has a
    // privilege on, and the total of their sizes.
    auto r = co_await send(p_.archive(), msg, body);
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    const bson_t* reply = r.getValue().get();
    if (!replyStatus(reply).isOK()) co_return rewriteReply(p_.archive(), reply, "", false);
    bson::Doc out;
    int64_t total = 0;
    bool nameOnly = truthy(body, "nameOnly");
    bson_iter_t it;
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "totalSize" || k == "totalSizeMb") continue;
        if (k != "databases" || !BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_append_iter(out.mut(), nullptr, 0, &it);
            continue;
        }
        bson_iter_t dbs;
        bson_iter_recurse(&it, &dbs);
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(out.mut(), "databases", &arr);
        ArrayKey key;
        size_t n = 0;
        while (bson_iter_next(&dbs)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&dbs)) continue;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&dbs, &len, &data);
            bson::View d(data, len);
            if (!access::hasAnyPrivilegeOnDatabase(str(d.get(), "name"), auth_.privileges()))
                continue;
            bson_iter_t size;
            if (bson_iter_init_find(&size, d.get(), "sizeOnDisk") && BSON_ITER_HOLDS_NUMBER(&size))
                total += bson_iter_as_int64(&size);
            bson_append_document(&arr, key(n++), -1, d.get());
        }
        bson_append_array_end(out.mut(), &arr);
    }
    if (!nameOnly) {
        BSON_APPEND_INT64(out.mut(), "totalSize", total);
        BSON_APPEND_INT64(out.mut(), "totalSizeMb", total / (1024 * 1024));
    }
    co_return rewriteReply(p_.archive(), out.get(), "", false);
}

asio::awaitable<bson::Doc> ClientConnection::explain(const wire::OpMsg& msg, const bson_t* cmd,
                                                     const std::string& db) {
    bson_t inner;
    if (!bson::subDocument(cmd, "explain", &inner)) {
        bson::Doc body = forwardBody(cmd, true);
        co_return co_await forward(p_.archive(), msg, body.get(), "", false);
    }
    Routing r = routingOf(&inner, db);
    const Decision& d = r.decision;
    if (d.route == Route::Refuse) co_return errorDoc(d.refusal);
    // The plan of the tier the command itself would go to (an exact _id lookup
    // is explained on the fast tier, where it is tried first).
    bool toFast = r.policy && (d.route == Route::Fast || d.route == Route::FastThenArchive);
    if (!toFast && r.policy) {
        Status w = co_await awaitFeeder(r.ns, afterClusterTime(cmd));
        if (!w.isOK()) co_return errorDoc(w);
    }
    bson::Doc body = forwardBody(cmd, !toFast);
    bson::Doc out =
        co_await forward(toFast ? p_.fast() : p_.archive(), msg, body.get(), r.ns, false);
    // What mongos adds: which tier answered and why, beside the tier's own
    // queryPlanner (whose winningPlan stays where tools read it).
    bson_t section;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "halocline", &section);
    appendRouting(&section, r);
    bson_append_document_end(out.mut(), &section);
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::bothTiers(const wire::OpMsg& msg, const bson_t* cmd,
                                                       const CollectionPolicy* p) {
    bson_iter_t first;
    bson_iter_init(&first, cmd);
    bson_iter_next(&first);
    std::string_view name = bson_iter_key(&first);
    // The archive first: it is the system of record; then the fast tier.
    bson::Doc ab = forwardBody(cmd, true);
    auto a = co_await send(p_.archive(), msg, ab.get());
    if (!a.isOK()) co_return errorDoc(a.getStatus());
    if (p && name == "createIndexes" && replyStatus(a.getValue().get()).isOK() &&
        createsAgeIndex(*p, msg, cmd)) {
        // The fast tier's own age index has the same key under another name,
        // which the new index would conflict with (85): the application's
        // index takes its place (ensureSetup puts ours back if it is dropped).
        Status st = co_await dropIndex(p_.fast(), p->ns, ageIndexName(*p));
        if (!st.isOK() && st.code() != ErrorCode::IndexNotFound) co_return errorDoc(st);
    }
    bson::Doc fb = forwardBody(cmd, false);
    auto f = co_await send(p_.fast(), msg, fb.get());
    if (!f.isOK()) co_return errorDoc(f.getStatus());
    Status fs = replyStatus(f.getValue().get());
    Status as = replyStatus(a.getValue().get());
    // The fast tier may lack what the archive has, or already have a tiered
    // collection the proxy created; only its other failures matter.
    if (!fs.isOK() && as.isOK() && fs.code() != ErrorCode::NamespaceNotFound &&
        fs.code() != ErrorCode::NamespaceExists)
        co_return rewriteReply(p_.fast(), f.getValue().get(), "", false);
    if (name == "drop" || name == "dropDatabase" || name == "dropIndexes" ||
        name == "deleteIndexes") {
        // Tiered collections always exist in the fast tier, with their indexes
        // and an index on the age field.
        Status s = co_await ensureSetup(p_.config(), p_.tiers());
        if (!s.isOK()) co_return errorDoc(s);
    }
    co_return rewriteReply(p_.archive(), a.getValue().get(), "", false);
}

asio::awaitable<bson::Doc> ClientConnection::getMore(const bson_t* cmd) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "getMore") || !BSON_ITER_HOLDS_INT64(&it))
        co_return errorDoc(
            Status(ErrorCode::TypeMismatch, "Field 'getMore' must be of type long in: getMore"));
    int64_t id = bson_iter_int64(&it);
    auto e = p_.cursors().find(id);
    if (!e)
        co_return errorDoc(
            Status(ErrorCode::CursorNotFound, fmt::format("cursor id {} not found", id)));
    if (e->owner != auth_.principal()) co_return errorDoc(notCursorOwner("getMore", id, e->ns));
    if (e->fastTiered &&
        std::chrono::steady_clock::now() - e->created > p_.config().clockSkewGuard / 2) {
        p_.cursors().erase(id);
        p_.killRemote({*e});
        co_return errorDoc(Status(
            ErrorCode::CursorNotFound,
            fmt::format("halocline: cursor id {} on the fast tier outlived half the clock-skew "
                        "guard ({} ms), after which eviction may reach its range; run the query "
                        "again",
                        id, p_.config().clockSkewGuard.count())));
    }
    bson::Doc body;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        // lsid, txnNumber and autocommit go along: the tier checks that they
        // match the cursor's (a cursor opened in a transaction reads its snapshot).
        if (k == "$clusterTime" || k == "recoveryToken") continue;
        if (k == "getMore") {
            BSON_APPEND_INT64(body.mut(), "getMore", e->remoteId);
            continue;
        }
        bson_append_iter(body.mut(), nullptr, 0, &it);
    }
    wire::OpMsg none;
    auto r = co_await send(*e->tier, none, body.get());
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    if (const CollectionPolicy* pol = e->changeStream ? p_.config().policyFor(e->ns) : nullptr)
        r = co_await completeEvents(*pol, r.getValue().get(), e->updateLookup);
    // Map the tier's cursor id back to ours; a finished cursor leaves the map.
    Status st = replyStatus(r.getValue().get());
    bool exhausted = true;
    bson::Doc out = rewriteReplyWith(*e->tier, r.getValue().get(), [&](int64_t) {
        exhausted = false;
        return id;
    });
    if (exhausted && (st.isOK() || st.code() == ErrorCode::CursorNotFound)) p_.cursors().erase(id);
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::killCursors(const bson_t* cmd) {
    std::string coll = str(cmd, "killCursors");
    std::string db = str(cmd, "$db");
    bson_t ids;
    std::vector<int64_t> killed, notFound;
    std::vector<CursorEntry> remote;
    if (bson::subDocument(cmd, "cursors", &ids)) {
        bson_iter_t it;
        bson_iter_init(&it, &ids);
        while (bson_iter_next(&it)) {
            int64_t id = bson_iter_as_int64(&it);
            auto e = p_.cursors().find(id);
            if (!e) {
                notFound.push_back(id);
                continue;
            }
            if (e->owner != auth_.principal() &&
                !access::mayKillAnyCursor(e->ns, auth_.privileges()))
                co_return errorDoc(notCursorOwner("killCursors", id, e->ns));
            p_.cursors().erase(id);
            killed.push_back(id);
            remote.push_back(*e);
        }
    }
    p_.killRemote(remote);
    bson::Doc out;
    auto list = [&](const char* k, const std::vector<int64_t>& v) {
        bson_t arr;
        bson_append_array_begin(out.mut(), k, -1, &arr);
        for (size_t i = 0; i < v.size(); ++i) {
            std::string key = std::to_string(i);
            BSON_APPEND_INT64(&arr, key.c_str(), v[i]);
        }
        bson_append_array_end(out.mut(), &arr);
    };
    list("cursorsKilled", killed);
    list("cursorsNotFound", notFound);
    list("cursorsAlive", {});
    list("cursorsUnknown", {});
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), 0);
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::tieredRead(const CollectionPolicy& p,
                                                        std::string_view name,
                                                        const wire::OpMsg& msg, const bson_t* cmd) {
    if (name == "aggregate" && firstStageIs(cmd, "$collStats"))
        co_return co_await collStats(p, msg, cmd);
    Decision d = p_.router().routeRead(p, name, cmd);
    auto* prog = p_.state().progress(p.ns);
    if (d.route == Route::Refuse) co_return errorDoc(d.refusal);
    if (name == "aggregate" && firstStageIs(cmd, "$changeStream"))
        co_return co_await changeStream(p, msg, cmd);
    if (d.route == Route::Fast) {
        prog->routedFast++;
        bson::Doc body = forwardBody(cmd, false);
        co_return co_await forward(p_.fast(), msg, body.get(), p.ns, true);
    }
    if (d.route == Route::FastThenArchive) {
        bson::Doc fbody = forwardBody(cmd, false);
        const bool plainId = plainIdLookup(cmd);
        std::vector<Id> ids;
        ids.push_back(d.lookupId->copy());
        bool wasPresent = false;
        for (int attempt = 0;; ++attempt) {
            auto r = co_await send(p_.fast(), msg, fbody.get());
            if (!r.isOK()) co_return errorDoc(r.getStatus());
            const bson_t* reply = r.getValue().get();
            bson_t cursor, batch;
            bool nonEmpty = false;
            if (bson::subDocument(reply, "cursor", &cursor) &&
                bson::subDocument(&cursor, "firstBatch", &batch))
                nonEmpty = !bson_empty(&batch);
            bool answered = !replyStatus(reply).isOK() || nonEmpty;
            if (!answered && plainId) {
                // Nothing but the _id: empty means absent when the fast tier
                // read. Tombstoned: deleted, the empty answer stands. Else the
                // archive is current (invariant A).
                auto dead = co_await tombstonedIn(p_.tiers(), p.ns, ids);
                if (!dead.isOK()) co_return errorDoc(dead.getStatus());
                answered = dead.getValue()[0];
            } else if (!answered) {
                // Empty. Does the fast tier know the document? Deleted: the
                // empty answer stands. Present now, but absent when we read (it
                // was just copied up): read again. Present both times: it does
                // not match. Neither: the archive is current (invariant A).
                auto pres = co_await fastPresence(p_.tiers(), p.ns, ids);
                if (!pres.isOK()) co_return errorDoc(pres.getStatus());
                bool present = pres.getValue().present[0];
                answered = pres.getValue().tombstoned[0] || (present && wasPresent);
                if (!answered && present) {
                    wasPresent = true;
                    if (attempt < 5) continue;
                    co_return errorDoc(Status(ErrorCode::ExceededTimeLimit,
                                              "halocline: the document kept moving between "
                                              "the tiers during the lookup; retry"));
                }
            }
            if (answered) {
                prog->idLookupHits++;
                prog->routedFast++;
                co_return rewriteReply(p_.fast(), reply, p.ns, true);
            }
            break;
        }
        // Neither in the fast tier nor tombstoned: the archive's copy is the latest.
        prog->idLookupMisses++;
        prog->routedArchive++;
        bson::Doc abody = forwardBody(cmd, true);
        auto ar = co_await send(p_.archive(), msg, abody.get());
        if (!ar.isOK()) co_return errorDoc(ar.getStatus());
        if (p.promoteOnRead && p_.config().workersEnabled) {
            // Copy it up in the background when it is inside the horizon.
            bson_t c2, b2;
            bson_iter_t it;
            if (bson::subDocument(ar.getValue().get(), "cursor", &c2) &&
                bson::subDocument(&c2, "firstBatch", &b2) && bson_iter_init(&it, &b2) &&
                bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&it, &len, &data);
                bson::View v(data, len);
                bson_iter_t age;
                bool recent = false;
                if (bson::findDotted(v.get(), p.ageField, &age)) {
                    int64_t ms = std::numeric_limits<int64_t>::min();
                    if (BSON_ITER_HOLDS_DATE_TIME(&age)) ms = bson_iter_date_time(&age);
                    if (BSON_ITER_HOLDS_OID(&age))
                        ms = static_cast<int64_t>(bson_oid_get_time_t(bson_iter_oid(&age))) * 1000;
                    recent = ms > nowMillis() - p.horizon.count();
                }
                if (recent) {
                    auto ns = p.ns;
                    auto id = d.lookupId->copy();
                    auto* proxy = &p_;
                    asio::co_spawn(
                        p_.io(),
                        [proxy, ns, id = std::move(id)]() -> asio::awaitable<void> {
                            std::vector<Id> ids;
                            ids.push_back(id.copy());
                            auto r = co_await promoteIds(proxy->tiers(), ns, ids);
                            if (r.isOK())
                                if (auto* pr = proxy->state().progress(ns))
                                    pr->promoted += r.getValue();
                        },
                        asio::detached);
                }
            }
        }
        co_return rewriteReply(p_.archive(), ar.getValue().get(), p.ns, false);
    }
    prog->routedArchive++;
    if (name == "find" || name == "count" || name == "distinct" || name == "aggregate") {
        auto [db, coll] = splitNs(p.ns);
        const int64_t most = p_.config().mergedReadLimit;
        // A count, a distinct and an aggregate of find's stages are merged
        // finds of their matches (at most mergedReadLimit documents).
        std::optional<MergedShape> shape = mergedShape(name, cmd, most);
        std::optional<MergedFind> plan;
        if (shape)
            plan = planMergedFind(shape->find ? shape->find->get() : cmd, db,
                                  shape->bound > 0 ? most + 1 : most);
        if (plan) {
            auto merged = co_await runMergedFind(p_.tiers(), *plan);
            if (merged.isOK() && shape->bound > 0 &&
                static_cast<int64_t>(merged.getValue().size()) >= shape->bound) {
                // More matches than a merged read takes: the feeder wait below.
            } else if (merged.isOK()) {
                prog->mergedReads++;
                bson::Doc d;
                shape->appendReply(d.mut(), p.ns, merged.getValue());
                BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
                appendClock(d.mut(), p_.state().fastClusterTime.load());
                co_return d;
            } else if (merged.getStatus().reason() != kMergedFallback) {
                co_return errorDoc(merged.getStatus());
            }
        }
    }
    Status w = co_await awaitFeeder(p.ns, afterClusterTime(cmd));
    if (!w.isOK()) co_return errorDoc(w);
    Status clear = co_await checkRefused(p, name, cmd);
    if (!clear.isOK()) co_return errorDoc(clear);
    bson::Doc body = forwardBody(cmd, true);
    co_return co_await forward(p_.archive(), msg, body.get(), p.ns, false);
}

asio::awaitable<bson::Doc> ClientConnection::changeStream(const CollectionPolicy& p,
                                                          const wire::OpMsg& msg,
                                                          const bson_t* cmd) {
    // The client's pipeline, with the protocol's writes (promotions, warm-up,
    // evictions: transactions on internal sessions) left out right after
    // $changeStream, before any stage of the client's can see them.
    bson::Doc fwd = forwardBody(cmd, false);
    bson::Doc body;
    bson_iter_t it;
    bson_iter_init(&it, fwd.get());
    while (bson_iter_next(&it)) {
        bson_iter_t stages;
        if (std::string_view(bson_iter_key(&it)) != "pipeline" || !BSON_ITER_HOLDS_ARRAY(&it) ||
            !bson_iter_recurse(&it, &stages)) {
            bson_append_iter(body.mut(), nullptr, 0, &it);
            continue;
        }
        bson_t arr;
        ArrayKey key;
        size_t n = 0;
        BSON_APPEND_ARRAY_BEGIN(body.mut(), "pipeline", &arr);
        while (bson_iter_next(&stages)) {
            bson_append_iter(&arr, key(n), -1, &stages);
            if (n++ == 0) appendUserEventsOnly(&arr, key(n++));
        }
        bson_append_array_end(body.mut(), &arr);
    }
    CursorEntry kind;
    kind.changeStream = true;
    bson_t pipeline, stage, spec;
    kind.updateLookup = bson::subDocument(cmd, "pipeline", &pipeline) &&
                        bson::subDocument(&pipeline, "0", &stage) &&
                        bson::subDocument(&stage, "$changeStream", &spec) &&
                        str(&spec, "fullDocument") == "updateLookup";
    auto r = co_await send(p_.fast(), msg, body.get());
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    bson::Doc done = co_await completeEvents(p, r.getValue().get(), kind.updateLookup);
    // Not fast-tiered: a change stream's cursor reads no range eviction could reach.
    co_return rewriteReply(p_.fast(), done.get(), p.ns, false, &kind);
}

asio::awaitable<bson::Doc> ClientConnection::completeEvents(const CollectionPolicy& p,
                                                            const bson_t* reply, bool lookup) {
    bson::Doc out;
    bson_iter_t it;
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        bson_iter_t c;
        if (std::string_view(bson_iter_key(&it)) != "cursor" || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
            !bson_iter_recurse(&it, &c)) {
            bson_append_iter(out.mut(), nullptr, 0, &it);
            continue;
        }
        bson_t cursor;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "cursor", &cursor);
        while (bson_iter_next(&c)) {
            std::string_view k = bson_iter_key(&c);
            bson_iter_t ev;
            if ((k != "firstBatch" && k != "nextBatch") || !BSON_ITER_HOLDS_ARRAY(&c) ||
                !bson_iter_recurse(&c, &ev)) {
                bson_append_iter(&cursor, nullptr, 0, &c);
                continue;
            }
            bson_t batch;
            ArrayKey key;
            size_t i = 0;
            bson_append_array_begin(&cursor, bson_iter_key(&c), -1, &batch);
            while (bson_iter_next(&ev)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&ev)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&ev, &len, &data);
                bson::View event(data, len);
                bson::Doc done = co_await completeEvent(p, event.get(), lookup);
                bson_append_document(&batch, key(i++), -1, done.get());
            }
            bson_append_array_end(&cursor, &batch);
        }
        bson_append_document_end(out.mut(), &cursor);
    }
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::completeEvent(const CollectionPolicy& p,
                                                           const bson_t* event, bool lookup) {
    const bool ours = sessionHasPrefix(event, kAppSessionPrefix);
    bson_iter_t it, id;
    const bool fill = lookup && str(event, "operationType") == "update" &&
                      bson_iter_init_find(&it, event, "fullDocument") &&
                      BSON_ITER_HOLDS_NULL(&it) && bson_iter_init(&id, event) &&
                      bson_iter_find_descendant(&id, "documentKey._id", &id);
    if (!ours && !fill) co_return bson::Doc::copyOf(event);
    std::optional<bson::Doc> found;
    if (fill) {
        // Not in the fast tier when the event was read: evicted since (the
        // archive's copy is the latest, invariant A) or deleted (null, as on mongod).
        auto [db, coll] = splitNs(p.ns);
        bson::Doc f;
        bson_t filter;
        BSON_APPEND_UTF8(f.mut(), "find", coll.c_str());
        BSON_APPEND_DOCUMENT_BEGIN(f.mut(), "filter", &filter);
        bson_append_iter(&filter, "_id", 3, &id);
        bson_append_document_end(f.mut(), &filter);
        BSON_APPEND_INT32(f.mut(), "limit", 1);
        BSON_APPEND_BOOL(f.mut(), "singleBatch", true);
        BSON_APPEND_UTF8(f.mut(), "$db", db.c_str());
        bson::Doc r = co_await tieredRead(p, "find", wire::OpMsg{}, f.get());
        bson_iter_t d;
        if (bson_iter_init(&d, r.get()) &&
            bson_iter_find_descendant(&d, "cursor.firstBatch.0", &d) &&
            BSON_ITER_HOLDS_DOCUMENT(&d)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&d, &len, &data);
            found = bson::Doc::copyOf(data, len);
        }
    }
    bson::Doc out;
    bson_iter_init(&it, event);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (ours && (k == "lsid" || k == "txnNumber")) continue;
        if (fill && k == "fullDocument") {
            if (found)
                BSON_APPEND_DOCUMENT(out.mut(), "fullDocument", found->get());
            else
                BSON_APPEND_NULL(out.mut(), "fullDocument");
            continue;
        }
        bson_append_iter(out.mut(), nullptr, 0, &it);
    }
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::collStats(const CollectionPolicy& p,
                                                       const wire::OpMsg& msg, const bson_t* cmd) {
    // The archive holds the whole collection: its figures are the collection's.
    // The fast tier's share goes beside them, in a halocline section.
    bson::Doc abody = forwardBody(cmd, true);
    auto a = co_await send(p_.archive(), msg, abody.get());
    if (!a.isOK()) co_return errorDoc(a.getStatus());
    const bson_t* reply = a.getValue().get();
    if (!replyStatus(reply).isOK()) co_return rewriteReply(p_.archive(), reply, p.ns, false);
    auto [db, coll] = splitNs(p.ns);
    bson::Doc fc;
    BSON_APPEND_UTF8(fc.mut(), "aggregate", coll.c_str());
    bson_t pipeline, stage, spec, sub;
    BSON_APPEND_ARRAY_BEGIN(fc.mut(), "pipeline", &pipeline);
    BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$collStats", &spec);
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "storageStats", &sub);
    bson_append_document_end(&spec, &sub);
    bson_append_document_end(&stage, &spec);
    bson_append_document_end(&pipeline, &stage);
    bson_append_array_end(fc.mut(), &pipeline);
    BSON_APPEND_DOCUMENT_BEGIN(fc.mut(), "cursor", &sub);
    bson_append_document_end(fc.mut(), &sub);
    BSON_APPEND_UTF8(fc.mut(), "$db", db.c_str());
    auto f = co_await p_.fast().collect(fc.get());
    if (!f.isOK()) co_return errorDoc(f.getStatus());
    bson::Doc section;
    {
        bson_t st;
        int64_t count = 0, size = 0, storage = 0;
        for (auto& d : f.getValue())
            if (bson::subDocument(d.get(), "storageStats", &st)) {
                bson_iter_t it;
                if (bson_iter_init_find(&it, &st, "count")) count += bson_iter_as_int64(&it);
                if (bson_iter_init_find(&it, &st, "size")) size += bson_iter_as_int64(&it);
                if (bson_iter_init_find(&it, &st, "storageSize"))
                    storage += bson_iter_as_int64(&it);
            }
        bson_t fast;
        BSON_APPEND_DOCUMENT_BEGIN(section.mut(), "fast", &fast);
        BSON_APPEND_INT64(&fast, "count", count);
        BSON_APPEND_INT64(&fast, "size", size);
        BSON_APPEND_INT64(&fast, "storageSize", storage);
        bson_append_document_end(section.mut(), &fast);
        BSON_APPEND_UTF8(section.mut(), "ageField", p.ageField.c_str());
        BSON_APPEND_INT64(section.mut(), "horizonMillis", p.horizon.count());
    }
    // Each result document of the archive's first batch gains the section.
    bson::Doc withSection;
    bson_iter_t it;
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k != "cursor" || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_append_iter(withSection.mut(), nullptr, 0, &it);
            continue;
        }
        bson_iter_t c;
        bson_iter_recurse(&it, &c);
        bson_t cursor;
        BSON_APPEND_DOCUMENT_BEGIN(withSection.mut(), "cursor", &cursor);
        while (bson_iter_next(&c)) {
            if (std::string_view(bson_iter_key(&c)) != "firstBatch" || !BSON_ITER_HOLDS_ARRAY(&c)) {
                bson_append_iter(&cursor, nullptr, 0, &c);
                continue;
            }
            bson_iter_t b;
            bson_iter_recurse(&c, &b);
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
            while (bson_iter_next(&b)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&b)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&b, &len, &data);
                bson::View doc(data, len);
                bson_t out;
                bson_append_document_begin(&arr, bson_iter_key(&b), -1, &out);
                bson_concat(&out, doc.get());
                BSON_APPEND_DOCUMENT(&out, "halocline", section.get());
                bson_append_document_end(&arr, &out);
            }
            bson_append_array_end(&cursor, &arr);
        }
        bson_append_document_end(withSection.mut(), &cursor);
    }
    co_return rewriteReply(p_.archive(), withSection.get(), p.ns, false);
}

asio::awaitable<Status> ClientConnection::checkRefused(const CollectionPolicy& p,
                                                       std::string_view name, const bson_t* cmd) {
    auto* prog = p_.state().progress(p.ns);
    auto refused = prog ? prog->refusals() : nullptr;
    if (!refused) co_return Status::OK();
    std::vector<Id> ids;
    for (const auto& f : *refused) ids.push_back(f.id.copy());
    bson_t filter;
    std::optional<Id> hit;
    if (!readFilter(name, cmd, &filter)) {
        hit = ids.front().copy();
    } else {
        // Either version matters: the fast tier's (the archive lacks it) and
        // the archive's (out of date).
        auto [db, coll] = splitNs(p.ns);
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
        bson_t f, all;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "filter", &f);
        BSON_APPEND_ARRAY_BEGIN(&f, "$and", &all);
        BSON_APPEND_DOCUMENT(&all, "0", &filter);
        appendIdIn(&all, "1", ids);
        bson_append_array_end(&f, &all);
        bson_append_document_end(c.mut(), &f);
        bson_t collation;
        if (bson::subDocument(cmd, "collation", &collation))
            BSON_APPEND_DOCUMENT(c.mut(), "collation", &collation);
        bson_t proj;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "projection", &proj);
        BSON_APPEND_INT32(&proj, "_id", 1);
        bson_append_document_end(c.mut(), &proj);
        BSON_APPEND_INT64(c.mut(), "limit", 1);
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        for (Tier* tier : {&p_.fast(), &p_.archive()}) {
            auto r = co_await tier->collect(c.get());
            if (!r.isOK()) co_return r.getStatus();
            Id id;
            if (!r.getValue().empty() && idOf(r.getValue().front().get(), &id)) {
                hit = std::move(id);
                break;
            }
        }
    }
    if (!hit) co_return Status::OK();
    const Refusal* why = &refused->front();
    for (const auto& f : *refused)
        if (idKey(f.id) == idKey(*hit)) why = &f;
    bson_iter_t vit;
    bson::Doc shown;
    if (const bson_value_t* v = idValue(why->id, &vit)) bson_append_value(shown.mut(), "_id", 3, v);
    char* json = bson_as_relaxed_extended_json(shown.get(), nullptr);
    Status out(ErrorCode::OperationFailed,
               fmt::format("halocline: this read of {} must go to the archive and could include "
                           "the document {}, which the archive refused to store (code {}: {}); "
                           "it is served only by exact _id lookups until it is corrected (see "
                           "docs/OPERATIONS.md, Refused documents)",
                           p.ns, json ? json : "?", why->code, why->errmsg));
    bson_free(json);
    co_return out;
}

asio::awaitable<Status> ClientConnection::prepare(const CollectionPolicy& p, const bson_t* filter,
                                                  std::vector<Pinned>* pins) {
    auto ids = idsNamedBy(filter);
    // (Not a conditional expression: GCC 12 miscompiles co_await inside ?:.)
    StatusWith<Pinned> r = Pinned{};
    if (ids)
        r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, *ids);
    else
        r = co_await prepareWriteMatching(p_.tiers(), p, p_.config().clockSkewGuard, filter);
    if (!r.isOK()) co_return r.getStatus();
    if (auto* prog = p_.state().progress(p.ns))
        prog->promoted += static_cast<int64_t>(r.getValue().ids.size());
    if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
    co_return Status::OK();
}

asio::awaitable<StatusWith<std::optional<bson::Doc>>> ClientConnection::prepareOrWriteCold(
    const CollectionPolicy& p, std::string_view kind, const bson_t* cmd, const char* arrayKey,
    const bson_t* stmt, const bson_t* filter, std::vector<Pinned>* pins) {
    using Out = std::optional<bson::Doc>;
    SharedState& s = p_.state();
    std::optional<Id> id;
    if (p_.config().coldWrites && !p.changeStreams) id = coldTarget(kind, stmt, p);
    bson::Doc retryKey = retryKeyOf(cmd, 0);
    bson_t clientLsid;
    bool retryable = !retryKey.empty() && bson::subDocument(cmd, "lsid", &clientLsid);
    int64_t clientTxn = 0;
    bson_iter_t it;
    if (retryable && bson_iter_init_find(&it, cmd, "txnNumber"))
        clientTxn = bson_iter_as_int64(&it);
    if (id) {
        std::vector<Id> ids;
        ids.push_back(id->copy());
        auto r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, ids, true);
        if (!r.isOK()) co_return r.getStatus();
        if (!r.getValue().cold) {
            if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
        } else {
            // The client's retryable session, or one of the proxy's: either
            // way running the command again is a retry, never a repeat.
            std::optional<SessionPool::Lease> own;
            bson::Doc ac;
            if (retryable) {
                ac = coldCommand(cmd, arrayKey, stmt, &clientLsid, clientTxn);
            } else {
                own = p_.tiers().archiveSessions->take();
                ac = coldCommand(cmd, arrayKey, stmt, own->lsid.get(), own->txnNumber);
            }
            slot_.sentTo(p_.archive().name().c_str());
            auto c = co_await runCold(p_.tiers(), p.ns, *id, ac.get(),
                                      retryable ? retryKey.get() : nullptr);
            if (own) p_.tiers().archiveSessions->give(std::move(*own));
            if (!c.isOK()) co_return c.getStatus();
            if (c.getValue()) {
                if (auto* prog = s.progress(p.ns)) ++prog->coldWrites;
                co_return std::move(c.getValue());
            }
            // Raced with a writer that copied it up: prepare as any write.
            Status st = co_await prepare(p, filter, pins);
            if (!st.isOK()) co_return st;
        }
    } else {
        Status st = co_await prepare(p, filter, pins);
        if (!st.isOK()) co_return st;
    }
    // A retry of a statement that ran in the archive goes there again, and
    // the archive answers it from its session record. (Checked after the
    // promotion, which waits for a cold write's guard: a cold run of this
    // statement is recorded by then.)
    if (id && retryable) {
        auto f = co_await findRetry(p_.tiers(), retryKey.get());
        if (!f.isOK()) co_return f.getStatus();
        if (f.getValue() && f.getValue()->inArchive) {
            bson::Doc ac = coldCommand(cmd, arrayKey, stmt, &clientLsid, clientTxn);
            slot_.sentTo(p_.archive().name().c_str());
            auto r = co_await p_.archive().run(ac.get());
            if (!r.isOK()) co_return r.getStatus();
            co_return Out(std::move(r.getValue()));
        }
    }
    co_return Out{};
}

void ClientConnection::release(std::vector<Pinned>& pins) {
    if (pins.empty()) return;
    auto* proxy = &p_;
    asio::co_spawn(
        p_.io(),
        [proxy, pins = std::move(pins)]() -> asio::awaitable<void> {
            for (auto& pin : pins) co_await unpin(proxy->tiers(), pin);
        },
        asio::detached);
    pins.clear();
}

asio::awaitable<bson::Doc> ClientConnection::tieredWrite(const CollectionPolicy& p,
                                                         std::string_view name,
                                                         const wire::OpMsg& msg,
                                                         const bson_t* cmd) {
    if (name == "delete") co_return co_await tieredDelete(p, msg, cmd);
    // Every document the write can touch is in the fast tier, and pinned there
    // against eviction, until the write has run (CONSISTENCY.md, Writes).
    std::vector<Pinned> pins;
    Status prepared = Status::OK();
    if (name == "insert") {
        std::vector<Id> ids;
        for (auto d : statements(msg, cmd, "documents")) {
            bson::View v(d.data(), d.size());
            Id id;
            if (idOf(v.get(), &id)) ids.push_back(std::move(id));
        }
        auto r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, ids);
        if (!r.isOK())
            prepared = r.getStatus();
        else if (!r.getValue().ids.empty())
            pins.push_back(std::move(r.getValue()));
    } else if (name == "update") {
        auto stmts = statements(msg, cmd, "updates");
        for (auto stmt : stmts) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q;
            if (!bson::subDocument(u.get(), "q", &q)) continue;
            if (stmts.size() == 1) {
                auto cold =
                    co_await prepareOrWriteCold(p, "update", cmd, "updates", u.get(), &q, &pins);
                if (cold.isOK() && cold.getValue())
                    co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
                prepared = cold.getStatus();
            } else {
                prepared = co_await prepare(p, &q, &pins);
            }
            if (!prepared.isOK()) break;
        }
    } else {  // findAndModify
        bson_t q;
        bson_t empty = BSON_INITIALIZER;
        if (!bson::subDocument(cmd, "query", &q)) q = empty;
        auto cold = co_await prepareOrWriteCold(p, "findAndModify", cmd, nullptr, cmd, &q, &pins);
        if (cold.isOK() && cold.getValue()) {
            release(pins);
            co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
        }
        prepared = cold.getStatus();
        if (prepared.isOK() && truthy(cmd, "remove")) {
            bson::Doc out = co_await tieredRemove(p, cmd);
            release(pins);
            co_return out;
        }
    }
    if (!prepared.isOK()) {
        release(pins);
        co_return errorDoc(prepared);
    }
    bson::Doc body = forwardBody(cmd, false);
    auto r = co_await send(p_.fast(), msg, body.get());
    release(pins);
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    co_return rewriteReply(p_.fast(), r.getValue().get(), p.ns, false);
}

asio::awaitable<bson::Doc> ClientConnection::tieredDelete(const CollectionPolicy& p,
                                                          const wire::OpMsg& msg,
                                                          const bson_t* cmd) {
    bson_iter_t it;
    bool ordered = !bson_iter_init_find(&it, cmd, "ordered") || bson_iter_as_bool(&it);
    int64_t n = 0;
    bson::Doc errors;
    int nErrors = 0;
    OpTime last = 0;
    auto stmts = statements(msg, cmd, "deletes");
    for (size_t i = 0; i < stmts.size(); ++i) {
        bson_t q, collation;
        bson_t empty = BSON_INITIALIZER;
        bson::View stmt(stmts[i].data(), stmts[i].size());
        if (!bson::subDocument(stmt.get(), "q", &q)) q = empty;
        bool hasCollation = bson::subDocument(stmt.get(), "collation", &collation);
        int64_t limit = 0;
        if (bson_iter_init_find(&it, stmt.get(), "limit")) limit = bson_iter_as_int64(&it);
        // A retry of a retryable delete answers what the first attempt did.
        bson::Doc retryKey = retryKeyOf(cmd, static_cast<int>(i));
        StatusWith<DeleteResult> r = DeleteResult{};
        std::optional<DeleteResult> earlier;
        if (!retryKey.empty()) {
            auto f = co_await findRetry(p_.tiers(), retryKey.get());
            if (!f.isOK())
                r = f.getStatus();
            else
                earlier = std::move(f.getValue());
        }
        if (earlier && !earlier->inArchive) {
            r = std::move(*earlier);
        } else if (r.isOK()) {
            std::vector<Pinned> pins;
            Status s = Status::OK();
            if (stmts.size() == 1) {
                // One statement: it may run in the archive (cold_write.h).
                auto cold =
                    co_await prepareOrWriteCold(p, "delete", cmd, "deletes", stmt.get(), &q, &pins);
                if (cold.isOK() && cold.getValue()) {
                    release(pins);
                    co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
                }
                s = cold.getStatus();
            } else {
                s = co_await prepare(p, &q, &pins);
            }
            r = s;
            if (s.isOK())
                r = co_await deleteWithTombstones(p_.tiers(), p.ns, &q, limit == 1 ? 1 : 0, nullptr,
                                                  hasCollation ? &collation : nullptr,
                                                  retryKey.empty() ? nullptr : retryKey.get());
            release(pins);
        }
        if (!r.isOK()) {
            bson_t e;
            std::string key = std::to_string(nErrors++);
            BSON_APPEND_DOCUMENT_BEGIN(errors.mut(), key.c_str(), &e);
            BSON_APPEND_INT32(&e, "index", static_cast<int32_t>(i));
            BSON_APPEND_INT32(&e, "code", r.getStatus().codeNumber());
            bson::appendMessage(&e, "errmsg", r.getStatus().reason());
            bson_append_document_end(errors.mut(), &e);
            if (ordered) break;
            continue;
        }
        n += r.getValue().n;
        if (r.getValue().operationTime.size() > 5) {
            bson_iter_t t;
            if (bson_iter_init_find(&t, r.getValue().operationTime.get(), "t")) {
                last = std::max(last, toOpTime(t));
            }
        }
    }
    if (last) p_.state().noteFastTime(last);
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "n",
                      static_cast<int32_t>(n));  // int32, as mongod (libmongoc reads no other)
    if (nErrors) BSON_APPEND_ARRAY(out.mut(), "writeErrors", errors.get());
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), last ? last : p_.state().fastClusterTime.load());
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::tieredRemove(const CollectionPolicy& p,
                                                          const bson_t* cmd) {
    bson_t q, sort, collation;
    bson_t empty = BSON_INITIALIZER;
    if (!bson::subDocument(cmd, "query", &q)) q = empty;
    bool hasSort = bson::subDocument(cmd, "sort", &sort);
    bool hasCollation = bson::subDocument(cmd, "collation", &collation);
    if (Status ok = removeSupported(cmd); !ok.isOK()) co_return errorDoc(ok);
    bson::Doc retryKey = retryKeyOf(cmd, 0);
    StatusWith<DeleteResult> r = DeleteResult{};
    std::optional<DeleteResult> earlier;
    if (!retryKey.empty()) {
        auto f = co_await findRetry(p_.tiers(), retryKey.get());
        if (!f.isOK()) co_return errorDoc(f.getStatus());
        earlier = std::move(f.getValue());
    }
    if (earlier)
        r = std::move(*earlier);
    else
        r = co_await deleteWithTombstones(p_.tiers(), p.ns, &q, 1, hasSort ? &sort : nullptr,
                                          hasCollation ? &collation : nullptr,
                                          retryKey.empty() ? nullptr : retryKey.get());
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    co_return removeReply(r.getValue());
}

bson::Doc ClientConnection::removeReply(const DeleteResult& r) {
    OpTime t = 0;
    bson_iter_t it;
    if (bson_iter_init_find(&it, r.operationTime.get(), "t")) t = toOpTime(it);
    if (t) p_.state().noteFastTime(t);
    bson::Doc out;
    bson_t leo;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "lastErrorObject", &leo);
    BSON_APPEND_INT32(&leo, "n", static_cast<int32_t>(r.n));
    bson_append_document_end(out.mut(), &leo);
    if (r.deleted)
        BSON_APPEND_DOCUMENT(out.mut(), "value", r.deleted->get());
    else
        BSON_APPEND_NULL(out.mut(), "value");
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), t ? t : p_.state().fastClusterTime.load());
    return out;
}

asio::awaitable<std::optional<bson::Doc>> ClientConnection::transactionStatement(
    const TxnKey& k, const wire::OpMsg& msg, const bson_t* cmd, std::string_view name,
    const std::string& ns, const CollectionPolicy* policy) {
    const bool starts = truthy(cmd, "startTransaction");
    auto entry = p_.transactions().find(k);
    // A statement of a transaction this proxy did not see start (it started
    // before a restart) goes where its collection lives; that tier answers
    // NoSuchTransaction if it has none.
    if (starts || !entry) entry = TxnTable::Entry{policy ? TxnSide::Fast : TxnSide::Archive, 0};
    const bool fast = entry->side == TxnSide::Fast;
    if (!ns.empty() && (policy != nullptr) != fast) {
        ClientTxn txn(fast ? p_.fast() : p_.archive(), cmd);
        co_await txn.abort();
        co_return errorDoc(Status(
            ErrorCode::OperationNotSupportedInTransaction,
            fmt::format("halocline: this transaction runs in the {} tier, where {} collections "
                        "live, and {} is {}: one transaction cannot commit atomically in two "
                        "replica sets, so it was aborted. Keep tiered and untiered collections "
                        "in separate transactions (docs/CONSISTENCY.md, Transactions)",
                        fast ? "fast" : "archive", fast ? "tiered" : "untiered", ns,
                        policy ? "tiered" : "untiered")));
    }
    entry->statements++;
    p_.transactions().put(k, *entry);
    if (!fast) co_return std::nullopt;
    if (!policy) {
        bson::Doc body = forwardBody(cmd, false);
        co_return co_await forward(p_.fast(), msg, body.get(), ns, true);
    }
    co_return co_await tieredTxnStatement(*policy, name, msg, cmd);
}

asio::awaitable<Status> ClientConnection::prepareInTxn(
    const CollectionPolicy& p, const bson_t* filter, const bson_t* collation,
    std::optional<std::vector<Id>> ids, std::vector<Pinned>* pins, std::vector<TxnNeed>* needs) {
    // Ids named under a collation may match others ("a" and "A"): a range.
    if (!ids && !collation) ids = idsNamedBy(filter);
    TxnNeed need;
    StatusWith<Pinned> r = Pinned{};
    if (ids) {
        r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, *ids);
        for (auto& id : *ids) need.ids.push_back(id.copy());
    } else {
        r = co_await prepareWriteMatching(p_.tiers(), p, p_.config().clockSkewGuard, filter,
                                          collation, p_.config().transactionPromotionLimit);
        need.range = true;
    }
    if (!r.isOK()) co_return r.getStatus();
    if (auto* prog = p_.state().progress(p.ns))
        prog->promoted += static_cast<int64_t>(r.getValue().ids.size());
    if (need.range)
        for (auto& id : r.getValue().ids) need.ids.push_back(id.copy());
    if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
    needs->push_back(std::move(need));
    co_return Status::OK();
}

asio::awaitable<bson::Doc> ClientConnection::tieredTxnStatement(const CollectionPolicy& p,
                                                                std::string_view name,
                                                                const wire::OpMsg& msg,
                                                                const bson_t* cmd) {
    const bool first = truthy(cmd, "startTransaction");
    ClientTxn txn(p_.fast(), cmd);
    std::vector<Pinned> pins;
    std::vector<TxnNeed> needs;
    Status st = Status::OK();
    bson_t empty = BSON_INITIALIZER;
    // Promote (and pin) what the statement may read or write that lives
    // only in the archive: its named ids, or the archive's matches.
    if (isReadCommand(name)) {
        std::string other = name == "aggregate" ? otherCollectionStage(cmd) : "";
        Decision d = p_.router().routeRead(p, name, cmd);
        const auto* prog = p_.state().progress(p.ns);
        if (!other.empty()) {
            st = Status(ErrorCode::OperationNotSupportedInTransaction,
                        fmt::format("halocline: {} in a transaction on the tiered collection {} "
                                    "is not supported",
                                    other, p.ns));
        } else if (d.route == Route::Refuse) {
            st = d.refusal;
        } else if (d.route != Route::Fast || !prog || !prog->warmDone) {
            bson_t filter, collation;
            if (!readFilter(name, cmd, &filter)) filter = empty;
            bool collated = bson::subDocument(cmd, "collation", &collation);
            std::optional<std::vector<Id>> ids;
            if (d.lookupId) {
                ids.emplace();
                ids->push_back(d.lookupId->copy());
            }
            st = co_await prepareInTxn(p, &filter, collated ? &collation : nullptr, std::move(ids),
                                       &pins, &needs);
        }
        // (A read the fast tier provably answers whole, with the warm-up
        // done, needs nothing: it held that range at the snapshot too.)
    } else if (name == "insert") {
        std::vector<Id> ids;
        for (auto d : statements(msg, cmd, "documents")) {
            bson::View v(d.data(), d.size());
            Id id;
            if (idOf(v.get(), &id)) ids.push_back(std::move(id));
        }
        st = co_await prepareInTxn(p, nullptr, nullptr, std::move(ids), &pins, &needs);
    } else if (name == "update" || name == "delete") {
        for (auto stmt : statements(msg, cmd, name == "update" ? "updates" : "deletes")) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q, collation;
            if (!bson::subDocument(u.get(), "q", &q)) q = empty;
            bool collated = bson::subDocument(u.get(), "collation", &collation);
            st = co_await prepareInTxn(p, &q, collated ? &collation : nullptr, std::nullopt, &pins,
                                       &needs);
            if (!st.isOK()) break;
        }
    } else if (isWriteCommand(name)) {  // findAndModify
        bson_t q, collation;
        if (!bson::subDocument(cmd, "query", &q)) q = empty;
        bool collated = bson::subDocument(cmd, "collation", &collation);
        st = truthy(cmd, "remove") ? removeSupported(cmd) : Status::OK();
        if (st.isOK())
            st = co_await prepareInTxn(p, &q, collated ? &collation : nullptr, std::nullopt, &pins,
                                       &needs);
    }
    // After the first statement the snapshot is taken: what was promoted
    // since is not in it (CONSISTENCY.md, Transactions).
    if (st.isOK() && !first)
        for (auto& n : needs) {
            st = co_await snapshotHolds(p_.tiers(), txn, p.ns, n.ids, n.range);
            if (!st.isOK()) break;
        }
    bson::Doc out;
    if (!st.isOK()) {
        out = txnErrorDoc(st);
    } else if (name == "delete") {
        // Deletes leave their tombstones in the same transaction.
        int64_t n = 0;
        for (auto stmt : statements(msg, cmd, "deletes")) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q, collation;
            if (!bson::subDocument(u.get(), "q", &q)) q = empty;
            bool collated = bson::subDocument(u.get(), "collation", &collation);
            bson_iter_t it;
            int64_t limit = 0;
            if (bson_iter_init_find(&it, u.get(), "limit")) limit = bson_iter_as_int64(&it);
            auto r = co_await deleteAndTombstone(txn.runner(), p_.tiers().meta, p.ns, &q,
                                                 limit == 1 ? 1 : 0, nullptr,
                                                 collated ? &collation : nullptr);
            if (!r.isOK()) {
                st = r.getStatus();
                break;
            }
            n += r.getValue().n;
        }
        if (st.isOK()) {
            BSON_APPEND_INT32(out.mut(), "n", static_cast<int32_t>(n));
            BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
            appendClock(out.mut(), p_.state().fastClusterTime.load());
        } else {
            out = txnErrorDoc(st);
        }
    } else if ((name == "findAndModify" || name == "findandmodify") && truthy(cmd, "remove")) {
        bson_t q, sort, collation;
        if (!bson::subDocument(cmd, "query", &q)) q = empty;
        bool sorted = bson::subDocument(cmd, "sort", &sort);
        bool collated = bson::subDocument(cmd, "collation", &collation);
        auto r =
            co_await deleteAndTombstone(txn.runner(), p_.tiers().meta, p.ns, &q, 1,
                                        sorted ? &sort : nullptr, collated ? &collation : nullptr);
        st = r.getStatus();
        out = r.isOK() ? removeReply(r.getValue()) : txnErrorDoc(st);
    } else {
        bson::Doc body = forwardBody(cmd, false);
        out = co_await forward(p_.fast(), msg, body.get(), p.ns, true);
    }
    release(pins);
    // A statement that fails ends the transaction, as on mongod.
    if (!st.isOK() && (!first || txn.started())) co_await txn.abort();
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::endTransaction(const wire::OpMsg& msg,
                                                            const bson_t* cmd) {
    // The tier that runs it: as this proxy saw it start, else as the token
    // the driver kept from another proxy (or this one before a restart) says.
    std::optional<TxnTable::Entry> e;
    if (auto k = txnKeyOf(cmd)) e = p_.transactions().find(*k);
    bool fast = e && e->side == TxnSide::Fast;
    bson_t token;
    if (!e && bson::subDocument(cmd, "recoveryToken", &token))
        fast = str(&token, "recoveryShardId") == p_.fast().name();
    Tier& tier = fast ? p_.fast() : p_.archive();
    bson::Doc body = forwardBody(cmd, !fast);
    co_return co_await forward(tier, msg, body.get(), std::string(), false);
}

asio::awaitable<bson::Doc> ClientConnection::currentOp(const bson_t* cmd, const std::string& name) {
    // The filter: the legacy command's other fields, or the $match stages after
    // $currentOp. Nothing else may follow it here (the proxy has no pipeline).
    bson::Doc filter;
    bool includeIdle = false;
    if (name == "aggregate") {
        bson_t pipeline, spec;
        bson_iter_t it;
        bson::subDocument(cmd, "pipeline", &pipeline);
        bson_iter_init(&it, &pipeline);
        bson_iter_next(&it);
        bson_iter_t st;
        bson_iter_recurse(&it, &st);
        bson_iter_next(&st);
        if (BSON_ITER_HOLDS_DOCUMENT(&st)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&st, &len, &data);
            bson_init_static(&spec, data, len);
            includeIdle = truthy(&spec, "idleConnections");
        }
        bson_t all;
        BSON_APPEND_ARRAY_BEGIN(filter.mut(), "$and", &all);
        ArrayKey k;
        size_t n = 0;
        while (bson_iter_next(&it)) {
            bson_t match;
            bson_iter_t m;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &m) ||
                !bson_iter_next(&m) || std::string_view(bson_iter_key(&m)) != "$match" ||
                !BSON_ITER_HOLDS_DOCUMENT(&m))
                co_return errorDoc(Status(ErrorCode::CommandNotSupported,
                                          "halocline: through the proxy only $match stages may "
                                          "follow $currentOp"));
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&m, &len, &data);
            bson_init_static(&match, data, len);
            bson_append_document(&all, k(n++), -1, &match);
        }
        bson_append_array_end(filter.mut(), &all);
        if (n == 0) filter = bson::Doc();
    } else {
        bson_iter_t it;
        bson_iter_init(&it, cmd);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "currentOp" || k == "$all" || k == "$ownOps" || k == "$db" || k == "lsid" ||
                k == "$clusterTime" || k == "$readPreference" || k == "comment")
                continue;
            bson_append_iter(filter.mut(), nullptr, 0, &it);
        }
        includeIdle = truthy(cmd, "$all");
    }
    auto matcher = query::Matcher::parse(filter.get());
    if (!matcher.isOK()) co_return errorDoc(matcher.getStatus());
    // Without the inprog privilege a user sees only its own operations.
    std::string me = auth_.principal();
    bool all = !auth_.enabled() || access::maySeeAllOperations(auth_.privileges());
    std::vector<bson::Doc> ops = p_.operations().current(includeIdle, all ? nullptr : &me);
    bson::Doc out;
    bson_t arr;
    ArrayKey k;
    size_t n = 0;
    if (name == "aggregate") {
        bson_t cursor;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "cursor", &cursor);
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        for (auto& op : ops)
            if (matcher.getValue()->matches(op.get()))
                bson_append_document(&arr, k(n++), -1, op.get());
        bson_append_array_end(&cursor, &arr);
        BSON_APPEND_INT64(&cursor, "id", 0);
        BSON_APPEND_UTF8(&cursor, "ns", "admin.$cmd.aggregate");
        bson_append_document_end(out.mut(), &cursor);
    } else {
        BSON_APPEND_ARRAY_BEGIN(out.mut(), "inprog", &arr);
        for (auto& op : ops)
            if (matcher.getValue()->matches(op.get()))
                bson_append_document(&arr, k(n++), -1, op.get());
        bson_append_array_end(out.mut(), &arr);
    }
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    co_return out;
}

bson::Doc ClientConnection::killOp(const bson_t* cmd) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "op") || !BSON_ITER_HOLDS_NUMBER(&it))
        return errorDoc(
            Status(ErrorCode::TypeMismatch, "Did not provide \"op\" field or it is not a number"));
    std::string me = auth_.principal();
    bool any = !auth_.enabled() || access::mayKillAnyOperation(auth_.privileges());
    p_.operations().kill(bson_iter_as_int64(&it), any ? nullptr : &me);
    // As mongod: the same answer whether or not the operation was found.
    bson::Doc out;
    BSON_APPEND_UTF8(out.mut(), "info", "attempting to kill op");
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    return out;
}

bson::Doc ClientConnection::connPoolStats() {
    bson::Doc out;
    int64_t inUse = 0, available = 0, created = 0;
    bson_t hosts, h;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "hosts", &hosts);
    for (Tier* t : {&p_.fast(), &p_.archive()}) {
        Tier::PoolStats s = t->poolStats();
        std::string host = t->info().primary;
        if (host.empty()) host = t->name();
        bson_append_document_begin(&hosts, host.c_str(), -1, &h);
        BSON_APPEND_INT64(&h, "inUse", s.inUse);
        BSON_APPEND_INT64(&h, "available", s.available);
        BSON_APPEND_INT64(&h, "leased", 0);
        BSON_APPEND_INT64(&h, "created", s.created);
        BSON_APPEND_INT64(&h, "refreshing", 0);
        BSON_APPEND_UTF8(&h, "tier", t->name().c_str());
        bson_append_document_end(&hosts, &h);
        inUse += s.inUse;
        available += s.available;
        created += s.created;
    }
    bson_append_document_end(out.mut(), &hosts);
    BSON_APPEND_INT64(out.mut(), "numClientConnections", 0);
    BSON_APPEND_INT64(out.mut(), "numAScopedConnections", 0);
    BSON_APPEND_INT64(out.mut(), "totalInUse", inUse);
    BSON_APPEND_INT64(out.mut(), "totalAvailable", available);
    BSON_APPEND_INT64(out.mut(), "totalLeased", 0);
    BSON_APPEND_INT64(out.mut(), "totalCreated", created);
    BSON_APPEND_INT64(out.mut(), "totalRefreshing", 0);
    bson_t rs;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "replicaSets", &rs);
    bson_append_document_end(out.mut(), &rs);
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    return out;
}

asio::awaitable<bson::Doc> ClientConnection::pauseFeeder(const bson_iter_t& arg) {
    if (!BSON_ITER_HOLDS_NUMBER(&arg) || bson_iter_as_int64(&arg) < 0)
        co_return errorDoc(Status(ErrorCode::BadValue,
                                  "haloclinePauseFeeder takes the pause in milliseconds (0: "
                                  "resume)"));
    const int64_t ms = bson_iter_as_int64(&arg);
    const int64_t until = ms == 0 ? 0 : wallMillis() + ms;
    // Durable, in the fast tier: whichever proxy leads the workers now or
    // later reads it (the feeder checks it between batches).
    bson::Doc f;
    BSON_APPEND_DATE_TIME(f.mut(), "until", until);
    Status st =
        co_await workers::saveStateDoc(p_.tiers().fast, p_.tiers().meta, "feederPause", f.get());
    if (!st.isOK()) co_return errorDoc(st);
    bson::Doc d;
    if (until)
        BSON_APPEND_DATE_TIME(d.mut(), "pausedUntil", until);
    else
        BSON_APPEND_NULL(d.mut(), "pausedUntil");
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    co_return d;
}

asio::awaitable<bson::Doc> ClientConnection::flushFeeder(const bson_t* cmd) {
    std::chrono::milliseconds timeout = p_.config().causalWaitTimeout;
    bson_iter_t it;
    if (bson_iter_init_find(&it, cmd, "maxTimeMS") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > 0)
        timeout = std::chrono::milliseconds(bson_iter_as_int64(&it));
    Status st = co_await p_.awaitApplied(0, "every tiered collection", timeout,
                                         [this] { return slot_.killed(); });
    if (!st.isOK()) co_return errorDoc(st);
    bson::Doc d;
    appendOpTime(d.mut(), "appliedTime", p_.state().feederApplied.load());
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    co_return d;
}

bson::Doc ClientConnection::status() {
    auto& s = p_.state();
    bson::Doc d;
    bson_t tiers, t;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "tiers", &tiers);
    for (Tier* tier : {&p_.fast(), &p_.archive()}) {
        bson_append_document_begin(&tiers, tier->name().c_str(), -1, &t);
        BSON_APPEND_BOOL(&t, "reachable", tier->reachable());
        // Requests this proxy sent to the tier (clients' and its own): divided by
        // the operations served, the round trips per operation.
        BSON_APPEND_INT64(&t, "roundTrips", tier->poolStats().roundTrips);
        std::string primary = tier->info().primary;
        BSON_APPEND_UTF8(&t, "primary", primary.c_str());
        bson_append_document_end(&tiers, &t);
    }
    bson_append_document_end(d.mut(), &tiers);
    bson_t w;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "workers", &w);
    static const char* roles[] = {"disabled", "standby", "leader"};
    BSON_APPEND_UTF8(&w, "role", roles[s.role.load()]);
    bson_append_document_end(d.mut(), &w);
    bson_t f;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "feeder", &f);
    appendOpTime(&f, "appliedTime", s.feederApplied.load());
    BSON_APPEND_INT64(&f, "lagOps", s.feederLagOps.load());
    BSON_APPEND_DOUBLE(&f, "lagSeconds", s.feederLagMillis.load() / 1000.0);
    BSON_APPEND_INT64(&f, "events", s.feederEvents.load());
    BSON_APPEND_INT64(&f, "archiveWrites", s.feederApplies.load());
    BSON_APPEND_UTF8(&f, "mode", p_.config().feederLazy ? "lazy" : "eager");
    appendOpTime(&f, "receivedTime", s.feederReceived.load());
    BSON_APPEND_INT64(&f, "pendingDocuments", s.feederPending.load());
    if (int64_t until = s.feederPausedUntil.load(); until > wallMillis())
        BSON_APPEND_DATE_TIME(&f, "pausedUntil", until);
    else
        BSON_APPEND_NULL(&f, "pausedUntil");
    bson_append_document_end(d.mut(), &f);
    int64_t fast = 0, archive = 0;
    bson_t cols;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "collections", &cols);
    for (const auto& p : p_.config().collections) {
        auto* pr = s.progress(p.ns);
        bson_t c, warm, ev, rt;
        bson_append_document_begin(&cols, p.ns.c_str(), -1, &c);
        BSON_APPEND_UTF8(&c, "ageField", p.ageField.c_str());
        std::string problem = pr->policyProblem();
        if (!problem.empty()) BSON_APPEND_UTF8(&c, "policyProblem", problem.c_str());
        if (auto refused = pr->refusals()) {
            // Documents the archive refused (CONSISTENCY.md, Refused documents): the first few.
            bson_t rf, arr;
            BSON_APPEND_DOCUMENT_BEGIN(&c, "refused", &rf);
            BSON_APPEND_INT64(&rf, "count", static_cast<int64_t>(refused->size()));
            BSON_APPEND_ARRAY_BEGIN(&rf, "documents", &arr);
            ArrayKey k;
            for (size_t i = 0; i < refused->size() && i < 20; ++i) {
                const Refusal& f = (*refused)[i];
                bson_t e;
                bson_append_document_begin(&arr, k(i), -1, &e);
                bson_iter_t vit;
                if (const bson_value_t* v = idValue(f.id, &vit)) bson_append_value(&e, "_id", 3, v);
                BSON_APPEND_INT32(&e, "code", f.code);
                BSON_APPEND_UTF8(&e, "errmsg", f.errmsg.c_str());
                BSON_APPEND_DATE_TIME(&e, "since", f.sinceMs);
                bson_append_document_end(&arr, &e);
            }
            bson_append_array_end(&rf, &arr);
            bson_append_document_end(&c, &rf);
        }
        BSON_APPEND_INT64(&c, "horizonMillis", p.horizon.count());
        BSON_APPEND_DOCUMENT_BEGIN(&c, "warm", &warm);
        int64_t low = pr->warmLowMs.load();
        if (low == std::numeric_limits<int64_t>::max())
            BSON_APPEND_NULL(&warm, "low");
        else
            BSON_APPEND_DATE_TIME(&warm, "low", low);
        BSON_APPEND_BOOL(&warm, "done", pr->warmDone.load());
        BSON_APPEND_INT64(&warm, "warmed", pr->warmed.load());
        bson_append_document_end(&c, &warm);
        int64_t fl = p_.router().fastLowMs(p);
        if (fl == std::numeric_limits<int64_t>::max())
            BSON_APPEND_NULL(&c, "fastHoldsAbove");
        else
            BSON_APPEND_DATE_TIME(&c, "fastHoldsAbove", fl);
        BSON_APPEND_DOCUMENT_BEGIN(&c, "evictor", &ev);
        BSON_APPEND_INT64(&ev, "backlog", pr->evictBacklog.load());
        BSON_APPEND_INT64(&ev, "evicted", pr->evicted.load());
        bson_append_document_end(&c, &ev);
        BSON_APPEND_DOCUMENT_BEGIN(&c, "routing", &rt);
        int64_t rf = pr->routedFast.load(), ra = pr->routedArchive.load();
        BSON_APPEND_INT64(&rt, "fast", rf);
        BSON_APPEND_INT64(&rt, "archive", ra);
        BSON_APPEND_INT64(&rt, "idLookupHits", pr->idLookupHits.load());
        BSON_APPEND_INT64(&rt, "idLookupMisses", pr->idLookupMisses.load());
        BSON_APPEND_INT64(&rt, "mergedReads", pr->mergedReads.load());
        BSON_APPEND_INT64(&rt, "coldWrites", pr->coldWrites.load());
        BSON_APPEND_INT64(&rt, "promoted", pr->promoted.load());
        bson_append_document_end(&c, &rt);
        BSON_APPEND_DOUBLE(&c, "hitRatio", rf + ra ? static_cast<double>(rf) / (rf + ra) : 0.0);
        bson_append_document_end(&cols, &c);
        fast += rf;
        archive += ra;
    }
    bson_append_document_end(d.mut(), &cols);
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "routing", &r);
    BSON_APPEND_INT64(&r, "fast", fast);
    BSON_APPEND_INT64(&r, "archive", archive);
    bson_append_document_end(d.mut(), &r);
    BSON_APPEND_DOUBLE(d.mut(), "hitRatio",
                       fast + archive ? static_cast<double>(fast) / (fast + archive) : 0.0);
    BSON_APPEND_INT64(d.mut(), "openCursors", static_cast<int64_t>(p_.cursors().size()));
    if (const net::Listener* l = p_.listener()) {
        // As serverStatus.connections on mongod.
        bson_t conn;
        auto current = static_cast<int64_t>(l->openConnections());
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "connections", &conn);
        BSON_APPEND_INT64(&conn, "current", current);
        BSON_APPEND_INT64(&conn, "available",
                          std::max<int64_t>(0, p_.config().maxIncomingConnections - current));
        BSON_APPEND_INT64(&conn, "totalCreated", static_cast<int64_t>(l->totalConnections()));
        BSON_APPEND_INT64(&conn, "rejected", static_cast<int64_t>(l->rejectedConnections()));
        bson_append_document_end(d.mut(), &conn);
    }
    bson_t sec;
    BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "security", &sec);
    BSON_APPEND_BOOL(&sec, "authorization", p_.config().authorization);
    BSON_APPEND_INT64(&sec, "authenticationsSucceeded", p_.authCounters().succeeded.load());
    BSON_APPEND_INT64(&sec, "authenticationsFailed", p_.authCounters().failed.load());
    bson_append_document_end(d.mut(), &sec);
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    appendClock(d.mut(), 0);
    return d;
}

asio::awaitable<bson::Doc> ClientConnection::explainRouting(const bson_t* cmd,
                                                            const std::string& reqDb) {
    bson_t inner;
    if (!bson::subDocument(cmd, "haloclineExplain", &inner))
        co_return errorDoc(
            Status(ErrorCode::TypeMismatch,
                   "haloclineExplain takes a command document, e.g. "
                   "{haloclineExplain: {find: 'orders', filter: {...}}, db: 'shop'}"));
    std::string db = str(cmd, "db");
    if (db.empty()) db = str(&inner, "$db");
    if (db.empty()) db = reqDb;
    bson::Doc out;
    appendRouting(out.mut(), routingOf(&inner, db));
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), 0);
    co_return out;
}

ClientConnection::Routing ClientConnection::routingOf(const bson_t* inner, const std::string& db) {
    Routing r;
    bson_iter_t it;
    std::string coll;
    if (bson_iter_init(&it, inner) && bson_iter_next(&it)) {
        r.name = bson_iter_key(&it);
        if (BSON_ITER_HOLDS_UTF8(&it)) coll = bson_iter_utf8(&it, nullptr);
    }
    r.ns = coll.empty() ? "" : db + "." + coll;
    r.policy = r.ns.empty() ? nullptr : p_.config().policyFor(r.ns);
    Decision& d = r.decision;
    if (!r.policy) {
        d.route = Route::Archive;
        d.reason = r.ns.empty() ? "not a collection command: the archive answers"
                                : "untiered collection: passed through to the archive";
    } else if (bson_has_field(inner, "autocommit") || bson_has_field(inner, "startTransaction")) {
        d.route = Route::Refuse;
        d.reason = "transactions on tiered collections are refused (code 263)";
        d.refusal = Status(ErrorCode::OperationNotSupportedInTransaction, d.reason);
    } else if (isReadCommand(r.name)) {
        d = p_.router().routeRead(*r.policy, r.name, inner);
    } else if (isWriteCommand(r.name)) {
        d.route = Route::Fast;
        d.reason =
            "writes land in the fast tier after the documents they can touch are copied "
            "up from the archive";
    } else if (isDdlCommand(r.name)) {
        d.route = Route::Archive;
        d.reason = "schema changes apply to both tiers, the archive first";
    } else {
        d.route = Route::Archive;
        d.reason = "the archive holds the whole collection";
    }
    return r;
}

void ClientConnection::appendRouting(bson_t* out, const Routing& r) {
    std::string route(routeName(r.decision.route));
    BSON_APPEND_UTF8(out, "tier", route.c_str());
    BSON_APPEND_UTF8(out, "reason", r.decision.reason.c_str());
    BSON_APPEND_UTF8(out, "namespace", r.ns.c_str());
    BSON_APPEND_BOOL(out, "tiered", r.policy != nullptr);
    if (!r.policy) return;
    int64_t fl = p_.router().fastLowMs(*r.policy);
    if (fl == std::numeric_limits<int64_t>::max())
        BSON_APPEND_NULL(out, "fastHoldsAbove");
    else
        BSON_APPEND_DATE_TIME(out, "fastHoldsAbove", fl);
    if (r.decision.route == Route::Archive && isReadCommand(r.name))
        BSON_APPEND_BOOL(out, "waitsForFeeder", p_.config().causalReads);
}

// ---------------------------------------------------------------------------

Proxy::Proxy(ProxyConfig cfg, int threads)
    : cfg_(std::move(cfg)),
      threadCount_(threads > 0 ? threads : std::max(2u, std::thread::hardware_concurrency())),
      fast_("fast", cfg_.fastUri),
      archive_("archive", cfg_.archiveUri),
      fastSessions_(SessionKind::Internal),
      appSessions_(SessionKind::App),
      archiveSessions_(SessionKind::Random),
      fastClock_(fast_),
      demandClock_(fast_, Metadata{cfg_.metadataDb}),
      users_(archive_, cfg_.userCacheInvalidation),
      tiers_{fast_, archive_, fastSessions_, appSessions_, Metadata{cfg_.metadataDb}},
      state_(cfg_),
      router_(cfg_, state_),
      cursors_(cfg_.maxCursors) {
    tiers_.archiveSessions = &archiveSessions_;
}

Proxy::~Proxy() {
    stop();
}

uint16_t Proxy::port() const {
    return listener_ ? listener_->port() : 0;
}

Status Proxy::claimSession(const std::string& lsidId, const std::string& principal) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(sessionsMu_);
    auto [it, fresh] = sessionOwners_.try_emplace(lsidId, SessionOwner{principal, now});
    if (!fresh && it->second.principal != principal)
        return Status(ErrorCode::Unauthorized,
                      fmt::format("Cannot use a logical session that belongs to another user "
                                  "(this connection is authenticated as {})",
                                  principal));
    it->second.lastUsed = now;
    return Status::OK();
}

asio::awaitable<StatusWith<OpTime>> Proxy::writesBefore() {
    if (!cfg_.feederLazy) {
        auto r = co_await fastClock_.now();
        if (r.isOK()) state_.noteFastTime(r.getValue());
        co_return r;
    }
    // The demand is a write at time T: every write acknowledged before it is
    // earlier, and the feeder applies up to T - 1 when the batch ends on it.
    auto r = co_await demandClock_.now();
    if (!r.isOK()) co_return r;
    state_.noteFastTime(r.getValue());
    co_return r.getValue() - 1;
}

asio::awaitable<Status> Proxy::awaitApplied(OpTime target, const std::string& ns,
                                            std::chrono::milliseconds timeout,
                                            const std::function<bool()>& killed) {
    SharedState& s = state_;
    if (target == 0) {
        auto r = co_await writesBefore();
        if (!r.isOK()) co_return r.getStatus();
        target = r.getValue();
    }
    if (s.feederApplied.load() >= target) co_return Status::OK();
    auto deadline = std::chrono::steady_clock::now() + timeout;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (s.feederApplied.load() < target) {
        // The leader's feeder publishes its progress in memory; other proxies
        // read it from the archive, where the feeder saves it after every batch.
        if (s.role.load() != static_cast<int>(WorkerRole::Leader) && s.claimFeederRefresh()) {
            Status st = co_await workers::refreshFeederProgress(tiers_, s);
            if (!st.isOK()) co_return st;
            if (s.feederApplied.load() >= target) break;
        }
        if (std::chrono::steady_clock::now() >= deadline)
            co_return Status(
                ErrorCode::ExceededTimeLimit,
                fmt::format("halocline: {} needs the archive to have received every write "
                            "acknowledged before (feeder behind by {} ms); waited {} ms "
                            "(tiering.causalWaitTimeout)",
                            ns, s.feederLagMillis.load(), timeout.count()));
        if (killed && killed()) co_return interrupted();
        timer.expires_after(std::chrono::milliseconds(2));
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return Status::OK();
}

void Proxy::killRemote(const std::vector<CursorEntry>& dropped) {
    for (const auto& e : dropped) {
        auto [db, coll] = splitNs(e.ns);
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "killCursors", coll.c_str());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "cursors", &arr);
        BSON_APPEND_INT64(&arr, "0", e.remoteId);
        bson_append_array_end(c.mut(), &arr);
        BSON_APPEND_UTF8(c.mut(), "$db", db.empty() ? "admin" : db.c_str());
        Tier* t = e.tier;
        asio::co_spawn(
            io_,
            [t, c = std::move(c)]() -> asio::awaitable<void> { (void)co_await t->run(c.get()); },
            asio::detached);
    }
}

asio::awaitable<void> Proxy::checkPolicies() {
    for (const auto& p : cfg_.collections) {
        auto r = co_await checkAgeField(archive_, p);
        if (!r.isOK()) {
            log::warning("tiering", 8210054, "Could not sample the archive to check a policy",
                         fmt::format(R"({{"ns":{},"error":{}}})", log::quote(p.ns),
                                     log::quote(r.getStatus().reason())));
            continue;
        }
        if (r.getValue().empty()) continue;
        log::warning("tiering", 8210053, "A tiered collection's policy does not fit its data",
                     fmt::format(R"({{"ns":{},"ageField":{},"problem":{}}})", log::quote(p.ns),
                                 log::quote(p.ageField), log::quote(r.getValue())));
        state_.progress(p.ns)->setPolicyProblem(std::move(r.getValue()));
    }
}

asio::awaitable<void> Proxy::reapLoop() {
    asio::steady_timer timer(io_);
    while (true) {
        timer.expires_after(std::chrono::seconds(1));
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        {
            std::lock_guard lk(mu_);
            if (shutdown_) co_return;
        }
        killRemote(cursors_.reap(cfg_.cursorTimeout));
        {
            auto idle = std::chrono::steady_clock::now() - std::chrono::minutes(30);
            std::lock_guard lk(sessionsMu_);
            std::erase_if(sessionOwners_, [&](const auto& e) { return e.second.lastUsed < idle; });
        }
    }
}

Status Proxy::start(std::chrono::milliseconds tierWait) {
    // net.tls is checked before anything waits on the tiers: a bad file fails fast.
    auto tls = net::TlsServerContext::create(cfg_.tls);
    if (!tls.isOK()) return tls.getStatus();
    for (Tier* t : {&fast_, &archive_}) {
        Status s = t->init();
        if (!s.isOK()) return s;
    }
    // io_ runs the workers, the acceptor and the proxy's own background steps on
    // one thread. Client connections are spread over an io_context per thread:
    // a connection's reads, its tier round trips (Tier pools connections per
    // context) and its reply never hand over between threads.
    work_.emplace(io_.get_executor());
    threads_.emplace_back([this] { io_.run(); });
    for (int i = 0; i < threadCount_; ++i) {
        connectionContexts_.push_back(std::make_unique<asio::io_context>(1));
        asio::io_context* c = connectionContexts_.back().get();
        threads_.emplace_back([c] {
            auto idle = asio::make_work_guard(*c);  // runs until stop(), with or without clients
            c->run();
        });
    }

    // Wait for both primaries and prepare the fast tier.
    std::promise<Status> ready;
    auto fut = ready.get_future();
    asio::co_spawn(
        io_,
        [this, tierWait, &ready]() -> asio::awaitable<void> {
            auto deadline = std::chrono::steady_clock::now() + tierWait;
            asio::steady_timer timer(io_);
            Status last = Status::OK();
            while (true) {
                auto a = co_await archive_.runOk(pingCommand());
                auto f = co_await fast_.runOk(pingCommand());
                if (a.isOK() && f.isOK()) {
                    // Replies carry the fast tier's clock from the first one on.
                    bson_iter_t t;
                    if (bson_iter_init_find(&t, f.getValue().get(), "operationTime"))
                        state_.noteFastTime(toOpTime(t));
                    last = co_await ensureSetup(cfg_, tiers_);
                    if (last.isOK()) break;
                } else {
                    last = a.isOK() ? f.getStatus() : a.getStatus();
                    // A refused credential does not heal by waiting: fail now.
                    if (last.code() == ErrorCode::AuthenticationFailed) break;
                }
                // A tier whose certificate we reject (or that rejects ours) will
                // not change its mind while we wait: say so now.
                if (last.code() == ErrorCode::SSLHandshakeFailed) break;
                if (std::chrono::steady_clock::now() >= deadline) break;
                timer.expires_after(std::chrono::milliseconds(200));
                asio::error_code ec;
                co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            }
            ready.set_value(last);
        },
        asio::detached);
    Status s = fut.get();
    if (!s.isOK()) return s;

    listener_ = std::make_unique<net::Listener>(
        io_, cfg_.bindIp, static_cast<uint16_t>(cfg_.port),
        [this](const net::ConnectionInfo& info) -> std::unique_ptr<net::FrameHandler> {
            return std::make_unique<ClientConnection>(*this, info);
        },
        tls.getValue(),
        [this] {
            std::vector<asio::io_context*> v;
            for (auto& c : connectionContexts_) v.push_back(c.get());
            return v;
        }());
    listener_->setMaxConnections(static_cast<size_t>(cfg_.maxIncomingConnections));
    s = listener_->start();
    if (!s.isOK()) return s;
    asio::co_spawn(io_, reapLoop(), asio::detached);
    asio::co_spawn(io_, checkPolicies(), asio::detached);
    if (cfg_.workersEnabled) {
        std::string owner = fmt::format("{}:{}:{}", cfg_.bindIp, listener_->port(), ::getpid());
        workers_ = std::make_unique<Workers>(io_, cfg_, tiers_, state_, owner);
        workers_->start();
    }
    if (!cfg_.authorization)
        log::warning("control", 22120,
                     "Access control is not enabled for the proxy. Read and write access to data "
                     "and configuration is unrestricted: every client acts as the proxy's tier "
                     "user",
                     "{}");
    log::info("network", 23016, "Waiting for connections",
              fmt::format(R"({{"port":{},"ssl":"{}"}})", listener_->port(),
                          cfg_.tls.enabled() ? "on" : "off"));
    return Status::OK();
}

void Proxy::requestShutdown() {
    std::lock_guard lk(mu_);
    shutdown_ = true;
    cv_.notify_all();
}

void Proxy::waitForShutdown() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [this] { return shutdown_; });
}

void Proxy::stop() {
    {
        std::lock_guard lk(mu_);
        shutdown_ = true;
    }
    if (workers_) workers_->stop();
    if (listener_) listener_->stop();
    work_.reset();
    io_.stop();
    for (auto& c : connectionContexts_) c->stop();
    for (auto& t : threads_)
        if (t.joinable()) t.join();
    threads_.clear();
    workers_.reset();
    listener_.reset();
    // The connections' coroutines end with their contexts, while everything
    // they refer to still exists; the tiers' idle sockets on those contexts go first.
    for (Tier* t : {&fast_, &archive_}) t->closeIdle();
    connectionContexts_.clear();
}

}  // namespace halo::tiering
