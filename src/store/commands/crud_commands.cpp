// Document commands: find, getMore, killCursors, insert, update, delete,
// findAndModify, count, distinct.
#include <fmt/format.h>

#include <chrono>

#include "bson/compare.h"
#include "store/aggregate/pipeline.h"
#include "store/aggregate/stage.h"
#include "store/aggregate/vector_source.h"
#include "store/commands/document_validation.h"
#include "store/commands/fail_command.h"
#include "store/commands/views.h"
#include "store/commands/write_path.h"
#include "store/exec/find_executor.h"
#include "store/exec/interrupt.h"
#include "store/query/collator.h"
#include "store/query/matcher.h"
#include "store/query/projection.h"
#include "store/query/sort.h"
#include "store/storage/record_store.h"
#include "store/update/update_driver.h"

namespace halo::store {
namespace {

int64_t nowMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string nsOf(const OperationContext& op) {
    validateDbName(op.db);
    return op.db + "." + cmdarg::collectionName(op);
}

/// The reply of the aggregate `cmd` (a read on a view, rewritten) run here.
bson::Doc runOnView(OperationContext& op, const bson::Doc& cmd) {
    return runCommandInternally(op, op.db, cmd.get());
}

bson::Doc subDocOrEmpty(const bson::Fields& cmd, std::string_view field, std::string_view cmdName) {
    bson_t sub;
    if (cmdarg::getDoc(cmd, field, &sub, cmdName)) return bson::Doc::copyOf(&sub);
    return bson::Doc();
}

/// The hint field (at `it`) as the planner takes it: a key pattern, or {$hint: name}.
bson::Doc hintAt(const bson_iter_t& it) {
    bson::Doc out;
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        BSON_APPEND_UTF8(out.mut(), "$hint", bson_iter_utf8(&it, nullptr));
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t sub;
        bson::subDocumentAt(it, &sub);
        out = bson::Doc::copyOf(&sub);
    }
    return out;
}

bson::Doc hintOf(const bson_t* cmd) {
    bson_iter_t it;
    return bson::find(cmd, "hint", &it) ? hintAt(it) : bson::Doc();
}

bson::Doc hintOf(const bson::Fields& cmd) {
    bson_iter_t it;
    return cmd.find("hint", &it) ? hintAt(it) : bson::Doc();
}

int64_t nonNegative(const bson::Fields& cmd, std::string_view field, std::string_view cmdName,
                    const char* what) {
    int64_t v = cmdarg::getInt(cmd, field, 0, cmdName);
    if (v < 0)
        uasserted(ErrorCode::Location51024,
                  fmt::format("BSON field '{}' value must be >= 0, actual value '{}'", field, v));
    (void)what;
    return v;
}

/// A command's `let` (mongod 5.0+: find, update, delete, findAndModify): its
/// variables, evaluated once per command, are bound into the $expr of the
/// command's filters as {$literal: value}.
class CommandLet {
  public:
    explicit CommandLet(const OperationContext& op) {
        bson_t let;
        if (!cmdarg::getDoc(op.args, "let", &let, op.name)) return;
        ctx_.emplace();
        ctx_->nowMillis = nowMillis();
        ctx_->bindNow();
        bson::Doc empty;
        bson_iter_t it;
        bson_iter_init(&it, &let);
        while (bson_iter_next(&it)) {
            auto e = query::Expression::parse(*bson_iter_value(&it), ctx_->parseOptions());
            ctx_->setVariable(bson_iter_key(&it), e->evaluate(empty.get(), &ctx_->variables()));
        }
    }
    /// The variables for an update pipeline; null without `let`.
    const aggregate::PipelineContext* context() const { return ctx_ ? &*ctx_ : nullptr; }
    /// `filter` with the variables bound; nullopt without `let` (use it as is).
    std::optional<bson::Doc> bind(const bson_t* filter) const {
        if (!ctx_) return std::nullopt;
        return aggregate::bindFilterVariables(filter, *ctx_);
    }

  private:
    std::optional<aggregate::PipelineContext> ctx_;
};
/// The collation an operation uses: the `collation` argument of `cmd` (a command
/// or one write statement; TypeMismatch when not an object), else the
/// collection's default. One rule for every command, as in mongod.
query::CollatorPtr collationFor(const bson::Fields& cmd, const CollectionEntry* coll,
                                std::string_view cmdName) {
    bson_t spec;
    bool have = cmdarg::getDoc(cmd, "collation", &spec, cmdName);
    return effectiveCollator(have ? &spec : nullptr, coll);
}

// ---------------------------------------------------------------- find

void runFind(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    cmdarg::checkFields(op, {"filter",       "sort",
                             "projection",   "hint",
                             "skip",         "limit",
                             "batchSize",    "singleBatch",
                             "comment",      "maxTimeMS",
                             "readConcern",  "max",
                             "min",          "returnKey",
                             "showRecordId", "tailable",
                             "oplogReplay",  "noCursorTimeout",
                             "awaitData",    "allowPartialResults",
                             "collation",    "allowDiskUse",
                             "let",          "readOnce",
                             "term"});
    if (findView(op.store, ns)) {
        bson::Doc r = runOnView(op, findAsAggregate(op, std::string(splitNs(ns).second)));
        bson_t cursor;
        if (bson::subDocument(r.get(), "cursor", &cursor))
            BSON_APPEND_DOCUMENT(reply, "cursor", &cursor);
        return;
    }
    op.store.counters().query++;
    FindSpec spec;
    spec.filter = subDocOrEmpty(op.args, "filter", "find");
    if (auto bound = CommandLet(op).bind(spec.filter.get())) spec.filter = std::move(*bound);
    spec.sort = subDocOrEmpty(op.args, "sort", "find");
    spec.projection = subDocOrEmpty(op.args, "projection", "find");
    spec.hint = hintOf(op.args);
    spec.skip = nonNegative(op.args, "skip", "find", "Skip");
    spec.limit = nonNegative(op.args, "limit", "find", "Limit");
    int64_t batchSize = nonNegative(op.args, "batchSize", "find", "BatchSize");
    bool hasBatchSize = op.args.has("batchSize");
    bool singleBatch = cmdarg::getBool(op.args, "singleBatch", false);
    if (spec.limit > 0 && (!hasBatchSize || batchSize > spec.limit)) {
        batchSize = spec.limit;
        hasBatchSize = true;
    }
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    spec.collator = collationFor(op.args, coll.get(), "find");
    auto exec = std::make_unique<FindExecutor>(coll, std::move(spec));
    if (!coll) {
        bson_t cursor, arr;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        bson_append_array_end(&cursor, &arr);
        BSON_APPEND_INT64(&cursor, "id", 0);
        BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
        bson_append_document_end(reply, &cursor);
        return;
    }
    if (hasBatchSize && batchSize == 0) {
        // batchSize 0: an empty first batch and a cursor.
        int64_t id = op.store.cursors().add(newCursor(op, ns, coll, std::move(exec)));
        bson_t cursor, arr;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        bson_append_array_end(&cursor, &arr);
        BSON_APPEND_INT64(&cursor, "id", id);
        BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
        bson_append_document_end(reply, &cursor);
        return;
    }
    replyWithCursor(op, ns, coll, std::move(exec), hasBatchSize ? batchSize : 0, singleBatch,
                    reply);
}

HALO_REGISTER_COMMAND(CommandSpec{{"find"}, runFind});

std::string sessionText(const std::string& idBytes) {
    if (idBytes.size() != 16) return "{ id: <" + std::to_string(idBytes.size()) + " bytes> }";
    std::string hex;
    for (size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
        hex += fmt::format("{:02x}", static_cast<uint8_t>(idBytes[i]));
    }
    return "{ id: UUID(\"" + hex + "\") }";
}

/// A getMore must come from the session and transaction that opened the cursor
/// (mongod's getMore checks, same codes and text).
Status sameSessionAsCursor(const bson::Fields& cmd, const ClientCursor& c) {
    std::string lsid = sessionIdBytes(cmd);
    std::optional<int64_t> txn = txnNumberOf(cmd);
    auto fail = [&](ErrorCode code, const std::string& what) {
        return Status(code, fmt::format("Cannot run getMore on cursor {}, {}", c.id, what));
    };
    if (!lsid.empty() && c.lsid.empty())
        return fail(ErrorCode::Location50736,
                    "which was not created in a session, in session " + sessionText(lsid));
    if (lsid.empty() && !c.lsid.empty())
        return fail(ErrorCode::Location50737,
                    "which was created in session " + sessionText(c.lsid) + ", without an lsid");
    if (lsid != c.lsid)
        return fail(ErrorCode::Location50738, "which was created in session " +
                                                  sessionText(c.lsid) + ", in session " +
                                                  sessionText(lsid));
    if (txn && !c.txnNumber)
        return fail(ErrorCode::Location50739,
                    fmt::format("which was not created in a transaction, in transaction {}", *txn));
    if (!txn && c.txnNumber)
        return fail(
            ErrorCode::Location50740,
            fmt::format("which was created in transaction {}, without a txnNumber", *c.txnNumber));
    if (txn && c.txnNumber && *txn != *c.txnNumber)
        return fail(ErrorCode::Location50741,
                    fmt::format("which was created in transaction {}, in transaction {}",
                                *c.txnNumber, *txn));
    return Status::OK();
}

/// Whether the connection's user is the one that opened the cursor (mongod's
/// isCoauthorizedWith: a cursor opened without a user belongs to no user).
bool isCursorOwner(const OperationContext& op, const authz::CursorAuth& auth) {
    const auto& user = op.client.user;
    if (!auth.owner) return !user;
    return user && user->user == auth.owner->first && user->db == auth.owner->second;
}

/// mongod's checkAuthForKillCursors: the owner, or killAnyCursor on the
/// cluster or on the cursor's namespace (its database for listCollections).
Status mayKillCursor(const OperationContext& op, const std::string& ns,
                     const authz::CursorAuth& auth) {
    using authz::ActionType;
    using authz::ResourcePattern;
    if (isCursorOwner(op, auth)) return Status::OK();
    if (op.client.user) {
        const authz::PrivilegeSet& held = *op.client.user->privileges;
        auto dot = ns.find('.');
        std::string db = ns.substr(0, dot);
        ResourcePattern target = ns.ends_with(".$cmd.listCollections")
                                     ? ResourcePattern::database(db)
                                     : ResourcePattern::forNamespace(ns);
        if (held.isAuthorized(ResourcePattern::cluster(), ActionType::killAnyCursor) ||
            held.isAuthorized(target, ActionType::killAnyCursor))
            return Status::OK();
    }
    return Status(ErrorCode::Unauthorized, fmt::format("not authorized to kill cursor on {}", ns));
}

/// The failGetMoreAfterCursorCheckout fail point: a getMore holding its cursor
/// fails with data.errorCode (InternalError without one); the cursor is gone.
void failGetMoreAfterCheckout(OperationContext& op, const std::string& ns) {
    FailPoint& fp = op.store.failPoints().failGetMoreAfterCursorCheckout;
    if (!fp.maybeOn()) return;
    FailPointTarget target = failPointTarget(nullptr, op.name, ns, op.client, op.cmd);
    auto data = fp.fire([&](const bson_t* d) { return failPointAppliesTo(d, target, "getMore"); });
    if (!data) return;
    bson_iter_t it;
    int code = static_cast<int>(ErrorCode::InternalError);
    if (bson::find(data->get(), "errorCode", &it) && bson::isNumber(bson_iter_type(&it)))
        code = static_cast<int>(bson_iter_as_int64(&it));
    uasserted(static_cast<ErrorCode>(code), "Hit the 'failGetMoreAfterCursorCheckout' failpoint");
}

void runGetMore(OperationContext& op, bson_t* reply) {
    op.store.counters().getmore++;
    bson_iter_t it = op.args.at(0);
    if (!BSON_ITER_HOLDS_INT64(&it))
        uasserted(
            ErrorCode::TypeMismatch,
            fmt::format("BSON field 'getMore.getMore' is the wrong type '{}', expected type 'long'",
                        bson::typeName(bson_iter_type(&it))));
    int64_t id = bson_iter_int64(&it);
    if (!op.args.find("collection", &it) || !BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'getMore.collection' is missing but a required field");
    std::string ns = op.db + "." + bson_iter_utf8(&it, nullptr);
    int64_t batchSize = nonNegative(op.args, "batchSize", "getMore", "BatchSize");
    bool inUse = false;
    auto cursor = op.store.cursors().checkout(id, &inUse);
    if (!cursor) {
        if (inUse)
            uasserted(ErrorCode::OperationFailed,
                      fmt::format("Cursor id {} is already in use", id));
        uasserted(ErrorCode::CursorNotFound, fmt::format("cursor id {} not found", id));
    }
    if (cursor->auth && op.access) {
        // Only the user that opened the cursor, still holding what opening it needed.
        Status s = Status::OK();
        if (!isCursorOwner(op, *cursor->auth))
            s = Status(ErrorCode::Unauthorized,
                       fmt::format("cursor id {} was not created by the authenticated user", id));
        else if (!op.client.user ||
                 !authz::isAuthorized(*op.client.user->privileges, cursor->auth->privileges))
            s = Status(ErrorCode::Unauthorized,
                       fmt::format("not authorized for getMore with cursor id {}", id));
        if (!s.isOK()) {
            op.store.cursors().checkin(std::move(cursor));
            throw DBException(s);
        }
    }
    if (cursor->ns != ns) {
        std::string cns = cursor->ns;
        op.store.cursors().checkin(std::move(cursor));
        uasserted(ErrorCode::Unauthorized, fmt::format("Requested getMore on namespace '{}', but "
                                                       "cursor belongs to a different namespace {}",
                                                       ns, cns));
    }
    Status same = sameSessionAsCursor(op.args, *cursor);
    if (!same.isOK()) {
        op.store.cursors().checkin(std::move(cursor));
        throw DBException(same);
    }
    // A snapshot read's cursor reads every batch at its cluster time (the
    // dispatcher reports it as cursor.atClusterTime).
    if (cursor->readAt) currentOperation().readAt = Timestamp::fromU64(*cursor->readAt);
    bool exhausted = false;
    bson_t cdoc;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cdoc);
    bool emptyBatch = false;
    op.changeStream = cursor->stream && cursor->stream->isChangeStream();
    try {
        checkForInterrupt();  // killed while waiting for data (killOp)
        failGetMoreAfterCheckout(op, ns);
        CollectionLock lk(op.store.catalog());
        if (cursor->coll) {
            auto now = op.store.catalog().lookup(cursor->coll->ns);
            if (!now || now->uri != cursor->coll->uri)
                uasserted(ErrorCode::QueryPlanKilled, "collection dropped");
        }
        uint64_t commitSeq = op.store.oplog().commitSeq();
        ReadScope rs(op.store);
        bson::Doc probe;  // freed also when the stream throws
        exhausted =
            fillBatch(rs.session(), *cursor->stream, probe.mut(), "nextBatch", batchSize, false);
        rs.done();
        bson_t arr;
        emptyBatch =
            bson::subDocument(probe.get(), "nextBatch", &arr) && bson_count_keys(&arr) == 0;
        if (emptyBatch && !exhausted && cursor->awaitData && op.deferral && !op.finalAttempt) {
            // Nothing yet: wait (without a thread) for a commit or maxTimeMS, then run again.
            int64_t maxTimeMS = cmdarg::getInt(op.args, "maxTimeMS", 1000, "getMore");
            op.deferral->requested = true;
            op.deferral->wakeOnOplogCommit = true;
            op.deferral->seenCommitSeq = commitSeq;
            op.deferral->cursorId = id;
            op.deferral->deadline =
                std::chrono::steady_clock::now() + std::chrono::milliseconds(maxTimeMS);
            bson_append_document_end(reply, &cdoc);
            op.store.cursors().checkin(std::move(cursor));
            return;
        }
        bson_concat(&cdoc, probe.get());
    } catch (...) {
        op.store.cursors().kill(id);
        op.store.cursors().checkin(std::move(cursor));
        throw;
    }
    int64_t outId = id;
    if (exhausted) {
        op.store.cursors().kill(id);
        op.store.cursors().checkin(std::move(cursor));
        outId = 0;
    } else {
        op.store.cursors().checkin(std::move(cursor));
    }
    BSON_APPEND_INT64(&cdoc, "id", outId);
    BSON_APPEND_UTF8(&cdoc, "ns", ns.c_str());
    bson_append_document_end(reply, &cdoc);
}

HALO_REGISTER_COMMAND(CommandSpec{{"getMore"}, runGetMore});

void runKillCursors(OperationContext& op, bson_t* reply) {
    nsOf(op);
    bson_iter_t it;
    if (!op.args.find("cursors", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'killCursors.cursors' is missing but a required field");
    bson_t killed, notFound, alive, unknown;
    std::vector<int64_t> ids, k, nf;
    bson_iter_t a;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        if (!BSON_ITER_HOLDS_INT64(&a))
            uasserted(ErrorCode::TypeMismatch,
                      "BSON field 'killCursors.cursors' elements must be longs");
        ids.push_back(bson_iter_int64(&a));
    }
    if (op.access) {
        // Every cursor is checked before any is killed (an unknown one is no
        // authorization matter: it is reported as not found).
        for (int64_t id : ids) {
            std::string ns;
            std::shared_ptr<const authz::CursorAuth> auth;
            if (!op.store.cursors().describe(id, &ns, &auth) || !auth) continue;
            Status s = mayKillCursor(op, ns, *auth);
            if (!s.isOK()) throw DBException(s);
        }
    }
    for (int64_t id : ids) (op.store.cursors().kill(id) ? k : nf).push_back(id);
    auto appendIds = [](bson_t* parent, const char* name, const std::vector<int64_t>& ids,
                        bson_t* arr) {
        BSON_APPEND_ARRAY_BEGIN(parent, name, arr);
        for (size_t i = 0; i < ids.size(); ++i) {
            std::string key = std::to_string(i);
            BSON_APPEND_INT64(arr, key.c_str(), ids[i]);
        }
        bson_append_array_end(parent, arr);
    };
    appendIds(reply, "cursorsKilled", k, &killed);
    appendIds(reply, "cursorsNotFound", nf, &notFound);
    appendIds(reply, "cursorsAlive", {}, &alive);
    appendIds(reply, "cursorsUnknown", {}, &unknown);
}

HALO_REGISTER_COMMAND(CommandSpec{{"killCursors"}, runKillCursors});

// ---------------------------------------------------------------- writes

WriteError writeErrorFrom(int32_t index, const DBException& e) {
    WriteError w{index, e.status(), nullptr};
    if (auto* withInfo = dynamic_cast<const ErrorWithInfo*>(&e)) w.info = withInfo->info();
    return w;
}

/// Adds a statement's error to the reply's writeErrors. An interruption, and a
/// write conflict (a TransientTransactionError) or a transaction too large for
/// the cache inside a multi-document transaction, fail the whole command
/// instead, as in mongod. Inside a transaction any other
/// error is reported as the batch's only write error (also when unordered) and
/// the transaction aborts after the reply. Returns whether the batch stops here.
/// Call from the catch block of `e`.
bool recordWriteError(std::vector<WriteError>& errors, int32_t index, const DBException& e) {
    CurrentOperation& cur = currentOperation();
    if (e.code() == ErrorCode::Interrupted) throw;  // rethrows `e`
    if (cur.txn && (e.code() == ErrorCode::WriteConflict ||
                    e.code() == ErrorCode::TransactionTooLargeForCache))
        throw;
    errors.push_back(writeErrorFrom(index, e));
    if (!cur.txn) return false;
    cur.abortTransactionAfterCommand = true;
    return true;
}

void appendWriteErrors(bson_t* reply, const std::vector<WriteError>& errors) {
    if (errors.empty()) return;
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, "writeErrors", &arr);
    for (size_t i = 0; i < errors.size(); ++i) {
        std::string key = std::to_string(i);
        bson_t e;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key.c_str(), &e);
        BSON_APPEND_INT32(&e, "index", errors[i].index);
        BSON_APPEND_INT32(&e, "code", errors[i].status.codeNumber());
        bson::appendMessage(&e, "errmsg", errors[i].status.reason());
        if (errors[i].info) bson_concat(&e, errors[i].info->get());
        bson_append_document_end(&arr, &e);
    }
    bson_append_array_end(reply, &arr);
}

/// The document to store: _id first (generated when absent), validated.
bson::Doc prepareInsert(const bson_t* doc) {
    if (doc->len > static_cast<uint32_t>(wire::kMaxBsonObjectSize))
        uasserted(ErrorCode::BSONObjectTooLarge,
                  fmt::format("object to insert too large. size in bytes: {}, max size: {}",
                              doc->len, wire::kMaxBsonObjectSize));
    bson_iter_t it;
    bson::Doc out;
    if (bson::find(doc, "_id", &it)) {
        bson_type_t t = bson_iter_type(&it);
        if (t == BSON_TYPE_ARRAY)
            uasserted(ErrorCode::InvalidIdField, "can't use an array for _id");
        if (t == BSON_TYPE_REGEX) uasserted(ErrorCode::InvalidIdField, "can't use a regex for _id");
        if (t == BSON_TYPE_UNDEFINED)
            uasserted(ErrorCode::InvalidIdField, "can't use a undefined for _id");
        uassertStatusOK(update::validateIdForInsert(it));
        bson::appendIter(out.mut(), "_id", it);
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, nullptr);
        BSON_APPEND_OID(out.mut(), "_id", &oid);
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "_id") continue;
        bson::appendIter(out.mut(), k, it);
    }
    return out;
}

void insertOne(Store& store, const std::string& ns, const bson_t* doc, int32_t stmtId) {
    auto coll = store.catalog().lookup(ns);
    HALO_INVARIANT(coll != nullptr);
    bson::Doc prepared = prepareInsert(doc);
    validateInsert(*coll, prepared.get());
    runWriteTxn(store, [&](Session& s, Oplog::Unit& log) {
        rs::insert(s, *coll, prepared.get());
        logInsert(log, *coll, prepared.get());
        bson::Doc outcome;
        BSON_APPEND_INT32(outcome.mut(), "n", 1);
        recordOutcome(store, s, stmtId, outcome.get());
    });
    coll->numRecords++;
    coll->dataSize += prepared.size();
}

}  // namespace

void insertBatch(Store& store, const std::string& ns, const std::vector<bson::Doc>& docs) {
    CollectionLock lk(store.catalog());  // the collection stays while its table is written
    auto coll = store.catalog().lookup(ns);
    if (!coll)
        uasserted(ErrorCode::NamespaceNotFound, fmt::format("collection {} was dropped", ns));
    std::vector<bson::Doc> prepared;
    prepared.reserve(docs.size());
    int64_t bytes = 0;
    for (const auto& d : docs) {
        prepared.push_back(prepareInsert(d.get()));
        validateInsert(*coll, prepared.back().get());
        bytes += prepared.back().size();
    }
    runWriteTxn(store, [&](Session& s, Oplog::Unit& log) {
        for (const auto& d : prepared) {
            rs::insert(s, *coll, d.get());
            logInsert(log, *coll, d.get());
        }
    });
    store.counters().insert += static_cast<int64_t>(prepared.size());
    coll->numRecords += static_cast<int64_t>(prepared.size());
    coll->dataSize += bytes;
}

namespace {

void runInsert(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    refuseView(op.store, ns);
    cmdarg::checkFields(
        op, {"documents", "ordered", "bypassDocumentValidation", "comment", "writeConcern"});
    bson_iter_t it;
    if (!op.args.find("documents", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'insert.documents' is missing but a required field");
    bool ordered = cmdarg::getBool(op.args, "ordered", true);
    BypassDocumentValidation bypass(cmdarg::getBool(op.args, "bypassDocumentValidation", false));
    uint32_t count = 0;
    {
        bson_t docs;
        op.args.subDocument("documents", &docs);
        count = bson_count_keys(&docs);
    }
    if (count == 0 || count > static_cast<uint32_t>(wire::kMaxWriteBatchSize))
        uasserted(ErrorCode::InvalidLength,
                  fmt::format("Write batch sizes must be between 1 and {}. Got {} operations.",
                              wire::kMaxWriteBatchSize, count));
    ensureCollection(op.store, ns);
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    if (!coll) uasserted(ErrorCode::NamespaceNotFound, "collection dropped during insert");
    WriteProgress local;
    WriteProgress& p = WriteProgress::of(op, local);
    int32_t index = 0;
    bson_iter_t a;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        checkForInterrupt();  // fails the command, not one statement
        int32_t i = index++;
        if (!p.runs(i)) continue;
        if (!BSON_ITER_HOLDS_DOCUMENT(&a)) {
            p.errors.push_back(
                {i, Status(ErrorCode::TypeMismatch, "documents must be objects"), nullptr});
            if (ordered) break;
            p.next = i + 1;
            continue;
        }
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&a, &len, &data);
        bson::View doc(data, len);
        try {
            op.store.counters().insert++;
            if (!priorOutcome(op.store, i)) insertOne(op.store, ns, doc.get(), i);
            ++p.n;
        } catch (const DBException& e) {
            if (recordWriteError(p.errors, i, e) || ordered) break;
        }
        p.next = i + 1;
    }
    BSON_APPEND_INT32(reply, "n", static_cast<int32_t>(p.n));
    appendWriteErrors(reply, p.errors);
}

HALO_REGISTER_COMMAND(CommandSpec{
    .names = {"insert"}, .run = runInsert, .yieldsOnWriteConflict = true});

/// One update statement's transformation: operator/replacement updates via the
/// UpdateDriver, or an aggregation pipeline ($set/$unset/$project/$replaceRoot...).
class DocUpdater {
  public:
    DocUpdater(Store& store, const std::string& ns, const bson_t* u, bool pipeline,
               const bson_t* arrayFilters, query::CollatorPtr collator,
               const aggregate::PipelineContext* let = nullptr)
        : store_(store), ns_(ns), collator_(std::move(collator)), let_(let) {
        if (!pipeline) {
            driver_ = uassertStatusOK(update::UpdateDriver::parse(u, arrayFilters, collator_));
            return;
        }
        if (arrayFilters)
            uasserted(ErrorCode::FailedToParse,
                      "arrayFilters may not be specified for pipeline-style updates");
        bson_iter_t it;
        bson_iter_init(&it, u);
        while (bson_iter_next(&it)) {
            bson_iter_t st;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                uasserted(ErrorCode::TypeMismatch,
                          "Each element of the 'pipeline' array must be an object");
            bson_iter_recurse(&it, &st);
            if (!bson_iter_next(&st))
                uasserted(ErrorCode::Location40323,
                          "A pipeline stage specification object must contain exactly one field.");
            std::string_view name = bson_iter_key(&st);
            if (name != "$addFields" && name != "$set" && name != "$project" && name != "$unset" &&
                name != "$replaceRoot" && name != "$replaceWith")
                uasserted(ErrorCode::InvalidOptions,
                          fmt::format("{} is not allowed to be used within an update", name));
        }
        pipeline_ = bson::Doc::copyOf(u);
    }
    bool needsPositional() const { return driver_ && driver_->needsPositional(); }
    bool isReplacement() const { return driver_ && driver_->isReplacement(); }

    update::UpdateResult apply(Session& s, const bson_t* oldDoc,
                               const update::ApplyOptions& ao) const {
        if (driver_) return driver_->apply(oldDoc, ao);
        return runPipeline(s, bson::Doc::copyOf(oldDoc), true);
    }
    update::UpdateResult applyUpsert(Session& s, const bson_t* query,
                                     const update::ApplyOptions& ao) const {
        if (driver_) return driver_->applyUpsert(query, ao);
        return runPipeline(s, update::seedUpsertDocument(query), false);
    }

  private:
    update::UpdateResult runPipeline(Session& s, bson::Doc input, bool keepId) const {
        aggregate::PipelineContext ctx;
        ctx.catalog = &store_.catalog();
        ctx.db = splitNs(ns_).first;
        ctx.ns = ns_;
        ctx.nowMillis = nowMillis();
        ctx.collator = collator_;
        if (let_)  // the command's `let` variables
            for (const auto& name : let_->variableNames())
                if (const query::Value* v = let_->variables().get(name)) ctx.setVariable(name, *v);
        std::vector<bson::Doc> docs;
        docs.push_back(input.copy());
        auto p = aggregate::buildPipeline(
            std::make_unique<aggregate::VectorSource>(std::move(docs)), pipeline_.get(), ctx);
        auto out = p->next(s);
        if (!out) uasserted(ErrorCode::InternalError, "update pipeline produced no document");
        bson_iter_t oldId, newId;
        bool hadId = bson::find(input.get(), "_id", &oldId);
        bool hasId = bson::find(out->get(), "_id", &newId);
        if (keepId && hadId && hasId &&
            bson::compareValues(*bson_iter_value(&oldId), *bson_iter_value(&newId)) != 0)
            uasserted(ErrorCode::ImmutableField,
                      fmt::format("After applying the update, the (immutable) field '_id' was "
                                  "found to have been altered to _id: {}",
                                  bson::valueToString(*bson_iter_value(&newId))));
        // _id first, restored from the input when the pipeline dropped it.
        bson::Doc shaped;
        if (hasId)
            bson::appendIter(shaped.mut(), "_id", newId);
        else if (hadId)
            bson::appendIter(shaped.mut(), "_id", oldId);
        bson_iter_t it;
        bson_iter_init(&it, out->get());
        while (bson_iter_next(&it))
            if (std::string_view(bson_iter_key(&it)) != "_id")
                bson::appendIter(shaped.mut(), bson_iter_key(&it), it);
        update::UpdateResult r;
        r.modified = shaped.size() != input.size() ||
                     std::memcmp(shaped.data(), input.data(), input.size()) != 0;
        r.newDoc = std::move(shaped);
        return r;
    }

    Store& store_;
    std::string ns_;
    query::CollatorPtr collator_;
    std::unique_ptr<update::UpdateDriver> driver_;
    bson::Doc pipeline_;
    const aggregate::PipelineContext* let_;
};

struct UpdateOutcome {
    int64_t n = 0;
    int64_t nModified = 0;
    std::optional<bson::Doc> upsertedId;     // {_id: value}
    std::optional<bson::Doc> before, after;  // for findAndModify
    /// Adds another batch's counts (a multi-document update: no ids, no documents).
    UpdateOutcome& operator+=(const UpdateOutcome& o) {
        n += o.n;
        nModified += o.nModified;
        return *this;
    }
};

/// mongod's multi-document update and delete outside a transaction: the
/// matching records are found in one snapshot, then written kBatch at a time,
/// each batch in its own storage transaction, so that none grows with the
/// collection (one larger than the cache could never commit: WiredTiger rolls it
/// back, again and again). Each document is read and matched again where it is
/// written; one that changed meanwhile and no longer matches is left out, and
/// none is written twice. `writeOne(s, log, rid, doc, counts)` writes one.
/// Not for a retryable write: its outcome is recorded with its one transaction.
template <typename Counts, typename WriteOne>
Counts writeMatchesInBatches(Store& store, const std::shared_ptr<const CollectionEntry>& coll,
                             const bson_t* q, const bson_t* hint,
                             const query::CollatorPtr& collator,
                             const std::shared_ptr<const query::Matcher>& matcher,
                             WriteOne&& writeOne) {
    constexpr size_t kBatch = 100;
    std::vector<int64_t> rids;
    {
        ReadScope read(store);
        ScanStage scan(coll, planQuery(*coll, q, nullptr, hint, collator.get()), matcher);
        int64_t rid;
        while (scan.next(read.session(), &rid)) rids.push_back(rid);
        read.done();
    }
    Counts total{};
    for (size_t first = 0; first < rids.size(); first += kBatch) {
        if (first > 0) checkForInterrupt();
        const size_t end = std::min(rids.size(), first + kBatch);
        total += runWriteTxn(store, [&](Session& s, Oplog::Unit& log) {
            Counts batch{};  // afresh on a retry after a conflict
            for (size_t i = first; i < end; ++i) {
                auto doc = rs::fetch(s, *coll, rids[i]);
                if (doc && matcher->matches(doc->get())) writeOne(s, log, rids[i], *doc, batch);
            }
            return batch;
        });
    }
    return total;
}

bool batchesMultiWrite() {
    const CurrentOperation& cur = currentOperation();
    return !cur.txn && !cur.retryable;
}

/// Applies one update statement. `sort` picks the first document (findAndModify).
bson::Doc outcomeDoc(const UpdateOutcome& o) {
    bson::Doc d;
    BSON_APPEND_INT64(d.mut(), "n", o.n);
    BSON_APPEND_INT64(d.mut(), "nModified", o.nModified);
    if (o.upsertedId) BSON_APPEND_DOCUMENT(d.mut(), "upserted", o.upsertedId->get());
    if (o.before) BSON_APPEND_DOCUMENT(d.mut(), "before", o.before->get());
    if (o.after) BSON_APPEND_DOCUMENT(d.mut(), "after", o.after->get());
    return d;
}

UpdateOutcome outcomeFromDoc(const bson_t* d) {
    UpdateOutcome o;
    bson_iter_t it;
    if (bson::find(d, "n", &it)) o.n = bson_iter_as_int64(&it);
    if (bson::find(d, "nModified", &it)) o.nModified = bson_iter_as_int64(&it);
    bson_t sub;
    if (bson::subDocument(d, "upserted", &sub)) o.upsertedId = bson::Doc::copyOf(&sub);
    if (bson::subDocument(d, "before", &sub)) o.before = bson::Doc::copyOf(&sub);
    if (bson::subDocument(d, "after", &sub)) o.after = bson::Doc::copyOf(&sub);
    return o;
}

UpdateOutcome updateDocs(Store& store, const std::string& ns, const bson_t* q, const bson_t* u,
                         bool pipelineUpdate, const bson_t* arrayFilters, bool multi, bool upsert,
                         const bson_t* sort, const bson_t* hint, const bson_t* collation,
                         bool wantDocs, int32_t stmtId,
                         const aggregate::PipelineContext* let = nullptr) {
    if (auto prior = priorOutcome(store, stmtId)) return outcomeFromDoc(prior->get());
    query::CollatorPtr collator = effectiveCollator(collation, store.catalog().lookup(ns).get());
    auto driver =
        std::make_unique<DocUpdater>(store, ns, u, pipelineUpdate, arrayFilters, collator, let);
    query::MatcherParseOptions mo;
    mo.collator = collator;
    auto matcher =
        std::shared_ptr<const query::Matcher>(uassertStatusOK(query::Matcher::parse(q, mo)));
    auto applyTo = [&](Session& s, Oplog::Unit& log, const CollectionEntry& coll, int64_t rid,
                       bson::Doc& doc, UpdateOutcome& out) {
        ++out.n;
        update::ApplyOptions ao;
        ao.nowMillis = nowMillis();
        query::MatchDetails details;
        if (driver->needsPositional()) {
            matcher->matches(doc.get(), &details);
            ao.positionalIndex = details.elemMatchKey;
        }
        update::UpdateResult r = driver->apply(s, doc.get(), ao);
        if (wantDocs) out.before = doc.copy();
        if (r.modified) {
            validateUpdate(coll, doc.get(), r.newDoc.get());
            rs::update(s, coll, rid, doc.get(), r.newDoc.get());
            logUpdate(log, coll, doc.get(), r.newDoc.get(), driver->isReplacement());
            coll.dataSize +=
                static_cast<int64_t>(r.newDoc.size()) - static_cast<int64_t>(doc.size());
            ++out.nModified;
        }
        if (wantDocs) out.after = std::move(r.newDoc);
    };
    if (multi && !upsert && !wantDocs && batchesMultiWrite()) {
        auto coll = store.catalog().lookup(ns);
        if (!coll) return UpdateOutcome{};
        return writeMatchesInBatches<UpdateOutcome>(
            store, coll, q, hint, collator, matcher,
            [&](Session& s, Oplog::Unit& log, int64_t rid, bson::Doc& doc, UpdateOutcome& out) {
                applyTo(s, log, *coll, rid, doc, out);
            });
    }
    UpdateOutcome out;
    Catalog& catalog = store.catalog();
    return runWriteTxn(store, [&](Session& s, Oplog::Unit& log) {
        out = UpdateOutcome{};
        auto coll = catalog.lookup(ns);
        if (coll) {
            FindSpec spec;
            spec.filter = bson::Doc::copyOf(q);
            if (sort) spec.sort = bson::Doc::copyOf(sort);
            if (hint) spec.hint = bson::Doc::copyOf(hint);
            if (!multi) spec.limit = 1;
            spec.collator = collator;
            std::vector<std::pair<int64_t, bson::Doc>> targets;
            if (sort && bson_count_keys(sort) > 0) {
                FindExecutor exec(coll, std::move(spec));
                // Sorting loses record ids; re-find by _id.
                auto d = exec.next(s);
                if (d) {
                    bson_iter_t idIt;
                    if (bson::find(d->get(), "_id", &idIt)) {
                        auto rid = rs::findById(s, *coll, *bson_iter_value(&idIt));
                        if (rid) targets.emplace_back(*rid, std::move(*d));
                    }
                }
            } else {
                QueryPlan plan = planQuery(*coll, q, nullptr, hint, collator.get());
                ScanStage scan(coll, std::move(plan), matcher);
                int64_t rid;
                while (auto d = scan.next(s, &rid)) {
                    targets.emplace_back(rid, std::move(*d));
                    if (!multi) break;
                }
            }
            for (auto& [rid, doc] : targets) applyTo(s, log, *coll, rid, doc, out);
        }
        if (out.n == 0 && upsert) {
            if (!coll) uasserted(ErrorCode::NamespaceNotFound, "collection vanished");
            update::ApplyOptions ao;
            ao.nowMillis = nowMillis();
            ao.isUpsertInsert = true;
            update::UpdateResult r = driver->applyUpsert(s, q, ao);
            bson::Doc prepared = prepareInsert(r.newDoc.get());
            validateInsert(*coll, prepared.get());
            rs::insert(s, *coll, prepared.get());
            logInsert(log, *coll, prepared.get());
            coll->numRecords++;
            coll->dataSize += prepared.size();
            bson_iter_t idIt;
            bson::find(prepared.get(), "_id", &idIt);
            bson::Doc idDoc;
            bson::appendIter(idDoc.mut(), "_id", idIt);
            out.upsertedId = std::move(idDoc);
            if (wantDocs) out.after = std::move(prepared);
        }
        recordOutcome(store, s, stmtId, outcomeDoc(out).get());
        return std::move(out);
    });
}

/// mongod parses a whole write command before running any statement: a field
/// its IDL does not know in any statement fails the command (40415) and nothing
/// is written. `known` are the statement fields of mongod 7.0 (write_ops.idl).
void checkStatementFields(const OperationContext& op, const char* arrayField,
                          std::initializer_list<std::string_view> known) {
    bson_iter_t it, a;
    if (!op.args.find(arrayField, &it) || !BSON_ITER_HOLDS_ARRAY(&it)) return;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        bson_iter_t f;
        if (!BSON_ITER_HOLDS_DOCUMENT(&a) || !bson_iter_recurse(&a, &f)) continue;
        while (bson_iter_next(&f)) {
            std::string_view k = bson_iter_key(&f);
            if (std::find(known.begin(), known.end(), k) == known.end())
                uasserted(ErrorCode::Location40415,
                          fmt::format("BSON field '{}.{}.{}' is an unknown field.", op.name,
                                      arrayField, k));
        }
    }
}

void runUpdate(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    refuseView(op.store, ns);
    cmdarg::checkFields(
        op, {"updates", "ordered", "bypassDocumentValidation", "comment", "writeConcern", "let"});
    bson_iter_t it;
    if (!op.args.find("updates", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'update.updates' is missing but a required field");
    // 7.0 has no `sort` here (8.0 added it): refused, not ignored.
    checkStatementFields(op, "updates",
                         {"q", "u", "c", "arrayFilters", "multi", "upsert", "upsertSupplied",
                          "collation", "hint", "sampleId"});
    bool ordered = cmdarg::getBool(op.args, "ordered", true);
    BypassDocumentValidation bypass(cmdarg::getBool(op.args, "bypassDocumentValidation", false));
    WriteProgress local;
    WriteProgress& p = WriteProgress::of(op, local);
    int32_t index = 0;
    CommandLet let(op);
    bson_iter_t a;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        checkForInterrupt();  // fails the command, not one statement
        int32_t i = index++;
        if (!p.runs(i)) continue;
        try {
            if (!BSON_ITER_HOLDS_DOCUMENT(&a))
                uasserted(ErrorCode::TypeMismatch, "updates must be objects");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View stmt(data, len);
            bson_t q, u, af;
            bson_iter_t f;
            if (!bson::subDocument(stmt.get(), "q", &q))
                uasserted(ErrorCode::Location40414,
                          "BSON field 'update.updates.q' is missing but a required field");
            if (!bson::find(stmt.get(), "u", &f))
                uasserted(ErrorCode::Location40414,
                          "BSON field 'update.updates.u' is missing but a required field");
            bool pipelineUpdate = BSON_ITER_HOLDS_ARRAY(&f);
            if (!BSON_ITER_HOLDS_DOCUMENT(&f) && !pipelineUpdate)
                uasserted(ErrorCode::FailedToParse,
                          "Update argument must be either an object or an array");
            bson::subDocument(stmt.get(), "u", &u);
            bool haveAf = bson::find(stmt.get(), "arrayFilters", &f) && BSON_ITER_HOLDS_ARRAY(&f) &&
                          bson::subDocument(stmt.get(), "arrayFilters", &af);
            bool multi = cmdarg::getBool(stmt.get(), "multi", false);
            bool upsert = cmdarg::getBool(stmt.get(), "upsert", false);
            bson::Doc hint = hintOf(stmt.get());
            bson_t coll;
            bool haveColl = cmdarg::getDoc(stmt.get(), "collation", &coll, "update.updates");
            op.store.counters().update++;
            if (upsert) ensureCollection(op.store, ns);
            CollectionLock lk(op.store.catalog());
            std::optional<bson::Doc> boundQ = let.bind(&q);
            auto o = updateDocs(op.store, ns, boundQ ? boundQ->get() : &q, &u, pipelineUpdate,
                                haveAf ? &af : nullptr, multi, upsert, nullptr,
                                hint.empty() ? nullptr : hint.get(), haveColl ? &coll : nullptr,
                                false, i, let.context());
            p.n += o.n;
            p.nModified += o.nModified;
            if (o.upsertedId) {
                ++p.n;
                bson_t e;
                std::string key = std::to_string(p.upserts++);
                if (!p.upserted) p.upserted.emplace();
                BSON_APPEND_DOCUMENT_BEGIN(p.upserted->mut(), key.c_str(), &e);
                BSON_APPEND_INT32(&e, "index", i);
                bson_iter_t idIt;
                bson::find(o.upsertedId->get(), "_id", &idIt);
                bson::appendIter(&e, "_id", idIt);
                bson_append_document_end(p.upserted->mut(), &e);
            }
        } catch (const DBException& e) {
            if (recordWriteError(p.errors, i, e) || ordered) break;
        }
        p.next = i + 1;
    }
    BSON_APPEND_INT32(reply, "n", static_cast<int32_t>(p.n));
    BSON_APPEND_INT32(reply, "nModified", static_cast<int32_t>(p.nModified));
    if (p.upserted) bson_append_array(reply, "upserted", -1, p.upserted->get());
    appendWriteErrors(reply, p.errors);
}

HALO_REGISTER_COMMAND(CommandSpec{
    .names = {"update"}, .run = runUpdate, .yieldsOnWriteConflict = true});

/// Deletes matching documents (limit 1 stops at the first); returns the count.
int64_t deleteDocs(Store& store, const std::string& ns, const bson_t* q, bool justOne,
                   const bson_t* sort, const bson_t* hint, const bson_t* collation,
                   std::optional<bson::Doc>* removed, int32_t stmtId) {
    if (auto prior = priorOutcome(store, stmtId)) {
        bson_iter_t it;
        bson_t doc;
        if (removed && bson::subDocument(prior->get(), "removed", &doc))
            *removed = bson::Doc::copyOf(&doc);
        return bson::find(prior->get(), "n", &it) ? bson_iter_as_int64(&it) : 0;
    }
    Catalog& catalog = store.catalog();
    query::CollatorPtr collator = effectiveCollator(collation, catalog.lookup(ns).get());
    query::MatcherParseOptions mo;
    mo.collator = collator;
    auto matcher =
        std::shared_ptr<const query::Matcher>(uassertStatusOK(query::Matcher::parse(q, mo)));
    auto removeOne = [&](Session& s, Oplog::Unit& log, const CollectionEntry& coll, int64_t rid,
                         const bson::Doc& doc) {
        rs::remove(s, coll, rid, doc.get());
        logDelete(log, coll, doc.get());
        coll.numRecords--;
        coll.dataSize -= doc.size();
    };
    if (!justOne && !removed && batchesMultiWrite()) {
        auto coll = catalog.lookup(ns);
        if (!coll) return 0;
        return writeMatchesInBatches<int64_t>(
            store, coll, q, hint, collator, matcher,
            [&](Session& s, Oplog::Unit& log, int64_t rid, const bson::Doc& doc, int64_t& n) {
                removeOne(s, log, *coll, rid, doc);
                ++n;
            });
    }
    return runWriteTxn(store, [&](Session& s, Oplog::Unit& log) -> int64_t {
        auto coll = catalog.lookup(ns);
        if (!coll) return 0;
        std::vector<std::pair<int64_t, bson::Doc>> targets;
        if (sort && bson_count_keys(sort) > 0) {
            FindSpec spec;
            spec.filter = bson::Doc::copyOf(q);
            spec.sort = bson::Doc::copyOf(sort);
            spec.limit = 1;
            spec.collator = collator;
            FindExecutor exec(coll, std::move(spec));
            if (auto d = exec.next(s)) {
                bson_iter_t idIt;
                if (bson::find(d->get(), "_id", &idIt))
                    if (auto rid = rs::findById(s, *coll, *bson_iter_value(&idIt)))
                        targets.emplace_back(*rid, std::move(*d));
            }
        } else {
            ScanStage scan(coll, planQuery(*coll, q, nullptr, hint, collator.get()), matcher);
            int64_t rid;
            while (auto d = scan.next(s, &rid)) {
                targets.emplace_back(rid, std::move(*d));
                if (justOne) break;
            }
        }
        for (auto& [rid, doc] : targets) removeOne(s, log, *coll, rid, doc);
        bson::Doc outcome;
        BSON_APPEND_INT64(outcome.mut(), "n", static_cast<int64_t>(targets.size()));
        if (removed && !targets.empty())
            BSON_APPEND_DOCUMENT(outcome.mut(), "removed", targets.front().second.get());
        recordOutcome(store, s, stmtId, outcome.get());
        if (removed && !targets.empty()) *removed = std::move(targets.front().second);
        return static_cast<int64_t>(targets.size());
    });
}

void runDelete(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    refuseView(op.store, ns);
    cmdarg::checkFields(op, {"deletes", "ordered", "comment", "writeConcern", "let"});
    bson_iter_t it;
    if (!op.args.find("deletes", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'delete.deletes' is missing but a required field");
    checkStatementFields(op, "deletes", {"q", "limit", "collation", "hint", "sampleId"});
    bool ordered = cmdarg::getBool(op.args, "ordered", true);
    WriteProgress local;
    WriteProgress& p = WriteProgress::of(op, local);
    int32_t index = 0;
    CommandLet let(op);
    bson_iter_t a;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        checkForInterrupt();  // fails the command, not one statement
        int32_t i = index++;
        if (!p.runs(i)) continue;
        try {
            if (!BSON_ITER_HOLDS_DOCUMENT(&a))
                uasserted(ErrorCode::TypeMismatch, "deletes must be objects");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View stmt(data, len);
            bson_t q;
            if (!bson::subDocument(stmt.get(), "q", &q))
                uasserted(ErrorCode::Location40414,
                          "BSON field 'delete.deletes.q' is missing but a required field");
            bson_iter_t f;
            if (!bson::find(stmt.get(), "limit", &f))
                uasserted(ErrorCode::Location40414,
                          "BSON field 'delete.deletes.limit' is missing but a required field");
            int64_t limit = cmdarg::getInt(stmt.get(), "limit", 0, "delete.deletes");
            if (limit != 0 && limit != 1)
                uasserted(ErrorCode::FailedToParse,
                          "The limit field in delete objects must be 0 or 1. Got " +
                              std::to_string(limit));
            bson::Doc hint = hintOf(stmt.get());
            bson_t coll;
            bool haveColl = cmdarg::getDoc(stmt.get(), "collation", &coll, "delete.deletes");
            op.store.counters().del++;
            CollectionLock lk(op.store.catalog());
            std::optional<bson::Doc> boundQ = let.bind(&q);
            p.n += deleteDocs(op.store, ns, boundQ ? boundQ->get() : &q, limit == 1, nullptr,
                              hint.empty() ? nullptr : hint.get(), haveColl ? &coll : nullptr,
                              nullptr, i);
        } catch (const DBException& e) {
            if (recordWriteError(p.errors, i, e) || ordered) break;
        }
        p.next = i + 1;
    }
    BSON_APPEND_INT32(reply, "n", static_cast<int32_t>(p.n));
    appendWriteErrors(reply, p.errors);
}

HALO_REGISTER_COMMAND(CommandSpec{
    .names = {"delete"}, .run = runDelete, .yieldsOnWriteConflict = true});

void runFindAndModify(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    refuseView(op.store, ns);
    bson_t q = BSON_INITIALIZER, sort, update, fields, af;
    bson::Doc empty;
    bson_t qv;
    const bson_t* query =
        cmdarg::getDoc(op.args, "query", &qv, "findAndModify") ? &qv : empty.get();
    CommandLet let(op);
    std::optional<bson::Doc> boundQuery = let.bind(query);
    if (boundQuery) query = boundQuery->get();
    bool haveSort = cmdarg::getDoc(op.args, "sort", &sort, "findAndModify");
    bool remove = cmdarg::getBool(op.args, "remove", false);
    bool returnNew = cmdarg::getBool(op.args, "new", false);
    bool upsert = cmdarg::getBool(op.args, "upsert", false);
    BypassDocumentValidation bypass(cmdarg::getBool(op.args, "bypassDocumentValidation", false));
    bool haveFields = cmdarg::getDoc(op.args, "fields", &fields, "findAndModify");
    bson_iter_t it;
    bool haveUpdate = op.args.find("update", &it);
    bool pipelineUpdate = haveUpdate && BSON_ITER_HOLDS_ARRAY(&it);
    if (haveUpdate && !BSON_ITER_HOLDS_DOCUMENT(&it) && !pipelineUpdate)
        uasserted(ErrorCode::FailedToParse, "Update argument must be either an object or an array");
    if (haveUpdate) op.args.subDocument("update", &update);
    bool haveAf = op.args.find("arrayFilters", &it) && op.args.subDocument("arrayFilters", &af);
    if (remove && haveUpdate)
        uasserted(ErrorCode::FailedToParse, "Cannot specify both an update and remove=true");
    if (!remove && !haveUpdate)
        uasserted(ErrorCode::FailedToParse, "Either an update or remove=true must be specified");
    if (remove && upsert)
        uasserted(ErrorCode::FailedToParse, "Cannot specify both upsert=true and remove=true ");
    if (remove && returnNew)
        uasserted(ErrorCode::FailedToParse,
                  "Cannot specify both new=true and remove=true; 'remove' always returns the "
                  "deleted document");
    bson::Doc hint = hintOf(op.args);
    bson_t collSpec;
    bool haveColl = cmdarg::getDoc(op.args, "collation", &collSpec, "findAndModify");
    const bson_t* collation = haveColl ? &collSpec : nullptr;
    std::optional<bson::Doc> value;
    bson_t leo;
    std::unique_ptr<query::Projection> proj;
    if (haveFields && bson_count_keys(&fields) > 0)
        proj = std::make_unique<query::Projection>(
            uassertStatusOK(query::Projection::parse(&fields, nullptr)));
    if (remove) {
        op.store.counters().del++;
        CollectionLock lk(op.store.catalog());
        int64_t n = deleteDocs(op.store, ns, query, true, haveSort ? &sort : nullptr,
                               hint.empty() ? nullptr : hint.get(), collation, &value, 0);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &leo);
        BSON_APPEND_INT32(&leo, "n", static_cast<int32_t>(n));
        bson_append_document_end(reply, &leo);
    } else {
        op.store.counters().update++;
        if (upsert) ensureCollection(op.store, ns);
        CollectionLock lk(op.store.catalog());
        auto o = updateDocs(op.store, ns, query, &update, pipelineUpdate, haveAf ? &af : nullptr,
                            false, upsert, haveSort ? &sort : nullptr,
                            hint.empty() ? nullptr : hint.get(), collation, true, 0, let.context());
        BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &leo);
        BSON_APPEND_INT32(&leo, "n", static_cast<int32_t>(o.n + (o.upsertedId ? 1 : 0)));
        BSON_APPEND_BOOL(&leo, "updatedExisting", o.n > 0);
        if (o.upsertedId) {
            bson_iter_t idIt;
            bson::find(o.upsertedId->get(), "_id", &idIt);
            bson::appendIter(&leo, "upserted", idIt);
        }
        bson_append_document_end(reply, &leo);
        if (returnNew)
            value = std::move(o.after);
        else if (o.n > 0)
            value = std::move(o.before);
    }
    if (value) {
        if (proj) {
            bson::Doc shaped = proj->apply(value->get(), nullptr);
            BSON_APPEND_DOCUMENT(reply, "value", shaped.get());
        } else {
            BSON_APPEND_DOCUMENT(reply, "value", value->get());
        }
    } else {
        BSON_APPEND_NULL(reply, "value");
    }
    bson_destroy(&q);
}

HALO_REGISTER_COMMAND(CommandSpec{.names = {"findAndModify", "findandmodify"},
                                  .run = runFindAndModify,
                                  .yieldsOnWriteConflict = true});

// ---------------------------------------------------------------- count / distinct

void runCount(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    if (findView(op.store, ns)) {
        bson::Doc r = runOnView(op, countAsAggregate(op, std::string(splitNs(ns).second)));
        bson_iter_t it, n;
        int64_t count = 0;
        if (bson_iter_init(&it, r.get()) &&
            bson_iter_find_descendant(&it, "cursor.firstBatch.0.count", &n))
            count = bson_iter_as_int64(&n);
        BSON_APPEND_INT64(reply, "n", count);
        return;
    }
    bson_t qv;
    bson::Doc query;
    if (cmdarg::getDoc(op.args, "query", &qv, "count")) query = bson::Doc::copyOf(&qv);
    int64_t skip = nonNegative(op.args, "skip", "count", "skip");
    int64_t limit = cmdarg::getInt(op.args, "limit", 0, "count");
    if (limit < 0) limit = -limit;
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    query::CollatorPtr collator = collationFor(op.args, coll.get(), "count");
    int64_t n = 0;
    if (coll) {
        if (query.empty() && !op.args.has("hint")) {
            n = std::max<int64_t>(0, coll->numRecords.load() - skip);
            if (limit > 0) n = std::min(n, limit);
        } else {
            FindSpec spec;
            spec.filter = std::move(query);
            spec.hint = hintOf(op.args);
            spec.skip = skip;
            spec.limit = limit;
            spec.collator = collator;
            FindExecutor exec(coll, std::move(spec));
            ReadScope rs(op.store);
            while (exec.next(rs.session())) ++n;
        }
    }
    if (n <= INT32_MAX)
        BSON_APPEND_INT32(reply, "n", static_cast<int32_t>(n));
    else
        BSON_APPEND_INT64(reply, "n", n);
}

HALO_REGISTER_COMMAND(CommandSpec{{"count"}, runCount});

void runDistinct(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    bson_iter_t it;
    if (!op.args.find("key", &it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'distinct.key' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(
            ErrorCode::TypeMismatch,
            fmt::format("BSON field 'distinct.key' is the wrong type '{}', expected type 'string'",
                        bson::typeName(bson_iter_type(&it))));
    std::string key = bson_iter_utf8(&it, nullptr);
    if (findView(op.store, ns)) {
        bson::Doc r = runOnView(op, distinctAsAggregate(op, std::string(splitNs(ns).second), key));
        bson_iter_t root, values;
        bson_t empty = BSON_INITIALIZER;
        if (bson_iter_init(&root, r.get()) &&
            bson_iter_find_descendant(&root, "cursor.firstBatch.0.values", &values))
            bson::appendIter(reply, "values", values);
        else
            BSON_APPEND_ARRAY(reply, "values", &empty);
        return;
    }
    bson_t qv;
    bson::Doc query;
    if (cmdarg::getDoc(op.args, "query", &qv, "distinct")) query = bson::Doc::copyOf(&qv);
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    query::CollatorPtr collator = collationFor(op.args, coll.get(), "distinct");
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, "values", &arr);
    if (coll) {
        FindSpec spec;
        spec.filter = std::move(query);
        spec.hint = hintOf(op.args);
        spec.collator = collator;
        FindExecutor exec(coll, std::move(spec));
        ReadScope rs(op.store);
        Session* s = &rs.session();
        std::vector<bson::Doc> holders;
        std::vector<bson_value_t> distinct;
        size_t bytes = 0;
        while (auto d = exec.next(*s)) {
            bool keep = false;
            bson::forEachValueAtPath(d->get(), key, [&](const bson_value_t& v) {
                for (const auto& x : distinct)
                    if (bson::compareValues(x, v, collator.get()) == 0) return;
                distinct.push_back(v);
                keep = true;
            });
            if (keep) {
                bytes += d->size();
                holders.push_back(std::move(*d));
            }
            if (bytes > static_cast<size_t>(wire::kMaxBsonObjectSize))
                uasserted(ErrorCode::BSONObjectTooLarge, "distinct too big, 16mb cap");
        }
        for (size_t i = 0; i < distinct.size(); ++i) {
            std::string k = std::to_string(i);
            bson::appendValue(&arr, k, distinct[i]);
        }
    }
    bson_append_array_end(reply, &arr);
}

HALO_REGISTER_COMMAND(CommandSpec{{"distinct"}, runDistinct});

/// The date field and lifetime of a TTL index: a single-field index (not on
/// _id) whose spec has a numeric expireAfterSeconds.
std::optional<std::pair<std::string, int64_t>> ttlOf(const IndexEntry& idx) {
    bson_iter_t it;
    if (idx.isIdIndex() || bson_count_keys(idx.keyPattern.get()) != 1 ||
        !bson::find(idx.spec.get(), "expireAfterSeconds", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return std::nullopt;
    bson_iter_t key;
    bson_iter_init(&key, idx.keyPattern.get());
    bson_iter_next(&key);
    if (!BSON_ITER_HOLDS_NUMBER(&key)) return std::nullopt;  // hashed, text, 2dsphere
    return std::make_pair(std::string(bson_iter_key(&key)), bson_iter_as_int64(&it));
}

}  // namespace

int64_t removeExpired(Store& store, int64_t nowMs) {
    constexpr int64_t kBatch = 500;
    int64_t removed = 0;
    Catalog& catalog = store.catalog();
    std::vector<std::shared_ptr<const CollectionEntry>> collections;
    {
        // The passes below take the lock per batch; this only lists what there is now.
        CollectionLock lk(catalog);
        for (const auto& db : catalog.listDatabases())
            for (auto& c : catalog.listCollections(db)) collections.push_back(std::move(c));
    }
    for (const auto& coll : collections) {
        bson_iter_t capped;
        if (bson::find(coll->options.get(), "capped", &capped) &&
            bson::isTruthy(*bson_iter_value(&capped)))
            continue;  // as mongod: TTL indexes do not expire capped collections
        // The TTL indexes' (field, lifetime), and a clustered collection's
        // expireAfterSeconds, which expires documents by their _id.
        std::vector<std::pair<std::string, int64_t>> ttls;
        for (const auto& idx : coll->indexes)
            if (auto ttl = ttlOf(*idx)) ttls.push_back(std::move(*ttl));
        bson_iter_t clusteredTtl;
        if (bson_has_field(coll->options.get(), "clusteredIndex") &&
            bson::find(coll->options.get(), "expireAfterSeconds", &clusteredTtl) &&
            BSON_ITER_HOLDS_NUMBER(&clusteredTtl))
            ttls.emplace_back("_id", bson_iter_as_int64(&clusteredTtl));
        for (const auto& ttlEntry : ttls) {
            const auto* ttl = &ttlEntry;
            // A date (or an array holding one) older than the lifetime;
            // other types never expire.
            bson::Doc q;
            bson_t cond;
            BSON_APPEND_DOCUMENT_BEGIN(q.mut(), ttl->first.c_str(), &cond);
            BSON_APPEND_DATE_TIME(&cond, "$lt", nowMs - ttl->second * 1000);
            bson_append_document_end(q.mut(), &cond);
            auto matcher = std::shared_ptr<const query::Matcher>(
                uassertStatusOK(query::Matcher::parse(q.get())));
            // In batches, each its own transaction, so a large backlog
            // never makes one huge transaction.
            for (;;) {
                std::vector<bson::Doc> ids;
                {
                    CollectionLock lk(catalog);
                    auto now = catalog.lookup(coll->ns);
                    if (!now || now->uri != coll->uri) break;
                    ReadScope rs(store);
                    ScanStage scan(now,
                                   planQuery(*now, q.get(), nullptr, nullptr, now->collator.get()),
                                   matcher);
                    int64_t rid;
                    while (static_cast<int64_t>(ids.size()) < kBatch) {
                        auto d = scan.next(rs.session(), &rid);
                        if (!d) break;
                        bson_iter_t idIt;
                        if (!bson::find(d->get(), "_id", &idIt)) continue;
                        bson::Doc id;
                        bson::appendIter(id.mut(), "_id", idIt);
                        ids.push_back(std::move(id));
                    }
                    rs.done();
                }
                for (const auto& id : ids) {
                    // The _id and the expiry again: a concurrent update wins
                    // (an _id never changes: then the _id alone).
                    bson::Doc one = id.copy();
                    if (ttl->first != "_id") {
                        BSON_APPEND_DOCUMENT_BEGIN(one.mut(), ttl->first.c_str(), &cond);
                        BSON_APPEND_DATE_TIME(&cond, "$lt", nowMs - ttl->second * 1000);
                        bson_append_document_end(one.mut(), &cond);
                    }
                    CollectionLock lk(catalog);
                    removed += deleteDocs(store, coll->ns, one.get(), true, nullptr, nullptr,
                                          nullptr, nullptr, -1);
                }
                if (static_cast<int64_t>(ids.size()) < kBatch) break;
            }
        }
    }
    return removed;
}

}  // namespace halo::store
