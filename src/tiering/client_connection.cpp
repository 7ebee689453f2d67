// A client connection: framing, dispatch, forwarding to a tier, DDL on both tiers;
// and the helpers the proxy_*.cpp files share (client_connection.h).
#include "tiering/client_connection.h"

#include <fmt/format.h>

#include <cstring>

#include "common/clock.h"
#include "common/log.h"
#include "net/tls.h"
#include "tiering/merged_read.h"
#include "tiering/op_deadline.h"
#include "tiering/workers.h"

namespace halo::tiering {

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
    // recoveryToken is the proxy's own (see runCommand): no tier needs it.
    if (!toArchive) return bson::copyWithout(cmd, {"$clusterTime", "recoveryToken"});
    // One pass: readConcern is set aside and appended again, at the end,
    // without afterClusterTime (a command's fields but its name have no order).
    std::optional<bson_iter_t> readConcern;
    bson::Doc out = bson::copyWithout(cmd, {"$clusterTime", "recoveryToken", "readConcern"},
                                      [&](const bson_iter_t& it) {
                                          if (std::string_view(bson_iter_key(&it)) == "readConcern")
                                              readConcern = it;
                                      });
    if (readConcern) {
        bson_t rc;
        if (bson::subDocumentAt(*readConcern, &rc)) {
            bson::Doc level = bson::copyWithout(&rc, {"afterClusterTime"});
            BSON_APPEND_DOCUMENT(out.mut(), "readConcern", level.get());
        } else {
            bson_append_iter(out.mut(), nullptr, 0, &*readConcern);  // the tier refuses it
        }
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
std::vector<std::span<const uint8_t>> statements(const wire::OpMsg& msg, const bson::Fields& body,
                                                 const char* name) {
    std::vector<std::span<const uint8_t>> out;
    for (auto& s : msg.sequences)
        if (s.identifier == name)
            for (auto& d : s.documents) out.push_back(d);
    bson_iter_t it, arr;
    if (body.find(name, &it) && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &arr)) {
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

/// A find whose answer is empty exactly when no document has the _id: the
/// filter names nothing else, and no skip, collation or index bounds can
/// exclude the document.
bool plainIdLookup(const bson::Fields& cmd) {
    bson_t filter;
    if (!cmd.subDocument("filter", &filter) || bson_count_keys(&filter) != 1) return false;
    for (const char* k : {"skip", "collation", "min", "max"})
        if (cmd.has(k)) return false;
    return true;
}

bson::Doc retryKeyOf(const bson::Fields& cmd, int stmt) {
    bson::Doc key;
    bson_t lsid;
    bson_iter_t it;
    if (!cmd.subDocument("lsid", &lsid) || !cmd.find("txnNumber", &it) ||
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
StatusWith<RemoveProjection> removeProjection(const bson_t* cmd) {
    RemoveProjection out;
    bson_t fields, q;
    if (!bson::subDocument(cmd, "fields", &fields) || bson_empty(&fields)) return out;
    bson_t empty = BSON_INITIALIZER;
    if (!bson::subDocument(cmd, "query", &q)) q = empty;
    auto m = query::Matcher::parse(&q);
    if (m.isOK()) out.matcher = std::move(m.getValue());
    auto p = query::Projection::parse(&fields, out.matcher.get());
    if (!p.isOK()) return p.getStatus();
    out.projection.emplace(std::move(p.getValue()));
    return out;
}

StatusWith<bson::Doc> RemoveProjection::apply(const bson_t* doc) const {
    if (!projection) return bson::Doc::copyOf(doc);
    try {
        query::MatchDetails details;
        if (projection->requiresMatchDetails() && matcher) matcher->matches(doc, &details);
        return projection->apply(doc, &details);
    } catch (const DBException& e) {
        return e.status();
    }
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
    for (auto spec : statements(msg, bson::Fields(cmd), "indexes")) {
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
        // The command's fields, read once: the lookups of every command
        // ($db, its session and transaction) ask this index, not the bytes.
        const bson::Fields fields(body.get());
        bson_iter_t dbField;
        std::string db;
        if (fields.find("$db", &dbField) && BSON_ITER_HOLDS_UTF8(&dbField))
            db = bson_iter_utf8(&dbField, nullptr);
        if (db.empty())
            reply = errorDoc(
                Status(ErrorCode::Location40571, "OP_MSG requests require a $db argument"));
        else
            reply = co_await runCommand(m.getValue(), body.get(), fields, db);
    }
    if (closeAfterReply_) co_return net::HandlerResult{std::nullopt, true};
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
    const bson::Fields fields(body.get());
    co_return co_await runCommand(wire::OpMsg{}, body.get(), fields, db);
}

namespace {

/// When a command with a maxTimeMS must be over (with a margin for a tier's own
/// MaxTimeMSExpired reply to arrive first); null without one.
std::shared_ptr<const SteadyTime> operationDeadline(const bson_t* cmd) {
    // Most commands have none: looking for the key's bytes (with its NUL) is far
    // cheaper than walking the elements.
    static constexpr char kKey[] = "maxTimeMS";
    const auto* data = reinterpret_cast<const char*>(bson_get_data(cmd));
    const char* end = data + cmd->len;
    const char* p = data;
    bool seen = false;
    while (!seen && (p = static_cast<const char*>(std::memchr(p, 'x', end - p)))) {
        seen = p - data >= 2 && end - p >= 8 && std::memcmp(p - 2, kKey, sizeof kKey) == 0;
        ++p;
    }
    if (!seen) return nullptr;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "maxTimeMS") || !BSON_ITER_HOLDS_NUMBER(&it)) return nullptr;
    const int64_t ms = bson_iter_as_int64(&it);
    if (ms <= 0) return nullptr;
    constexpr std::chrono::milliseconds kReplyMargin{500};
    return std::make_shared<const SteadyTime>(std::chrono::steady_clock::now() +
                                              std::chrono::milliseconds(ms) + kReplyMargin);
}

}  // namespace

asio::awaitable<bson::Doc> ClientConnection::runCommand(const wire::OpMsg& msg, const bson_t* cmd,
                                                        const bson::Fields& fields,
                                                        const std::string& db) {
    bson::Doc reply;
    slot_.begin(cmd, db, auth_.principal());
    // The transaction the command is a statement of (one scan of the command).
    const std::optional<TxnKey> txn = txnKeyOf(fields);
    fields_ = &fields;
    try {
        Status own = sessionAllowed(cmd);
        std::string_view name;
        bson_iter_t first;
        if (bson_iter_init(&first, cmd) && bson_iter_next(&first)) name = bson_iter_key(&first);
        const bool testing = p_.config().enableTestCommands;
        std::optional<bson::Doc> failed;
        if (!own.isOK()) {
            reply = errorDoc(own);
        } else if (name == "configureFailPoint") {
            reply = testing ? configureFailPoint(cmd)
                            : errorDoc(Status(ErrorCode::CommandNotFound,
                                              "no such command: 'configureFailPoint'"));
        } else {
            // (Not inside a condition: GCC 12 miscompiles co_await in short-circuits.)
            if (testing && p_.failCommand().maybeOn())
                failed = co_await failCommandBefore(name, db, cmd);
            if (failed) {
                reply = std::move(*failed);
            } else {
                // With a maxTimeMS, every tier round trip of the command sees it.
                std::shared_ptr<const SteadyTime> deadline = operationDeadline(cmd);
                asio::any_io_executor ex;
                const asio::io_context::executor_type* inner = nullptr;
                if (deadline) {
                    ex = co_await asio::this_coro::executor;
                    inner = ex.target<asio::io_context::executor_type>();
                }
                if (inner)
                    reply =
                        co_await asio::co_spawn(DeadlineExecutor(*inner, std::move(deadline)),
                                                dispatch(msg, cmd, db, txn), asio::use_awaitable);
                else
                    reply = co_await dispatch(msg, cmd, db, txn);
                if (testing && p_.failCommand().maybeOn()) failCommandAfter(name, db, cmd, reply);
            }
        }
    } catch (const DBException& e) {
        reply = errorDoc(e.status());
    } catch (const std::exception& e) {
        reply = errorDoc(Status(ErrorCode::InternalError, e.what()));
    }
    fields_ = nullptr;
    slot_.end();
    // Every reply carries the clock (docs/CONSISTENCY.md, Clocks and sessions),
    // errors included, as mongod's do.
    if (!bson_has_field(reply.get(), "$clusterTime")) appendClock(reply.mut(), 0);
    // In a transaction, the token a driver resends with commitTransaction or
    // abortTransaction, to this or another proxy (mongos' recoveryToken).
    if (txn && !bson_has_field(reply.get(), "recoveryToken")) {
        std::optional<TxnTable::Entry> e = p_.transactions().find(*txn);
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
    // {clusterTime, signature} changes only with the time: built once per
    // value on each thread, then appended whole.
    thread_local OpTime builtFor = 0;
    thread_local bson::Doc clusterTime;
    if (builtFor != now) {
        bson::Doc ct;
        bson_t sig;
        appendOpTime(ct.mut(), "clusterTime", now);
        BSON_APPEND_DOCUMENT_BEGIN(ct.mut(), "signature", &sig);
        uint8_t zeros[20] = {};
        bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zeros, sizeof zeros);
        BSON_APPEND_INT64(&sig, "keyId", 0);
        bson_append_document_end(ct.mut(), &sig);
        clusterTime = std::move(ct);
        builtFor = now;
    }
    BSON_APPEND_DOCUMENT(out, "$clusterTime", clusterTime.get());
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
        return addCursor(std::move(e));
    });
}

int64_t ClientConnection::addCursor(CursorEntry e) {
    e.owner = auth_.principal();
    if (const bson_t* cmd = slot_.command()) e.lsid = bson::lsidIdBytes(cmd);
    std::vector<CursorEntry> dropped;
    int64_t id = p_.cursors().add(std::move(e), &dropped);
    if (!dropped.empty()) p_.killRemote(dropped);
    return id;
}

bson::Doc ClientConnection::rewriteReplyWith(Tier& tier, const bson_t* reply,
                                             const std::function<int64_t(int64_t)>& mapCursor) {
    bool fromFast = &tier == &p_.fast();
    OpTime opTime = 0;
    // The tier's reply as it is, but for its clock (the proxy's replaces it)...
    bson::Doc out =
        bson::copyWithout(reply, {"$clusterTime", "operationTime"}, [&](const bson_iter_t& it) {
            if (!fromFast) return;
            bson_iter_t sub;
            if (std::string_view(bson_iter_key(&it)) == "operationTime") {
                opTime = toOpTime(it);
                p_.state().noteFastTime(opTime);
            } else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
                       bson_iter_find(&sub, "clusterTime")) {
                p_.state().noteFastTime(toOpTime(sub));
            }
        });
    // ...and its cursor's id, replaced in place by the proxy's (both int64).
    bson_iter_t it, id;
    if (bson_iter_init(&it, out.get()) && bson_iter_find_descendant(&it, "cursor.id", &id) &&
        BSON_ITER_HOLDS_NUMBER(&id) && bson_iter_as_int64(&id) != 0) {
        const int64_t mine = mapCursor(bson_iter_as_int64(&id));
        if (!bson::patchInt64(out, "cursor.id", mine)) {
            // Not an int64 (mongod's is): the cursor document rebuilt, the id an int64.
            bson_t cursor;
            bson::Doc rest = bson::copyWithout(out.get(), {"cursor"});
            if (bson::subDocument(out.get(), "cursor", &cursor)) {
                bson::Doc c = bson::copyWithout(&cursor, {"id"});
                BSON_APPEND_INT64(c.mut(), "id", mine);
                BSON_APPEND_DOCUMENT(rest.mut(), "cursor", c.get());
            }
            out = std::move(rest);
        }
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

const std::unordered_map<std::string_view, ClientConnection::Command>&
ClientConnection::commands() {
    using R = const Request&;
    using C = ClientConnection&;
    using A = asio::awaitable<bson::Doc>;
    static const std::unordered_map<std::string_view, Command> table = {
        // The handshake and authentication (here), before any privilege check.
        {"hello", {[](C c, R r) { return c.helloCommand(r); }, true}},
        {"isMaster", {[](C c, R r) { return c.helloCommand(r); }, true}},
        {"ismaster", {[](C c, R r) { return c.helloCommand(r); }, true}},
        {"ping", {[](C c, R) -> A { co_return c.okReply(); }, true}},
        {"saslStart", {[](C c, R r) { return c.authCommand(r); }, true}},
        {"saslContinue", {[](C c, R r) { return c.authCommand(r); }, true}},
        {"authenticate", {[](C c, R r) { return c.authCommand(r); }, true}},
        {"logout", {[](C c, R r) { return c.authCommand(r); }, true}},
        {"connectionStatus", {[](C c, R r) { return c.authCommand(r); }, true}},
        // The proxy's own state and operations, as mongos answers for its own
        // (proxy_admin.cpp).
        {"_isSelf", {[](C c, R) -> A { co_return c.isSelf(); }}},
        {"haloclineStatus", {[](C c, R) -> A { co_return c.status(); }}},
        {"haloclinePauseFeeder", {[](C c, R r) { return c.pauseFeeder(r.first); }}},
        {"haloclineFlushFeeder", {[](C c, R r) { return c.flushFeeder(r.cmd); }}},
        {"haloclineExplain", {[](C c, R r) { return c.explainRouting(r.cmd, r.db); }}},
        {"currentOp", {[](C c, R r) { return c.currentOp(r.cmd, r.name); }}},
        {"killOp", {[](C c, R r) -> A { co_return c.killOp(r.cmd); }}},
        {"connPoolStats", {[](C c, R) -> A { co_return c.connPoolStats(); }}},
        {"explain", {[](C c, R r) { return c.explain(r.msg, r.cmd, r.db); }}},
        // Cursors (proxy_reads.cpp) and sessions (both tiers).
        {"getMore", {[](C c, R r) { return c.getMore(r.cmd); }}},
        {"killCursors", {[](C c, R r) { return c.killCursors(r.cmd); }}},
        {"endSessions", {[](C c, R r) { return c.bothTiers(r.msg, r.cmd); }}},
        {"killSessions", {[](C c, R r) { return c.killSessions(r); }}},
        {"killAllSessions", {[](C c, R r) { return c.killSessions(r); }}},
        {"killAllSessionsByPattern", {[](C c, R r) { return c.killSessions(r); }}},
        // Transactions end on the tier that runs them (proxy_transactions.cpp).
        {"commitTransaction", {[](C c, R r) { return c.endTransaction(r.msg, r.cmd); }}},
        {"abortTransaction", {[](C c, R r) { return c.endTransaction(r.msg, r.cmd); }}},
    };
    return table;
}

bson::Doc ClientConnection::okReply() {
    bson::Doc d;
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    appendClock(d.mut(), 0);
    return d;
}

asio::awaitable<bson::Doc> ClientConnection::helloCommand(const Request& r) {
    bson_t client;
    if (clientMetadata_.empty() && bson::subDocument(r.cmd, "client", &client))
        clientMetadata_ = bson::Doc::copyOf(&client);
    bson::Doc d = hello(r.cmd);
    co_await auth_.appendToHello(r.cmd, d.mut());
    co_return d;
}

asio::awaitable<bson::Doc> ClientConnection::authCommand(const Request& r) {
    const std::string& name = r.name;
    // Authentication happens here, never on a tier: forwarded, these would act on
    // a pooled tier connection that the proxy authenticated as itself.
    if (!auth_.enabled() && name != "connectionStatus")
        co_return errorDoc(
            Status(ErrorCode::CommandNotSupported,
                   fmt::format("halocline: {} is not supported: client authentication is "
                               "disabled at this proxy (security.authorization); connect "
                               "without credentials",
                               name)));
    if (name == "saslStart" || name == "saslContinue") {
        // (Not a conditional expression: GCC 12 miscompiles co_await inside ?:.)
        StatusWith<bson::Doc> sw = bson::Doc();
        if (name == "saslStart")
            sw = co_await auth_.saslStart(r.cmd, r.db);
        else
            sw = co_await auth_.saslContinue(r.cmd, r.db);
        if (!sw.isOK()) co_return errorDoc(sw.getStatus());
        BSON_APPEND_DOUBLE(sw.getValue().mut(), "ok", 1.0);
        co_return std::move(sw.getValue());
    }
    bson::Doc d;
    if (name == "authenticate") {
        Status s = co_await auth_.authenticate(r.cmd, r.db);
        if (!s.isOK()) co_return errorDoc(s);
        BSON_APPEND_UTF8(d.mut(), "dbname", "$external");
        BSON_APPEND_UTF8(d.mut(), "user",
                         auth_.principal().substr(0, auth_.principal().rfind('@')).c_str());
    } else if (name == "logout") {
        auth_.logout();
    } else {
        auth_.appendConnectionStatus(r.cmd, d.mut());
    }
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    co_return d;
}

asio::awaitable<bson::Doc> ClientConnection::dispatch(const wire::OpMsg& msg, const bson_t* cmd,
                                                      const std::string& db,
                                                      const std::optional<TxnKey>& txn) {
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
    const Request req{msg, cmd, db, name, first};
    auto named = commands().find(name);
    if (named != commands().end() && named->second.beforeAuth)
        co_return co_await named->second.run(*this, req);
    if (Status allowed = co_await auth_.check(name, db, cmd, msg.sequences); !allowed.isOK())
        co_return errorDoc(allowed);
    if (named != commands().end()) co_return co_await named->second.run(*this, req);
    if (name == "aggregate" && db == "admin" && firstStageIs(cmd, "$currentOp"))
        co_return co_await currentOp(cmd, name);

    // The namespace a collection command names.
    std::string ns;
    if (BSON_ITER_HOLDS_UTF8(&first)) ns = db + "." + bson_iter_utf8(&first, nullptr);
    const CollectionPolicy* policy = ns.empty() ? nullptr : p_.config().policyFor(ns);
    if (name == "aggregate") {
        // $out and $merge write in the archive: into a tiered collection that
        // would bypass the fast tier (which may hold newer versions, and which
        // the feeder's replay would then overwrite).
        std::string into = writeStageTarget(cmd, db);
        if (!into.empty() && p_.config().policyFor(into))
            co_return errorDoc(Status(
                ErrorCode::CommandNotSupported,
                fmt::format("halocline: an aggregate writing into the tiered collection {} is "
                            "not supported ($out and $merge would write its archive copy past "
                            "the fast tier); read the results and write them through the proxy",
                            into)));
    }
    if (txn) {
        auto r = co_await transactionStatement(*txn, msg, cmd, name, ns, policy);
        if (r) co_return std::move(*r);
    }
    if (name == "aggregate" && ns.empty() && firstStageIs(cmd, "$changeStream")) {
        // A database's or the cluster's stream: merged when it covers tiered collections.
        bson_t pipeline, stage, spec;
        bson_iter_t all;
        const bool cluster = db == "admin" && bson::subDocument(cmd, "pipeline", &pipeline) &&
                             bson::subDocument(&pipeline, "0", &stage) &&
                             bson::subDocument(&stage, "$changeStream", &spec) &&
                             bson_iter_init_find(&all, &spec, "allChangesForCluster") &&
                             bson_iter_as_bool(&all);
        std::vector<const CollectionPolicy*> scope;
        for (const auto& c : p_.config().collections)
            if (cluster || splitNs(c.ns).first == db) scope.push_back(&c);
        if (!scope.empty()) {
            Status ok = mergedStreamAllowed(scope, cluster ? "admin" : db);
            if (!ok.isOK()) co_return errorDoc(ok);
            co_return co_await mergedChangeStream(msg, cmd, scope);
        }
    }
    if ((name == "create" || name == "collMod") && !str(cmd, "viewOn").empty()) {
        // A view lives in the archive with the untiered collections; reads of a view
        // of a tiered collection would skip the fast tier's documents.
        std::string on = db + "." + str(cmd, "viewOn");
        if (p_.config().policyFor(on))
            co_return errorDoc(Status(ErrorCode::CommandNotSupported,
                                      fmt::format("halocline: a view on the tiered collection {} "
                                                  "is not supported (the archive would answer "
                                                  "its reads without the fast tier's documents)",
                                                  on)));
    }
    if (policy) {
        if (isReadCommand(name)) co_return co_await tieredRead(*policy, name, msg, cmd);
        if (isWriteCommand(name)) {
            GateHold writing = co_await p_.beginWrite(policy->ns);
            co_return co_await tieredWrite(*policy, name, msg, cmd);
        }
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
    // The explained command's collection is a namespace too (mongod refuses
    // invalid UTF-8 there; it would come back in the plan's namespace).
    if (Status named = bson::commandTargetUtf8(&inner, db); !named.isOK())
        co_return errorDoc(named);
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
    std::vector<GateHold> dropping;  // until the drop is done
    if (name == "drop" || name == "dropDatabase") {
        // The feeder must not replay into the dropped archive collection a
        // write from before the drop (a dropped document would come back, in
        // the archive and to the next insert's duplicate check): every write
        // acknowledged so far reaches the archive first.
        // (The name outside the co_await: GCC 12 miscompiles ?: in its operands.)
        std::string what = str(cmd, "$db");
        if (p) what = p->ns;
        // Writes of this proxy in flight finish first, and new ones wait: a
        // promotion that read the archive before the drop must not copy the
        // document into the fast tier after it.
        std::vector<std::string> dropped;
        if (p)
            dropped.push_back(p->ns);
        else
            for (const auto& c : p_.config().collections)
                if (splitNs(c.ns).first == what) dropped.push_back(c.ns);
        auto holds = co_await p_.beginDrop(dropped, p_.config().causalWaitTimeout,
                                           [this] { return slot_.killed(); });
        if (!holds.isOK()) co_return errorDoc(holds.getStatus());
        dropping = std::move(holds.getValue());
        Status w = co_await p_.awaitApplied(0, what, p_.config().causalWaitTimeout,
                                            [this] { return slot_.killed(); });
        if (!w.isOK()) co_return errorDoc(w);
    } else if (p) {
        // The archive gets a tiered collection from the feeder's first write to it
        // (when no create came through the proxy): a collMod or an index command
        // must not reach the archive before the writes acknowledged so far, or it
        // finds no collection there (26) although the client wrote to it.
        Status w = co_await p_.awaitApplied(0, p->ns, p_.config().causalWaitTimeout,
                                            [this] { return slot_.killed(); });
        if (!w.isOK()) co_return errorDoc(w);
    }
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

}  // namespace halo::tiering
