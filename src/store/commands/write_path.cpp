#include "store/commands/write_path.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/log.h"
#include "store/exec/interrupt.h"
#include "store/repl/doc_diff.h"
#include "store/storage/error_with_info.h"

namespace halo::store {

namespace {
thread_local CommandDurability* tlDurability = nullptr;
thread_local ConflictYieldScope* tlConflictYield = nullptr;
/// In-thread retries before a write yields: a conflict with another
/// single-document write resolves within them; one with an open transaction
/// lasts until it ends.
constexpr int kYieldAfterConflicts = 10;
/// About 98 s of backoff in all, as before yielding existed.
constexpr int kMaxConflictRetries = 10000;
}  // namespace

ConflictYieldScope::ConflictYieldScope(const CommandDurability& durability, Deferral& deferral)
    : durability_(durability),
      deferral_(deferral),
      prior_(deferral.writeConflicts),
      outer_(tlConflictYield) {
    tlConflictYield = this;
}

ConflictYieldScope::~ConflictYieldScope() {
    tlConflictYield = outer_;
}

void ConflictYieldScope::statementStart(WriteProgress* progress) {
    if (ConflictYieldScope* y = tlConflictYield) {
        y->mark_ = y->durability_.commits();
        y->progress_ = progress;
    }
}

WriteProgress& WriteProgress::of(OperationContext& op, WriteProgress& local) {
    if (op.deferral && op.deferral->progress) return *op.deferral->progress;
    return local;
}

bool WriteProgress::runs(int32_t index) {
    if (index < next) return false;
    ConflictYieldScope::statementStart(this);
    return true;
}

NoConflictYield::NoConflictYield() {
    if (tlConflictYield) ++tlConflictYield->suppressed_;
}

NoConflictYield::~NoConflictYield() {
    if (tlConflictYield) --tlConflictYield->suppressed_;
}

bool waitOutWriteConflict(int attempt) {
    const ConflictYieldScope* y = tlConflictYield;
    const int total = attempt + (y ? y->prior_ : 0);
    if (total > kMaxConflictRetries) return false;
    checkForInterrupt();
    // Only when running the command again from its current statement is the
    // same as retrying this write: nothing of the statement committed, and no
    // inner command's write (its own durability scope) is waiting.
    if (y && total >= kYieldAfterConflicts && y->suppressed_ == 0 &&
        CommandDurability::current() == &y->durability_ && y->durability_.commits() == y->mark_) {
        // The statements done outlive this run: the next resumes after them.
        if (y->progress_ && y->progress_ != y->deferral_.progress.get())
            y->deferral_.progress = std::make_shared<WriteProgress>(std::move(*y->progress_));
        throw ConflictYield{total + 1};
    }
    writeConflictBackoff(total);
    return true;
}

CommandDurability::CommandDurability(Store& store) : store_(store), outer_(tlDurability) {
    tlDurability = this;
}

CommandDurability::~CommandDurability() {
    tlDurability = outer_;
    try {
        flush();
    } catch (const std::exception& e) {
        // The command's reply is already an error or was built; the writes are
        // committed and their entries released. The next sync covers them.
        log::warning("storage", 9140010, "Journal sync at the end of a command failed",
                     fmt::format(R"({{"error":{}}})", log::quote(e.what())));
    }
}

CommandDurability* CommandDurability::current() {
    return tlDurability;
}

void CommandDurability::deferred(std::vector<Timestamp> ts) {
    const auto now = std::chrono::steady_clock::now();
    ++commits_;
    if (pending_++ == 0) firstPending_ = now;
    entries_.insert(entries_.end(), ts.begin(), ts.end());
    if (pending_ >= kMaxStatements || now - firstPending_ >= kMaxHold) flush();
}

void CommandDurability::flush() {
    if (pending_ == 0) return;
    pending_ = 0;
    std::vector<Timestamp> entries = std::move(entries_);
    entries_.clear();
    struct Release {
        Store& store;
        const std::vector<Timestamp>& ts;
        ~Release() {
            if (!ts.empty()) store.oplog().releaseCommitted(ts);
        }
    } release{store_, entries};
    PooledSession s(store_.catalog().sessions());
    wtCheck(s->get()->log_flush(s->get(), "sync=on"), "log_flush");
}

int64_t transactionWriteBytes(const SessionState& txn) {
    int64_t bytes = 0;  // its buffered oplog entries
    for (const auto& e : txn.txnOps) bytes += e.o.size() + (e.o2 ? e.o2->size() : 0);
    return bytes;
}

void throwIfTooLargeForCache(Store& store, int64_t bytes) {
    // Below 15% of the smallest cache the store opens (1 MiB) no cache is too small:
    // an ordinary conflict, answered without reading the statistics.
    if (bytes * 100 < (int64_t{1} << 20) * 15) return;
    const int64_t cache = store.engine().connStat(WT_STAT_CONN_CACHE_BYTES_MAX);
    if (cache > 0 && bytes * 100 >= cache * 15)
        uasserted(ErrorCode::TransactionTooLargeForCache,
                  "transaction is too large and will not fit in the storage engine cache");
}

std::shared_ptr<const CollectionEntry> lookupCollection(Store& store, std::string_view ns) {
    CollectionLock lk(store.catalog());
    return store.catalog().lookup(ns);
}

namespace {
bson::Doc idOnly(const bson_t* doc) {
    bson::Doc key;
    bson_iter_t it;
    if (bson::find(doc, "_id", &it)) bson::appendIter(key.mut(), "_id", it);
    return key;
}
bool recordsImages(const CollectionEntry& c) {
    bson_t opt;
    bson_iter_t it;
    return bson::subDocument(c.options.get(), "changeStreamPreAndPostImages", &opt) &&
           bson::find(&opt, "enabled", &it) && bson::isTruthy(*bson_iter_value(&it));
}
}  // namespace

void logInsert(Oplog::Unit& u, const CollectionEntry& c, const bson_t* doc) {
    OplogEntry e;
    e.op = 'i';
    e.ns = c.ns;
    e.setUuid(c.uuid);
    e.o = bson::Doc::copyOf(doc);
    e.o2 = idOnly(doc);
    u.append(std::move(e));
}

void logUpdate(Oplog::Unit& u, const CollectionEntry& c, const bson_t* before, const bson_t* after,
               bool replacement) {
    OplogEntry e;
    e.op = 'u';
    e.ns = c.ns;
    e.setUuid(c.uuid);
    if (replacement) {
        e.o = bson::Doc::copyOf(after);
    } else {
        BSON_APPEND_INT32(e.o.mut(), "$v", 2);
        bson::Doc diff = diffDocuments(before, after);
        BSON_APPEND_DOCUMENT(e.o.mut(), "diff", diff.get());
    }
    e.o2 = idOnly(after);
    if (recordsImages(c)) {
        e.postImage = bson::Doc::copyOf(after);
        e.preImage = bson::Doc::copyOf(before);
    }
    u.append(std::move(e));
}

void logDelete(Oplog::Unit& u, const CollectionEntry& c, const bson_t* doc) {
    OplogEntry e;
    e.op = 'd';
    e.ns = c.ns;
    e.setUuid(c.uuid);
    e.o = idOnly(doc);
    if (recordsImages(c)) e.preImage = bson::Doc::copyOf(doc);
    u.append(std::move(e));
}

void logCommand(Store& store, const std::string& db, const bson_t* o, const uint8_t* uuid) {
    runWriteTxn(store, [&](Session&, Oplog::Unit& u) {
        OplogEntry e;
        e.op = 'c';
        e.ns = db + ".$cmd";
        e.setUuid(uuid);
        e.o = bson::Doc::copyOf(o);
        u.append(std::move(e));
    });
}

std::optional<bson::Doc> priorOutcome(Store& store, int32_t stmtId) {
    CurrentOperation& cur = currentOperation();
    // A first attempt (the usual case) has nothing recorded: no read needed.
    if (!cur.retryable || cur.freshTxnNumber) return std::nullopt;
    PooledSession s(store.catalog().sessions());
    for (int attempt = 0;; ++attempt) {
        try {
            Txn txn(*s);
            return cur.sessions->findStatement(*s, *cur.retryable, cur.txnNumber, stmtId);
        } catch (const DBException& e) {
            // A read WiredTiger rolled back (cache pressure): read again.
            if (e.code() != ErrorCode::WriteConflict || attempt >= 1000) throw;
            writeConflictBackoff(attempt);
        }
    }
}

namespace {

/// The onPrimaryTransactionalWrite fail point, once a retryable write's
/// statement is applied and recorded but not yet committed: the connection
/// closes (unless closeConnection: false), and with failBeforeCommitExceptionCode
/// the statement fails, so its storage transaction rolls back.
void onPrimaryTransactionalWrite(Store& store, CurrentOperation& cur) {
    FailPoint& fp = store.failPoints().onPrimaryTransactionalWrite;
    if (!fp.maybeOn()) return;
    auto data = fp.fire([](const bson_t*) { return true; });
    if (!data) return;
    bson_iter_t it;
    if (!bson::find(data->get(), "closeConnection", &it) || bson::isTruthy(*bson_iter_value(&it)))
        cur.closeConnection = true;
    if (bson::find(data->get(), "failBeforeCommitExceptionCode", &it) &&
        bson::isNumber(bson_iter_type(&it)))
        uasserted(static_cast<ErrorCode>(static_cast<int>(bson_iter_as_int64(&it))),
                  fmt::format("Failing write for txnNumber {} due to failpoint. The write must not "
                              "be reflected.",
                              cur.txnNumber));
}

}  // namespace

void recordOutcome(Store& store, Session& s, int32_t stmtId, const bson_t* outcome) {
    CurrentOperation& cur = currentOperation();
    if (!cur.retryable) return;
    cur.sessions->recordStatement(s, *cur.retryable, cur.txnNumber, stmtId, outcome);
    onPrimaryTransactionalWrite(store, cur);
}

ReadScope::ReadScope(Store& store) {
    if (SessionState* txn = currentOperation().txn) {
        session_ = txn->wtSession.get();
    } else {
        pooled_.emplace(store.catalog().sessions());
        session_ = &**pooled_;
        const std::optional<Timestamp>& at = currentOperation().readAt;
        if (!at) {
            txn_.emplace(*session_);
            return;
        }
        char cfg[64];
        std::snprintf(cfg, sizeof cfg, "read_timestamp=%llx",
                      static_cast<unsigned long long>(at->asU64()));
        try {
            txn_.emplace(*session_, cfg);
        } catch (const DBException& e) {
            if (e.code() == ErrorCode::WriteConflict) throw;
            // The history at that time was discarded meanwhile (WiredTiger refuses
            // a read timestamp older than its oldest).
            uasserted(ErrorCode::SnapshotTooOld,
                      fmt::format("Read timestamp Timestamp({}, {}) is older than the oldest "
                                  "available timestamp.",
                                  at->secs, at->inc));
        }
    }
}

ReadScope::~ReadScope() = default;

void ReadScope::done() {
    if (txn_) txn_->commit(false);
}

void validateDbName(std::string_view db) {
    if (db.empty() || db.size() >= 64 || db.find_first_of("/\\. \"$") != std::string_view::npos ||
        db.find('\0') != std::string_view::npos)
        uasserted(ErrorCode::InvalidNamespace, fmt::format("Invalid database name: '{}'", db));
}

void ensureCollection(Store& store, const std::string& ns) {
    Catalog& catalog = store.catalog();
    {
        std::shared_lock lk(catalog.ddlLock());
        if (catalog.lookup(ns)) return;
    }
    // Another transaction's uncommitted create of `ns` (WriteConflict): wait
    // for it to commit or abort, as mongod's implicit create waits.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int attempt = 0;; ++attempt) {
        try {
            std::unique_lock lk(catalog.ddlLock());
            if (catalog.lookup(ns)) return;
            auto coll = catalog.getOrCreate(ns);
            noteCreatedInTransaction(catalog, *coll);
            NoConflictYield created;  // the collection exists: its create entry must follow
            logCreate(store, *coll);
            return;
        } catch (const DBException& e) {
            if (e.code() != ErrorCode::WriteConflict || currentOperation().txn ||
                std::chrono::steady_clock::now() > deadline || !waitOutWriteConflict(attempt))
                throw;
        }
    }
}

void noteCreatedInTransaction(Catalog& catalog, const CollectionEntry& c) {
    SessionState* txn = currentOperation().txn;
    if (!txn) return;
    catalog.markPendingCreate(c.ns, txn);
    std::array<uint8_t, 16> uuid;
    std::memcpy(uuid.data(), c.uuid, uuid.size());
    txn->createdInTxn.emplace_back(c.ns, uuid);
}

bool createdInThisTransaction(const CollectionEntry& c) {
    SessionState* txn = currentOperation().txn;
    if (!txn) return false;
    for (const auto& [ns, uuid] : txn->createdInTxn)
        if (ns == c.ns && std::memcmp(uuid.data(), c.uuid, uuid.size()) == 0) return true;
    return false;
}

void logCreate(Store& store, const CollectionEntry& c) {
    bson::Doc o;
    BSON_APPEND_UTF8(o.mut(), "create", c.name.c_str());
    bson_iter_t it;
    bson_iter_init(&it, c.options.get());
    while (bson_iter_next(&it)) bson::appendIter(o.mut(), bson_iter_key(&it), it);
    logCommand(store, c.db, o.get(), c.uuid);
}

bool fillBatch(Session& s, DocStream& stream, bson_t* cursorDoc, const char* arrayName,
               int64_t batchSize, bool firstBatch) {
    constexpr size_t kMaxBatchBytes = 16 * 1024 * 1024;
    bson_t arr;
    bson_append_array_begin(cursorDoc, arrayName, -1, &arr);
    size_t bytes = 0;
    int64_t n = 0;
    bool exhausted = false;
    char keybuf[16];
    int64_t limit = batchSize > 0 ? batchSize : (firstBatch ? 101 : 0);
    if (firstBatch && batchSize == 0 && limit == 101) limit = 101;
    while (true) {
        if (limit > 0 && n >= limit) break;
        checkForInterrupt();
        std::optional<bson::Doc> d = stream.held ? std::exchange(stream.held, {}) : stream.next(s);
        if (!d) {
            exhausted = true;
            break;
        }
        // As mongod: a document joins a batch only while the batch stays within
        // 16 MB (the first always does); else it opens the next one. A change
        // stream's batch takes it anyway: its resume token has moved past it.
        if (n > 0 && bytes + d->size() > kMaxBatchBytes && !stream.isChangeStream()) {
            stream.held = std::move(d);
            break;
        }
        const char* key;
        bson_uint32_to_string(static_cast<uint32_t>(n), &key, keybuf, sizeof keybuf);
        bson_append_document(&arr, key, -1, d->get());
        bytes += d->size();
        ++n;
    }
    bson_append_array_end(cursorDoc, &arr);
    if (!exhausted && !stream.held && stream.atEnd()) exhausted = true;
    stream.saveState();
    if (auto token = stream.postBatchResumeToken())
        BSON_APPEND_DOCUMENT(cursorDoc, "postBatchResumeToken", token->get());
    if (stream.isTailable()) return stream.isExhausted();
    return exhausted;
}

std::string sessionIdBytes(const bson::Fields& cmd) {
    bson_t lsid;
    bson_iter_t it;
    if (!cmd.subDocument("lsid", &lsid) || !bson_iter_init_find(&it, &lsid, "id") ||
        !BSON_ITER_HOLDS_BINARY(&it))
        return {};
    return bson::binaryBytes(it);
}

std::optional<int64_t> txnNumberOf(const bson::Fields& cmd) {
    bson_iter_t it;
    if (cmd.find("txnNumber", &it) && BSON_ITER_HOLDS_NUMBER(&it)) return bson_iter_as_int64(&it);
    return std::nullopt;
}

std::unique_ptr<ClientCursor> newCursor(OperationContext& op, const std::string& ns,
                                        std::shared_ptr<const CollectionEntry> coll,
                                        std::unique_ptr<DocStream> stream) {
    auto c = std::make_unique<ClientCursor>();
    c->ns = ns;
    c->coll = std::move(coll);
    c->stream = std::move(stream);
    c->lsid = sessionIdBytes(op.args);
    c->txnNumber = txnNumberOf(op.args);
    if (const auto& at = currentOperation().readAt) c->readAt = at->asU64();
    if (op.access) {
        auto auth = std::make_shared<authz::CursorAuth>();
        if (op.client.user) auth->owner.emplace(op.client.user->user, op.client.user->db);
        auth->privileges = op.access->anyOf;
        c->auth = std::move(auth);
    }
    return c;
}

void replyWithCursor(OperationContext& op, const std::string& ns,
                     std::shared_ptr<const CollectionEntry> coll, std::unique_ptr<DocStream> stream,
                     int64_t batchSize, bool singleBatch, bson_t* reply, bool tailable,
                     bool awaitData) {
    bson_t cursor;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
    bool exhausted;
    {
        ReadScope rs(op.store);
        exhausted = fillBatch(rs.session(), *stream, &cursor, "firstBatch", batchSize, true);
        rs.done();
    }
    int64_t id = 0;
    tailable = tailable || stream->isTailable();
    awaitData = awaitData || stream->isTailable();
    if (!exhausted && !singleBatch) {
        auto c = newCursor(op, ns, std::move(coll), std::move(stream));
        c->tailable = tailable;
        c->awaitData = awaitData;
        c->batchSize = batchSize;
        id = op.store.cursors().add(std::move(c));
    }
    BSON_APPEND_INT64(&cursor, "id", id);
    BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
    bson_append_document_end(reply, &cursor);
}

bson::Doc runCommandInternally(OperationContext& op, const std::string& db, const bson_t* cmd) {
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    std::string name = bson_iter_key(&it);
    const CommandSpec* spec = CommandRegistry::instance().find(name);
    HALO_INVARIANT(spec != nullptr);
    bson::Fields args(cmd);
    OperationContext sub{op.store, op.client, db, cmd, args, name};
    bson::Doc reply;
    spec->run(sub, reply.mut());
    bson_t errors, first;
    if (bson::subDocument(reply.get(), "writeErrors", &errors) &&
        bson::subDocument(&errors, "0", &first)) {
        bson_iter_t code, msg;
        int c = bson::find(&first, "code", &code) ? static_cast<int>(bson_iter_as_int64(&code)) : 8;
        std::string m = bson::find(&first, "errmsg", &msg) && BSON_ITER_HOLDS_UTF8(&msg)
                            ? bson_iter_utf8(&msg, nullptr)
                            : "write error";
        // Extra fields (keyPattern/keyValue, errInfo) stay with the error.
        auto info = std::make_shared<bson::Doc>();
        bson_iter_init(&it, &first);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k != "index" && k != "code" && k != "errmsg" && k != "codeName")
                bson::appendIter(info->mut(), k, it);
        }
        throw ErrorWithInfo(Status(static_cast<ErrorCode>(c), m), info);
    }
    return reply;
}

}  // namespace halo::store
