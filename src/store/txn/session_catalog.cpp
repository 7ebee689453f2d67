#include "store/txn/session_catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/log.h"
#include "store/repl/oplog.h"

namespace halo::store {
namespace {

constexpr const char* kRetryableUri = "table:_retryable";
/// The stmtId under which a committed transaction records its outcome (after
/// every statement id a retryable write can use).
constexpr int32_t kCommittedStmt = -1;

std::string lsidKey(const bson_t* lsid) {
    bson_iter_t it;
    if (!bson::find(lsid, "id", &it) || !BSON_ITER_HOLDS_BINARY(&it))
        uasserted(ErrorCode::Location40414, "BSON field 'lsid.id' is missing but a required field");
    bson_subtype_t st;
    uint32_t len;
    const uint8_t* data;
    bson_iter_binary(&it, &st, &len, &data);
    if (len != 16) uasserted(ErrorCode::InvalidUUID, "lsid.id must be a 16-byte UUID");
    std::string key(reinterpret_cast<const char*>(data), len);
    // Sessions of different users are distinct even with equal ids.
    if (bson::find(lsid, "uid", &it) && BSON_ITER_HOLDS_BINARY(&it)) {
        bson_iter_binary(&it, &st, &len, &data);
        key.append(reinterpret_cast<const char*>(data), len);
    }
    return key;
}

void putBE64(std::string& out, uint64_t v) {
    for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((v >> (i * 8)) & 0xFF));
}
void putBE32(std::string& out, uint32_t v) {
    for (int i = 3; i >= 0; --i) out.push_back(static_cast<char>((v >> (i * 8)) & 0xFF));
}
uint64_t getBE64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return v;
}

/// Row key: len(lsid key) byte, lsid key, txnNumber (big-endian, sign-flipped), stmtId.
std::string rowPrefix(const std::string& lsid) {
    std::string k;
    k.push_back(static_cast<char>(lsid.size()));
    k += lsid;
    return k;
}
std::string rowKey(const std::string& lsid, int64_t txnNumber, int32_t stmtId) {
    std::string k = rowPrefix(lsid);
    putBE64(k, static_cast<uint64_t>(txnNumber) ^ (1ull << 63));
    putBE32(k, static_cast<uint32_t>(stmtId));
    return k;
}

WT_ITEM item(const std::string& s) {
    WT_ITEM it{};
    it.data = s.data();
    it.size = s.size();
    return it;
}

}  // namespace

CurrentOperation& currentOperation() {
    thread_local CurrentOperation op;
    return op;
}

SessionCatalog::SessionCatalog(Engine& engine, Catalog& catalog, Oplog& oplog)
    : engine_(engine), catalog_(catalog), oplog_(oplog) {}

Status SessionCatalog::open() {
    PooledSession s(catalog_.sessions());
    return engine_.createTable(*s, kRetryableUri, "u", "u");
}

std::shared_ptr<SessionState> SessionCatalog::get(const bson_t* lsid, std::string_view owner) {
    std::string key = lsidKey(lsid);
    std::lock_guard lk(mu_);
    auto& st = sessions_[key];
    if (!st) {
        st = std::make_shared<SessionState>();
        st->key = key;
        st->lsid = bson::Doc::copyOf(lsid);
        st->owner = owner;
    }
    st->lastUse = std::chrono::steady_clock::now();
    return st;
}

void SessionCatalog::end(const bson_t* lsid) {
    std::shared_ptr<SessionState> st;
    {
        std::lock_guard lk(mu_);
        auto it = sessions_.find(lsidKey(lsid));
        if (it == sessions_.end()) return;
        st = it->second;
        sessions_.erase(it);
    }
    std::lock_guard lk(st->mu);
    if (st->txn == SessionState::Txn::InProgress) abort(*st);
}

void SessionCatalog::begin(SessionState& st, int64_t txnNumber, uint64_t readAt) {
    if (st.txn == SessionState::Txn::InProgress) abort(st);
    st.wtSession = engine_.newSession();
    if (readAt != 0) {
        char cfg[64];
        std::snprintf(cfg, sizeof cfg, "read_timestamp=%llx",
                      static_cast<unsigned long long>(readAt));
        try {
            st.wtSession->begin(cfg);
        } catch (const DBException&) {
            st.wtSession.reset();
            Timestamp t = Timestamp::fromU64(readAt);
            uasserted(ErrorCode::SnapshotTooOld,
                      fmt::format("Read timestamp Timestamp({}, {}) is older than the oldest "
                                  "available timestamp.",
                                  t.secs, t.inc));
        }
    } else {
        st.wtSession->begin();
    }
    st.txnOps.clear();
    st.txnNumber = txnNumber;
    st.txn = SessionState::Txn::InProgress;
    st.txnStart = std::chrono::steady_clock::now();
}

void SessionCatalog::commit(SessionState& st) {
    HALO_INVARIANT(st.txn == SessionState::Txn::InProgress && st.wtSession);
    try {
        Oplog::Unit unit(oplog_, *st.wtSession);
        if (!st.txnOps.empty()) {
            OplogEntry e;
            e.op = 'c';
            e.ns = "admin.$cmd";
            e.o = applyOpsEntry(st.txnOps);
            e.lsid = st.lsid.copy();
            e.txnNumber = st.txnNumber;
            unit.append(std::move(e));
        }
        // The outcome outlives a restart, so a commit retried after one (its
        // reply was lost) answers ok instead of redoing or losing the work.
        {
            static const bson::Doc committed = [] {
                bson::Doc d;
                BSON_APPEND_BOOL(d.mut(), "committed", true);
                return d;
            }();
            Cursor c = st.wtSession->open(kRetryableUri);
            forgetOlder(c, st, st.txnNumber);
            noteRecorded(st, st.txnNumber, -1);
            st.recordedCommit = true;
            putRecord(c, rowKey(st.key, st.txnNumber, kCommittedStmt), committed.get());
        }
        st.wtSession->commitThenSync();
        unit.committed();
    } catch (...) {
        if (st.wtSession->inTransaction()) st.wtSession->rollback();
        st.wtSession.reset();
        st.txnOps.clear();
        undoCreatedCollections(st);
        st.txn = SessionState::Txn::Aborted;
        throw;
    }
    st.wtSession.reset();
    st.txnOps.clear();
    for (const auto& created : st.createdInTxn) catalog_.clearPendingCreate(created.first);
    st.createdInTxn.clear();
    st.txn = SessionState::Txn::Committed;
}

void SessionCatalog::abort(SessionState& st) {
    if (st.wtSession) {
        if (st.wtSession->inTransaction()) st.wtSession->rollback();
        st.wtSession.reset();
    }
    st.txnOps.clear();
    undoCreatedCollections(st);
    if (st.txn == SessionState::Txn::InProgress) st.txn = SessionState::Txn::Aborted;
}

void SessionCatalog::undoCreatedCollections(SessionState& st) {
    auto created = std::move(st.createdInTxn);
    st.createdInTxn.clear();
    if (created.empty()) return;
    std::unique_lock lk(catalog_.ddlLock());
    for (const auto& [ns, uuid] : created) {
        auto e = catalog_.lookupIncludingPending(ns);
        if (!e || std::memcmp(e->uuid, uuid.data(), uuid.size()) != 0) continue;  // gone already
        bool empty = true;
        try {
            PooledSession s(catalog_.sessions());
            Txn txn(*s);
            Cursor c = s->open(e->uri);
            empty = c->next(c.get()) == WT_NOTFOUND;
        } catch (const DBException&) {
            empty = false;  // unreadable: keep it rather than lose what it may hold
        }
        if (empty) {
            Status dropped = catalog_.dropCollection(ns);
            if (!dropped.isOK()) catalog_.clearPendingCreate(ns);  // not hidden forever
            if (!dropped.isOK())
                log::warning("txn", 9140001,
                             "Could not drop a collection an aborted transaction created",
                             fmt::format(R"({{"ns":{},"error":{}}})", log::quote(ns),
                                         log::quote(dropped.reason())));
            continue;
        }
        // Written to meanwhile (it cannot be by other clients while hidden): it
        // stays, visible, and its creation is replicated now.
        catalog_.clearPendingCreate(ns);
        try {
            PooledSession s(catalog_.sessions());
            Txn txn(*s);
            Oplog::Unit unit(oplog_, *s);
            OplogEntry o;
            o.op = 'c';
            o.ns = e->db + ".$cmd";
            o.setUuid(e->uuid);
            bson::Doc cmd;
            BSON_APPEND_UTF8(cmd.mut(), "create", e->name.c_str());
            bson_iter_t it;
            bson_iter_init(&it, e->options.get());
            while (bson_iter_next(&it)) bson::appendIter(cmd.mut(), bson_iter_key(&it), it);
            o.o = std::move(cmd);
            unit.append(std::move(o));
            txn.commitThenSync();
            unit.committed();
        } catch (const DBException& ex) {
            log::warning(
                "txn", 9140002, "Could not log the creation of a collection",
                fmt::format(R"({{"ns":{},"error":{}}})", log::quote(ns), log::quote(ex.what())));
        }
    }
}

bool SessionCatalog::checkTxnNumber(SessionState& st, int64_t txnNumber) {
    if (st.txnNumber < 0) {
        // After a restart: the newest recorded txnNumber for this session.
        PooledSession s(catalog_.sessions());
        Txn txn(*s);
        Cursor c = s->open(kRetryableUri);
        std::string prefix = rowPrefix(st.key);
        std::string after = prefix + std::string(12, '\xFF');
        WT_ITEM k = item(after);
        c->set_key(c.get(), &k);
        int exact = 0;
        int ret = c->search_near(c.get(), &exact);
        if (ret == 0 && exact > 0) ret = c->prev(c.get());
        if (ret == 0) {
            WT_ITEM got;
            c->get_key(c.get(), &got);
            if (got.size == prefix.size() + 12 &&
                std::memcmp(got.data, prefix.data(), prefix.size()) == 0) {
                uint64_t raw = getBE64(static_cast<const uint8_t*>(got.data) + prefix.size());
                st.txnNumber = static_cast<int64_t>(raw ^ (1ull << 63));
            }
        }
    }
    if (txnNumber < st.txnNumber)
        uasserted(ErrorCode::TransactionTooOld,
                  fmt::format("Cannot start transaction {} on session because a newer transaction "
                              "{} has already started.",
                              txnNumber, st.txnNumber));
    if (txnNumber > st.txnNumber) {
        if (st.txn == SessionState::Txn::InProgress) abort(st);
        st.txnNumber = txnNumber;
        st.txn = SessionState::Txn::None;
        return true;
    }
    return false;
}

std::optional<bson::Doc> SessionCatalog::findStatement(Session& s, const SessionState& st,
                                                       int64_t txnNumber, int32_t stmtId) {
    Cursor c = s.open(kRetryableUri);
    std::string key = rowKey(st.key, txnNumber, stmtId);
    WT_ITEM k = item(key);
    c->set_key(c.get(), &k);
    int ret = c->search(c.get());
    if (ret == WT_NOTFOUND) return std::nullopt;
    wtCheck(ret, "retryable lookup");
    WT_ITEM v;
    c->get_value(c.get(), &v);
    return bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size);
}

void SessionCatalog::recordStatement(Session& s, SessionState& st, int64_t txnNumber,
                                     int32_t stmtId, const bson_t* outcome) {
    Cursor c = s.open(kRetryableUri);
    forgetOlder(c, st, txnNumber);
    noteRecorded(st, txnNumber, stmtId);
    putRecord(c, rowKey(st.key, txnNumber, stmtId), outcome);
}

void SessionCatalog::noteRecorded(SessionState& st, int64_t txnNumber, int32_t stmtId) {
    if (st.recordedTxn != txnNumber) st.recordedMaxStmt = -1;
    st.recordedTxn = txnNumber;
    st.recordedMaxStmt = std::max(st.recordedMaxStmt, stmtId);
}

void SessionCatalog::forgetOlder(Cursor& c, SessionState& st, int64_t txnNumber) {
    // Records of older transactions on this session can no longer be retried.
    if (!st.swept) {
        // Once per session after a start: whatever an earlier run left.
        std::string prefix = rowPrefix(st.key);
        std::string current = rowKey(st.key, txnNumber, 0);
        WT_ITEM pk = item(prefix);
        c->set_key(c.get(), &pk);
        int exact = 0;
        int ret = c->search_near(c.get(), &exact);
        if (ret == 0 && exact < 0) ret = c->next(c.get());
        while (ret == 0) {
            WT_ITEM got;
            c->get_key(c.get(), &got);
            std::string_view gk(static_cast<const char*>(got.data), got.size);
            if (gk.substr(0, prefix.size()) != prefix ||
                gk >= std::string_view(current).substr(0, prefix.size() + 8))
                break;
            wtCheck(c->remove(c.get()), "retryable cleanup");
            ret = c->next(c.get());
        }
        c->reset(c.get());
    } else if (st.recordedTxn >= 0 && st.recordedTxn < txnNumber) {
        auto remove = [&](int32_t stmtId) {
            std::string old = rowKey(st.key, st.recordedTxn, stmtId);
            WT_ITEM ok = item(old);
            c->set_key(c.get(), &ok);
            int ret = c->remove(c.get());
            if (ret != WT_NOTFOUND) wtCheck(ret, "retryable cleanup");
        };
        for (int32_t i = 0; i <= st.recordedMaxStmt; ++i) remove(i);
        if (st.recordedCommit) remove(kCommittedStmt);
        st.recordedCommit = false;
    }
    // Noted before the commit: a rolled-back attempt is retried with the same
    // txnNumber, and removing an absent key is harmless.
    st.swept = true;
}

void SessionCatalog::putRecord(Cursor& c, const std::string& key, const bson_t* value) {
    WT_ITEM k = item(key);
    WT_ITEM v{};
    v.data = bson_get_data(value);
    v.size = value->len;
    c->set_key(c.get(), &k);
    c->set_value(c.get(), &v);
    wtCheck(c->insert(c.get()), "retryable record");
}

bool SessionCatalog::committedBefore(SessionState& st, int64_t txnNumber) {
    if (st.txnNumber > txnNumber) return false;
    PooledSession s(catalog_.sessions());
    Txn txn(*s);
    Cursor c = s->open(kRetryableUri);
    std::string key = rowKey(st.key, txnNumber, kCommittedStmt);
    WT_ITEM k = item(key);
    c->set_key(c.get(), &k);
    int ret = c->search(c.get());
    if (ret == WT_NOTFOUND) return false;
    wtCheck(ret, "committed transaction lookup");
    st.txnNumber = txnNumber;
    st.txn = SessionState::Txn::Committed;
    st.recordedTxn = txnNumber;
    st.recordedMaxStmt = -1;
    st.recordedCommit = true;
    return true;
}

void SessionCatalog::reap(std::chrono::seconds txnLifetime, std::chrono::minutes idle) {
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<SessionState>> all;
    {
        std::lock_guard lk(mu_);
        for (auto it = sessions_.begin(); it != sessions_.end();) {
            auto& st = it->second;
            if (now - st->lastUse > idle && st.use_count() == 1) {
                std::unique_lock sl(st->mu, std::try_to_lock);
                if (sl.owns_lock() && st->txn != SessionState::Txn::InProgress) {
                    sl.unlock();
                    it = sessions_.erase(it);
                    continue;
                }
            }
            all.push_back(st);
            ++it;
        }
    }
    for (auto& st : all) {
        std::unique_lock sl(st->mu, std::try_to_lock);
        if (!sl.owns_lock()) continue;
        if (st->txn == SessionState::Txn::InProgress && now - st->txnStart > txnLifetime)
            abort(*st);
    }
}

std::vector<std::string> SessionCatalog::sessionsOwnedBy(
    const std::function<bool(const std::string&)>& owner) const {
    std::lock_guard lk(mu_);
    std::vector<std::string> keys;
    for (const auto& [key, st] : sessions_)
        if (owner(st->owner)) keys.push_back(key);
    return keys;
}

void SessionCatalog::abortTransactions(const std::function<bool(const std::string&)>& match) {
    std::vector<std::shared_ptr<SessionState>> matched;
    {
        std::lock_guard lk(mu_);
        for (const auto& [key, st] : sessions_)
            if (match(key)) matched.push_back(st);
    }
    for (auto& st : matched) {
        std::unique_lock sl(st->mu, std::try_to_lock);
        if (sl.owns_lock() && st->txn == SessionState::Txn::InProgress) abort(*st);
    }
}

Status SessionCatalog::abortTransactionsWriting(const std::string& ns) {
    std::vector<std::shared_ptr<SessionState>> all;
    {
        std::lock_guard lk(mu_);
        for (const auto& [key, st] : sessions_) all.push_back(st);
    }
    const CurrentOperation& cur = currentOperation();
    for (auto& st : all) {
        if (st.get() == cur.txn || st.get() == cur.retryable) continue;  // this command's own
        std::unique_lock sl(st->mu, std::try_to_lock);
        // A session running a command right now (most often one that never wrote
        // to `ns`) is left alone: waiting for it here, under the DDL lock its
        // command may need, could deadlock. What it wrote to `ns` before this
        // command is still at risk: a known gap, rarer than the idle case.
        if (!sl.owns_lock()) continue;
        if (st->txn != SessionState::Txn::InProgress) continue;
        bool wrote = std::any_of(st->txnOps.begin(), st->txnOps.end(),
                                 [&](const OplogEntry& e) { return e.ns == ns; });
        if (wrote) abort(*st);
    }
    return Status::OK();
}

std::vector<SessionCatalog::LocalSession> SessionCatalog::list() const {
    std::lock_guard lk(mu_);
    std::vector<LocalSession> out;
    out.reserve(sessions_.size());
    for (const auto& [key, st] : sessions_)
        out.push_back({st->lsid.copy(), st->owner, st->lastUse});
    return out;
}

size_t SessionCatalog::activeSessions() const {
    std::lock_guard lk(mu_);
    return sessions_.size();
}

}  // namespace halo::store
