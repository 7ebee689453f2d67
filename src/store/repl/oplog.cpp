#include "store/repl/oplog.h"

#include <chrono>

#include "common/log.h"
#include "store/storage/record_store.h"

namespace halo::store {

namespace {
int64_t wallNow() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}
}  // namespace

bson::Doc oplogEntryToBson(const OplogEntry& e, Timestamp ts, int64_t wallMillis) {
    bson::Doc d;
    bson_t* b = d.mut();
    if (e.lsid) {
        BSON_APPEND_DOCUMENT(b, "lsid", e.lsid->get());
        BSON_APPEND_INT64(b, "txnNumber", e.txnNumber);
    }
    if (e.stmtId >= 0) BSON_APPEND_INT32(b, "stmtId", e.stmtId);
    char op[2] = {e.op, 0};
    BSON_APPEND_UTF8(b, "op", op);
    BSON_APPEND_UTF8(b, "ns", e.ns.c_str());
    if (e.uuid) bson_append_binary(b, "ui", 2, BSON_SUBTYPE_UUID, e.uuid->data(), 16);
    BSON_APPEND_DOCUMENT(b, "o", e.o.get());
    if (e.o2) BSON_APPEND_DOCUMENT(b, "o2", e.o2->get());
    appendTimestamp(b, "ts", ts);
    BSON_APPEND_INT64(b, "t", 1);
    BSON_APPEND_INT32(b, "v", 2);
    BSON_APPEND_DATE_TIME(b, "wall", wallMillis);
    if (e.postImage) BSON_APPEND_DOCUMENT(b, "postImage", e.postImage->get());
    if (e.preImage) BSON_APPEND_DOCUMENT(b, "preImage", e.preImage->get());
    return d;
}

Oplog::Oplog(Catalog& catalog, LogicalClock& clock, int64_t maxBytes)
    : catalog_(catalog), clock_(clock), maxBytes_(maxBytes) {}

Status Oplog::open() {
    std::unique_lock lk(catalog_.ddlLock());
    auto coll = catalog_.lookup(kOplogNs);
    if (!coll) {
        auto sw = catalog_.createCollection(kOplogNs, nullptr, /*withIdIndex=*/false);
        if (!sw.isOK()) return sw.getStatus();
        coll = sw.getValue();
    }
    coll_ = coll;
    try {
        PooledSession s(catalog_.sessions());
        Cursor c = s->open(coll->uri);
        if (c->prev(c.get()) == 0) {
            int64_t rid;
            c->get_key(c.get(), &rid);
            clock_.advanceTo(Timestamp::fromU64(static_cast<uint64_t>(rid)));
        }
        c.close();
        // Anything older than the oldest entry counts as truncated.
        Timestamp first = oldest(*s);
        if (!first.isNull()) truncatedThrough_ = Timestamp::fromU64(first.asU64() - 1);
    } catch (const DBException& e) {
        return e.status();
    }
    lastCommitted_ = clock_.latest();
    return Status::OK();
}

Oplog::Unit::~Unit() {
    if (!done_ && !reserved_.empty()) log_.release(reserved_, false);
}

Timestamp Oplog::Unit::append(OplogEntry e) {
    if (buffer_) {
        buffer_->push_back(std::move(e));
        return {};
    }
    Timestamp ts;
    {
        std::lock_guard lk(log_.mu_);
        ts = log_.clock_.reserve();
        log_.pending_.insert(ts.asU64());
    }
    reserved_.push_back(ts);
    last_ = ts;
    // The data written in this transaction becomes visible at its oplog time to
    // readers at a timestamp (snapshot reads): the latest entry's time stamps
    // the updates made so far and those after.
    s_.setCommitTimestamp(ts.asU64());
    bson::Doc d = oplogEntryToBson(e, ts, wallNow());
    rs::insertWithRecordId(s_, *log_.coll_, static_cast<int64_t>(ts.asU64()), d.get());
    return ts;
}

bson::Doc applyOpsEntry(const std::vector<OplogEntry>& ops) {
    bson::Doc o;
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(o.mut(), "applyOps", &arr);
    for (size_t i = 0; i < ops.size(); ++i) {
        std::string k = std::to_string(i);
        bson::Doc one = oplogEntryToBson(ops[i], Timestamp{}, 0);
        // Inner operations carry no time or session fields of their own.
        bson::Doc trimmed;
        bson_iter_t it;
        bson_iter_init(&it, one.get());
        while (bson_iter_next(&it)) {
            std::string_view key = bson_iter_key(&it);
            if (key == "ts" || key == "t" || key == "v" || key == "wall") continue;
            bson::appendIter(trimmed.mut(), key, it);
        }
        BSON_APPEND_DOCUMENT(&arr, k.c_str(), trimmed.get());
    }
    bson_append_array_end(o.mut(), &arr);
    return o;
}

namespace {
thread_local Timestamp tlLastCommitted;
}  // namespace

Timestamp Oplog::lastCommittedOnThisThread() {
    return tlLastCommitted;
}
void Oplog::resetLastCommittedOnThisThread() {
    tlLastCommitted = Timestamp{};
}

std::vector<Timestamp> Oplog::Unit::committedLater() {
    done_ = true;
    for (auto t : reserved_)
        if (tlLastCommitted < t) tlLastCommitted = t;
    return std::move(reserved_);
}

void Oplog::Unit::committed() {
    done_ = true;
    if (!reserved_.empty()) log_.release(reserved_, true);
    for (auto t : reserved_)
        if (tlLastCommitted < t) tlLastCommitted = t;
}

void Oplog::release(const std::vector<Timestamp>& ts, bool committed) {
    std::vector<std::weak_ptr<asio::steady_timer>> wake;
    {
        std::lock_guard lk(mu_);
        for (auto t : ts) pending_.erase(t.asU64());
        if (committed) {
            for (auto t : ts)
                if (lastCommitted_ < t) lastCommitted_ = t;
            wake.swap(waiters_);
            commitSeq_++;
        }
    }
    for (auto& w : wake) {
        if (auto t = w.lock()) {
            asio::post(t->get_executor(), [w] {
                if (auto t2 = w.lock()) t2->cancel();
            });
        }
    }
}

Timestamp Oplog::visibleUpTo() const {
    std::lock_guard lk(mu_);
    if (pending_.empty()) return clock_.latest();
    return Timestamp::fromU64(*pending_.begin() - 1);
}

Timestamp Oplog::lastCommitted() const {
    std::lock_guard lk(mu_);
    return lastCommitted_;
}

Timestamp Oplog::truncatedThrough() const {
    std::lock_guard lk(mu_);
    return truncatedThrough_;
}

Timestamp Oplog::oldest(Session& s) const {
    Cursor c = s.open(coll_->uri);
    if (c->next(c.get()) != 0) return {};
    int64_t rid;
    c->get_key(c.get(), &rid);
    return Timestamp::fromU64(static_cast<uint64_t>(rid));
}

void Oplog::wakeOnNextCommit(std::weak_ptr<asio::steady_timer> timer) {
    std::lock_guard lk(mu_);
    std::erase_if(waiters_, [](const auto& w) { return w.expired(); });
    waiters_.push_back(std::move(timer));
}

void Oplog::truncateIfNeeded() {
    int64_t size = coll_->dataSize.load();
    if (size <= maxBytes_) return;
    std::unique_lock one(truncateMu_, std::try_to_lock);  // one truncator at a time
    if (!one.owns_lock()) return;
    // Remove the oldest entries until 90% of the cap, in small transactions.
    int64_t target = maxBytes_ * 9 / 10;
    try {
        PooledSession s(catalog_.sessions());
        while (coll_->dataSize.load() > target) {
            Txn txn(*s);
            Cursor c = s->open(coll_->uri);
            int removed = 0;
            int64_t freed = 0;
            while (removed < 1000 && coll_->dataSize.load() - freed > target &&
                   c->next(c.get()) == 0) {
                WT_ITEM v;
                int64_t rid;
                c->get_key(c.get(), &rid);
                c->get_value(c.get(), &v);
                freed += static_cast<int64_t>(v.size);
                wtCheck(c->remove(c.get()), "oplog truncate");
                ++removed;
                std::lock_guard lk(mu_);
                truncatedThrough_ = Timestamp::fromU64(static_cast<uint64_t>(rid));
            }
            c.close();
            txn.commit(false);
            coll_->dataSize -= freed;
            coll_->numRecords -= removed;
            if (removed == 0) break;
        }
    } catch (const DBException& e) {
        log::warning("replication", 21200, "Oplog truncation failed",
                     "{\"error\":" + log::quote(e.what()) + "}");
    }
}

}  // namespace halo::store
