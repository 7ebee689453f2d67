#include "tiering/protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "common/clock.h"
#include "common/log.h"
#include "tiering/cold_write.h"

namespace halo::tiering {

Id makeId(const bson_value_t& v) {
    Id d;
    bson_append_value(d.mut(), "v", 1, &v);
    return d;
}

const bson_value_t* idValue(const Id& id, bson_iter_t* it) {
    if (!bson_iter_init_find(it, id.get(), "v")) return nullptr;
    return bson_iter_value(it);
}

bool idOf(const bson_t* doc, Id* out) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id")) return false;
    *out = makeId(*bson_iter_value(&it));
    return true;
}

std::pair<std::string, std::string> splitNs(const std::string& ns) {
    auto dot = ns.find('.');
    return {ns.substr(0, dot), dot == std::string::npos ? "" : ns.substr(dot + 1)};
}

void appendIdIn(bson_t* out, const char* key, const std::vector<Id>& ids) {
    bson_t f, in, arr;
    bson_append_document_begin(out, key, -1, &f);
    bson_append_document_begin(&f, "_id", 3, &in);
    bson_append_array_begin(&in, "$in", 3, &arr);
    ArrayKey k;
    for (size_t i = 0; i < ids.size(); ++i) {
        bson_iter_t it;
        if (const bson_value_t* v = idValue(ids[i], &it)) bson_append_value(&arr, k(i), -1, v);
    }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&f, &in);
    bson_append_document_end(out, &f);
}

namespace {

/// Appends _id: {$in: [the tombstone keys of ids]} to an open filter.
void appendTombstoneKeys(bson_t* f, const Metadata& meta, const std::string& ns,
                         const std::vector<Id>& ids) {
    bson_t in, arr;
    bson_append_document_begin(f, "_id", 3, &in);
    bson_append_array_begin(&in, "$in", 3, &arr);
    ArrayKey k;
    for (size_t i = 0; i < ids.size(); ++i) meta.appendTombstoneKey(&arr, k(i), ns, ids[i]);
    bson_append_array_end(&in, &arr);
    bson_append_document_end(f, &in);
}

}  // namespace

void appendTombstoneIn(bson_t* out, const char* key, const Metadata& meta, const std::string& ns,
                       const std::vector<Id>& ids) {
    bson_t f;
    bson_append_document_begin(out, key, -1, &f);
    appendTombstoneKeys(&f, meta, ns, ids);
    bson_append_document_end(out, &f);
}

void Metadata::appendTombstoneKey(bson_t* out, const char* key, const std::string& ns,
                                  const Id& id) {
    bson_t k;
    bson_append_document_begin(out, key, -1, &k);
    BSON_APPEND_UTF8(&k, "ns", ns.c_str());
    bson_iter_t it;
    if (const bson_value_t* v = idValue(id, &it)) bson_append_value(&k, "id", 2, v);
    bson_append_document_end(out, &k);
}

bool truthy(const bson_t* d, const char* k) {
    bson_iter_t it;
    return bson_iter_init_find(&it, d, k) && bson_iter_as_bool(&it);
}

bool truthy(const bson::Fields& d, const char* k) {
    bson_iter_t it;
    return d.find(k, &it) && bson_iter_as_bool(&it);
}

void appendMajority(bson_t* cmd) {
    bson_t wc;
    BSON_APPEND_DOCUMENT_BEGIN(cmd, "writeConcern", &wc);
    BSON_APPEND_UTF8(&wc, "w", "majority");
    BSON_APPEND_BOOL(&wc, "j", true);
    bson_append_document_end(cmd, &wc);
}

namespace {

/// Attempts of a transaction that keeps conflicting (promotion against
/// evictions moving the epoch, deletes against writers) before the client gets
/// WriteConflict: about a second of jittered pauses in all.
constexpr int kTransientAttempts = 60;

/// A short, growing pause between retries of a conflicting transaction.
asio::awaitable<void> backoff(int attempt) {
    // Jittered, so writers that conflicted together do not retry in lockstep.
    thread_local std::minstd_rand rng{std::random_device{}()};
    int spread = 2 * std::min(attempt, 20) + 1;
    asio::steady_timer timer(co_await asio::this_coro::executor);
    timer.expires_after(std::chrono::milliseconds(1 + static_cast<int>(rng() % spread)));
    asio::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

Status coldWriteRunning() {
    return Status(ErrorCode::WriteConflict,
                  "halocline: a write runs on this document in the archive (a cold write)");
}

bson::Doc findIdsCommand(const std::string& db, const std::string& coll, const bson_t* filterDoc) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
    bson_concat(c.mut(), filterDoc);  // {filter: ...}
    bson_t proj;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "projection", &proj);
    BSON_APPEND_INT32(&proj, "_id", 1);
    bson_append_document_end(c.mut(), &proj);
    BSON_APPEND_INT32(c.mut(), "batchSize", 100000);
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    return c;
}

std::string epochId(const std::string& ns) {
    return "epoch:" + ns;
}

/// Where cold writes are counted: each finished one takes the next number
/// for its mark (cold_write.h).
std::string coldCountId(const std::string& ns) {
    return "cold:" + ns;
}

/// Field `n` of the state document `id` among `docs` (0 when absent).
int64_t counterFrom(const std::vector<bson::Doc>& docs, const std::string& id) {
    for (const auto& d : docs) {
        bson_iter_t it;
        if (bson::stringField(d.get(), "_id") != id) continue;
        if (bson_iter_init_find(&it, d.get(), "n") && BSON_ITER_HOLDS_NUMBER(&it))
            return bson_iter_as_int64(&it);
    }
    return 0;
}

}  // namespace

bson::Doc stateFind(const Metadata& meta, const std::vector<std::string>& ids) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", Metadata::kState);
    bson_t f, in, arr;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "filter", &f);
    BSON_APPEND_DOCUMENT_BEGIN(&f, "_id", &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
    ArrayKey key;
    for (size_t i = 0; i < ids.size(); ++i) BSON_APPEND_UTF8(&arr, key(i), ids[i].c_str());
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&f, &in);
    bson_append_document_end(c.mut(), &f);
    BSON_APPEND_UTF8(c.mut(), "$db", meta.db.c_str());
    return c;
}

CommandRunner fastRunner(Tiers& t) {
    Tier* fast = &t.fast;
    return [fast](const bson_t* c) { return fast->runOk(c); };
}

asio::awaitable<StatusWith<Epoch>> readEpoch(Tiers& t, const std::string& ns) {
    co_return co_await readEpochWith(fastRunner(t), t.meta, ns);
}

bson::Doc epochCommand(const Metadata& meta, const std::string& ns) {
    return stateFind(meta, {epochId(ns), coldCountId(ns)});
}

Epoch epochFrom(const std::vector<bson::Doc>& docs, const std::string& ns,
                std::chrono::steady_clock::time_point readAt) {
    Epoch e;
    e.readAt = readAt;
    e.departures = counterFrom(docs, epochId(ns));
    e.cold = counterFrom(docs, coldCountId(ns));
    return e;
}

asio::awaitable<StatusWith<Epoch>> readEpochWith(CommandRunner run, const Metadata& meta,
                                                 const std::string& ns) {
    const auto readAt = std::chrono::steady_clock::now();
    bson::Doc c = epochCommand(meta, ns);
    auto r = co_await collectWith(std::move(run), c.get());
    if (!r.isOK()) co_return r.getStatus();
    co_return epochFrom(r.getValue(), ns, readAt);
}

bson::Doc countColdWriteCommand(const Metadata& meta, const std::string& ns) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "findAndModify", Metadata::kState);
    bson_t q, u, inc;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "query", &q);
    BSON_APPEND_UTF8(&q, "_id", coldCountId(ns).c_str());
    bson_append_document_end(c.mut(), &q);
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "update", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT64(&inc, "n", 1);
    bson_append_document_end(&u, &inc);
    bson_append_document_end(c.mut(), &u);
    BSON_APPEND_BOOL(c.mut(), "upsert", true);
    BSON_APPEND_BOOL(c.mut(), "new", true);
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", meta.db.c_str());
    return c;
}

StatusWith<int64_t> coldCountFrom(const bson_t* reply) {
    Status s = replyStatus(reply);
    if (!s.isOK()) return s;
    bson_iter_t it;
    if (!bson::findDotted(reply, "value.n", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return Status(ErrorCode::InternalError, "halocline: no cold-write count in the reply");
    return bson_iter_as_int64(&it);
}

asio::awaitable<StatusWith<int64_t>> countColdWrite(Tiers& t, const std::string& ns) {
    bson::Doc c = countColdWriteCommand(t.meta, ns);
    auto r = co_await t.fast.run(c.get());
    if (!r.isOK()) co_return r.getStatus();
    co_return coldCountFrom(r.getValue().get());
}

/// Which of `ids` have a document in the fast tier's `ns`.
asio::awaitable<StatusWith<std::vector<bool>>> presentIn(Tiers& t, const std::string& ns,
                                                         const std::vector<Id>& ids) {
    co_return co_await presentInWith(fastRunner(t), ns, ids);
}

bson::Doc presentInCommand(const std::string& ns, const std::vector<Id>& ids) {
    auto [db, coll] = splitNs(ns);
    bson::Doc f;
    appendIdIn(f.mut(), "filter", ids);
    return findIdsCommand(db, coll, f.get());
}

/// Which of `ids` the documents `docs` (of a presentInCommand) name.
std::vector<bool> presentFrom(const std::vector<bson::Doc>& docs, const std::vector<Id>& ids) {
    std::unordered_set<std::string> found;
    for (auto& d : docs) {
        Id id;
        if (idOf(d.get(), &id)) found.insert(idKey(id));
    }
    std::vector<bool> out(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) out[i] = found.count(idKey(ids[i])) > 0;
    return out;
}

asio::awaitable<StatusWith<std::vector<bool>>> presentInWith(CommandRunner run,
                                                             const std::string& ns,
                                                             const std::vector<Id>& ids) {
    bson::Doc c = presentInCommand(ns, ids);
    auto docs = co_await collectWith(std::move(run), c.get());
    if (!docs.isOK()) co_return docs.getStatus();
    co_return presentFrom(docs.getValue(), ids);
}

asio::awaitable<StatusWith<KeyStates>> keyStates(Tiers& t, const std::string& ns,
                                                 const std::vector<Id>& ids) {
    co_return co_await keyStatesWith(fastRunner(t), t.meta, ns, ids);
}

bson::Doc retryCommand(const Metadata& meta, const bson_t* retryKey) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", Metadata::kRetries);
    bson_t f;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "filter", &f);
    BSON_APPEND_DOCUMENT(&f, "_id", retryKey);
    bson_append_document_end(c.mut(), &f);
    BSON_APPEND_UTF8(c.mut(), "$db", meta.db.c_str());
    return c;
}

std::optional<DeleteResult> retryFrom(const std::vector<bson::Doc>& docs) {
    std::optional<DeleteResult> out;
    if (docs.empty()) return out;
    DeleteResult d;
    bson_iter_t it;
    d.inArchive = bson_iter_init_find(&it, docs[0].get(), "inArchive");
    if (bson_iter_init_find(&it, docs[0].get(), "n")) d.n = bson_iter_as_int64(&it);
    bson_t v;
    if (bson::subDocument(docs[0].get(), "value", &v)) d.deleted = bson::Doc::copyOf(&v);
    out = std::move(d);
    return out;
}

bson::Doc keyStatesCommand(const Metadata& meta, const std::string& ns,
                           const std::vector<Id>& ids) {
    bson::Doc tc;
    BSON_APPEND_UTF8(tc.mut(), "find", Metadata::kTombstones);
    appendTombstoneIn(tc.mut(), "filter", meta, ns, ids);
    BSON_APPEND_INT32(tc.mut(), "batchSize", 100000);
    BSON_APPEND_UTF8(tc.mut(), "$db", meta.db.c_str());
    return tc;
}

KeyStates keyStatesFrom(std::vector<bson::Doc>& tombs, const std::vector<Id>& ids) {
    std::unordered_map<std::string, size_t> held;  // idKey -> index into tombs
    for (size_t i = 0; i < tombs.size(); ++i) {
        bson_iter_t it, sub;
        if (bson_iter_init_find(&it, tombs[i].get(), "_id") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "id"))
            held.emplace(idKey(makeId(*bson_iter_value(&sub))), i);
    }
    KeyStates out;
    out.dead.resize(ids.size());
    out.guarded.resize(ids.size());
    out.marks.resize(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
        auto h = held.find(idKey(ids[i]));
        if (h == held.end()) continue;
        bson::Doc& d = tombs[h->second];
        bson_iter_t it;
        if (bson_iter_init_find(&it, d.get(), kColdGuardField)) {
            out.guarded[i] = true;
            out.guards.push_back(d.copy());
        } else if (bson_iter_init_find(&it, d.get(), kColdMarkField)) {
            out.marks[i] = bson_iter_as_int64(&it);
        } else {
            out.dead[i] = true;
        }
    }
    return out;
}

asio::awaitable<StatusWith<KeyStates>> keyStatesWith(CommandRunner run, const Metadata& meta,
                                                     const std::string& ns,
                                                     const std::vector<Id>& ids) {
    bson::Doc tc = keyStatesCommand(meta, ns, ids);
    auto tombs = co_await collectWith(std::move(run), tc.get());
    if (!tombs.isOK()) co_return tombs.getStatus();
    co_return keyStatesFrom(tombs.getValue(), ids);
}

asio::awaitable<StatusWith<std::vector<bool>>> tombstonedIn(Tiers& t, const std::string& ns,
                                                            const std::vector<Id>& ids) {
    auto k = co_await keyStates(t, ns, ids);
    if (!k.isOK()) co_return k.getStatus();
    co_return std::move(k.getValue().dead);
}

asio::awaitable<StatusWith<FastPresence>> fastPresence(Tiers& t, const std::string& ns,
                                                       const std::vector<Id>& ids) {
    FastPresence out;
    if (ids.empty()) co_return out;
    // One round trip: the fast tier reads the collection, then the tombstone
    // keys, in that order, as if the second had waited for the first.
    bson::Doc pc = presentInCommand(ns, ids);
    bson::Doc kc = keyStatesCommand(t.meta, ns, ids);
    std::vector<const bson_t*> cmds{pc.get(), kc.get()};
    auto r = co_await collectAll(t.fast, cmds);
    if (!r.isOK()) co_return r.getStatus();
    KeyStates k = keyStatesFrom(r.getValue()[1], ids);
    out.present = presentFrom(r.getValue()[0], ids);
    out.tombstoned = std::move(k.dead);
    out.guarded = std::move(k.guarded);
    out.marks = std::move(k.marks);
    co_return out;
}

namespace {

/// A delete of whatever holds the tombstone keys of `ids`; with `markAtMost`,
/// only cold-write marks numbered at most that.
bson::Doc tombstoneKeysDelete(const Metadata& meta, const std::string& ns,
                              const std::vector<Id>& ids, const int64_t* markAtMost) {
    bson::Doc del;
    bson_t arr, stmt, q, lte;
    BSON_APPEND_UTF8(del.mut(), "delete", Metadata::kTombstones);
    BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    appendTombstoneKeys(&q, meta, ns, ids);
    if (markAtMost) {
        BSON_APPEND_DOCUMENT_BEGIN(&q, kColdMarkField, &lte);
        BSON_APPEND_INT64(&lte, "$lte", *markAtMost);
        bson_append_document_end(&q, &lte);
    }
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_INT32(&stmt, "limit", 0);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(del.mut(), &arr);
    BSON_APPEND_UTF8(del.mut(), "$db", meta.db.c_str());
    return del;
}

/// One promotion transaction over `docs` (CONSISTENCY.md, Promotion). Its
/// statements go in one round trip (Transaction::runAll): the fast tier runs
/// them in order as if each had waited for the one before, and we look at the
/// epoch it read before deciding to commit. When the epoch moved we abort, so
/// what the later statements wrote was never visible.
asio::awaitable<Status> promoteTxn(Tiers& t, const std::string& ns, const Epoch& epoch,
                                   const std::vector<const bson::Doc*>& docs, bool bypass,
                                   bool clearMarks) {
    auto [db, coll] = splitNs(ns);
    std::vector<Id> ids;
    for (auto* d : docs) {
        Id id;
        if (idOf(d->get(), &id)) ids.push_back(std::move(id));
    }
    std::vector<bson::Doc> stmts;
    stmts.push_back(stateFind(t.meta, {epochId(ns)}));
    // Marks of cold writes counted before the epoch was read: those writes
    // were in the archive before we read it (CONSISTENCY.md, Cold writes). A
    // newer mark stays, and our guard meets it.
    if (clearMarks) stmts.push_back(tombstoneKeysDelete(t.meta, ns, ids, &epoch.cold));
    // Guards: write every tombstone key, so a concurrent delete conflicts with us.
    bson::Doc guards;
    bson_t arr;
    BSON_APPEND_UTF8(guards.mut(), "insert", Metadata::kTombstones);
    BSON_APPEND_ARRAY_BEGIN(guards.mut(), "documents", &arr);
    ArrayKey key;
    for (size_t i = 0; i < ids.size(); ++i) {
        bson_t g;
        bson_append_document_begin(&arr, key(i), -1, &g);
        t.meta.appendTombstoneKey(&g, "_id", ns, ids[i]);
        BSON_APPEND_BOOL(&g, "promote", true);
        bson_append_document_end(&arr, &g);
    }
    bson_append_array_end(guards.mut(), &arr);
    BSON_APPEND_UTF8(guards.mut(), "$db", t.meta.db.c_str());
    stmts.push_back(std::move(guards));
    bson::Doc ins;
    BSON_APPEND_UTF8(ins.mut(), "insert", coll.c_str());
    BSON_APPEND_ARRAY_BEGIN(ins.mut(), "documents", &arr);
    for (size_t i = 0; i < docs.size(); ++i) bson_append_document(&arr, key(i), -1, docs[i]->get());
    bson_append_array_end(ins.mut(), &arr);
    if (bypass) BSON_APPEND_BOOL(ins.mut(), "bypassDocumentValidation", true);
    BSON_APPEND_UTF8(ins.mut(), "$db", db.c_str());
    stmts.push_back(std::move(ins));
    stmts.push_back(tombstoneKeysDelete(t.meta, ns, ids, nullptr));
    std::vector<const bson_t*> sent;
    for (auto& d : stmts) sent.push_back(d.get());

    auto lease = t.fastSessions.take();
    Transaction txn(t.fast, lease.lsid.get(), lease.txnNumber);
    Status st = Status::OK();
    auto replies = co_await txn.runAll(sent);
    for (auto& r : replies)
        if (!r.isOK()) {
            // The first failure; the statements after it found the transaction aborted.
            st = r.getStatus();
            break;
        }
    if (st.isOK() &&
        counterFrom(batchOf(replies[0].getValue().get()), epochId(ns)) != epoch.departures)
        st = Status(ErrorCode::WriteConflict, "departure epoch moved during promotion");
    if (st.isOK() && std::chrono::steady_clock::now() - epoch.readAt > kPromotionDeadline)
        // Marks this old may be swept: ours might be gone (Cold writes).
        st = Status(ErrorCode::WriteConflict, "promotion took too long; read again");
    if (st.isOK()) st = (co_await txn.commit()).getStatus();
    if (!st.isOK()) co_await txn.abort();
    t.fastSessions.give(std::move(lease));
    co_return st;
}

/// A promotion copies documents the archive already holds: a validator
/// copied from the archive must not refuse one that predates it (or that the
/// archive's validationLevel let through), so a copy the fast tier refuses
/// (121) is made again with bypassDocumentValidation. Only then: the proxy's
/// tier user needs that privilege only where a validator refuses a copy.
asio::awaitable<Status> promoteCopy(Tiers& t, const std::string& ns, const Epoch& epoch,
                                    const std::vector<const bson::Doc*>& docs, bool clearMarks) {
    Status st = co_await promoteTxn(t, ns, epoch, docs, false, clearMarks);
    if (st.code() == ErrorCode::DocumentValidationFailure)
        st = co_await promoteTxn(t, ns, epoch, docs, true, clearMarks);
    co_return st;
}

}  // namespace

asio::awaitable<StatusWith<int64_t>> promoteDocs(Tiers& t, const std::string& ns,
                                                 const Epoch& epoch,
                                                 const std::vector<bson::Doc>& docs,
                                                 bool clearMarks) {
    if (docs.empty()) co_return int64_t{0};
    std::vector<const bson::Doc*> all;
    for (auto& d : docs) all.push_back(&d);
    Status st = co_await promoteCopy(t, ns, epoch, all, clearMarks);
    if (st.isOK()) co_return static_cast<int64_t>(docs.size());
    if (st.code() != ErrorCode::DuplicateKey) co_return st;
    // Some are in the fast tier already or tombstoned (a client wrote them
    // first): leave those out and copy the rest in one transaction again.
    for (int round = 0; round < 3 && !all.empty(); ++round) {
        std::vector<Id> ids;
        for (auto* d : all) {
            Id id;
            idOf(d->get(), &id);
            ids.push_back(std::move(id));
        }
        auto known = co_await fastPresence(t, ns, ids);
        if (!known.isOK()) co_return known.getStatus();
        for (bool g : known.getValue().guarded)
            if (g)  // a cold write runs in the archive: copy up after it (callers retry)
                co_return coldWriteRunning();
        std::vector<const bson::Doc*> rest;
        for (size_t i = 0; i < all.size(); ++i) {
            if (known.getValue().present[i] || known.getValue().tombstoned[i]) continue;
            if (known.getValue().marks[i] > epoch.cold)  // perhaps after our archive read
                co_return Status(ErrorCode::WriteConflict,
                                 "halocline: a cold write changed a document during promotion");
            rest.push_back(all[i]);
        }
        if (rest.empty()) co_return int64_t{0};
        all = std::move(rest);
        clearMarks = true;
        st = co_await promoteCopy(t, ns, epoch, all, clearMarks);
        if (st.isOK()) co_return static_cast<int64_t>(all.size());
        if (st.code() != ErrorCode::DuplicateKey) co_return st;
    }
    // Still racing with clients: one transaction each.
    int64_t n = 0;
    for (auto* d : all) {
        std::vector<const bson::Doc*> single(1, d);
        Status one = co_await promoteCopy(t, ns, epoch, single, clearMarks);
        if (one.isOK())
            ++n;
        else if (one.code() != ErrorCode::DuplicateKey)
            co_return one;
    }
    co_return n;
}

namespace {

/// promoteIds for at most one chunk of ids. The common case, every id already
/// in the fast tier, costs one query. The epoch is read before the archive is.
asio::awaitable<StatusWith<int64_t>> promoteChunk(Tiers& t, const std::string& ns,
                                                  std::vector<Id> ids) {
    auto [db, coll] = splitNs(ns);
    Status last = Status::OK();
    std::optional<std::chrono::steady_clock::time_point> guardSeen;
    for (int attempt = 0; attempt < kTransientAttempts; ++attempt) {
        // One round trip: the fast tier reads the collection, the tombstone
        // keys and the epoch, in that order (all before the archive read).
        const auto readAt = std::chrono::steady_clock::now();
        bson::Doc pc = presentInCommand(ns, ids);
        bson::Doc kc = keyStatesCommand(t.meta, ns, ids);
        bson::Doc ec = epochCommand(t.meta, ns);
        std::vector<const bson_t*> cmds{pc.get(), kc.get(), ec.get()};
        auto got = co_await collectAll(t.fast, cmds);
        if (!got.isOK()) co_return got.getStatus();
        const Epoch epoch = epochFrom(got.getValue()[2], ns, readAt);
        const std::vector<bool> present = presentFrom(got.getValue()[0], ids);
        std::vector<Id> absent;
        for (size_t i = 0; i < ids.size(); ++i)
            if (!present[i]) absent.push_back(std::move(ids[i]));
        if (absent.empty()) co_return int64_t{0};
        KeyStates keys = keyStatesFrom(got.getValue()[1], absent);
        if (!keys.guards.empty()) {
            // A cold write runs in the archive (cold_write.h). Waiting for it
            // is no failed attempt: its writer finishes it, or, once it was
            // taken (or we first saw it) kColdGuardPatienceMillis ago, we do.
            const auto now = std::chrono::steady_clock::now();
            if (!guardSeen) guardSeen = now;
            const auto waited = now - *guardSeen;
            const auto patience = std::chrono::milliseconds(kColdGuardPatienceMillis);
            if (waited >= 3 * patience)
                co_return coldWriteRunning();  // new guards, again and again
            for (auto& g : keys.guards) {
                if (waited < patience && coldGuardAgeMillis(g.get()) < kColdGuardPatienceMillis)
                    continue;
                Status fin = co_await finishColdGuard(t, ns, g.get());
                if (!fin.isOK()) co_return fin;
            }
            ids = std::move(absent);
            --attempt;
            co_await backoff(3);
            continue;
        }
        std::vector<Id> rest;
        bool marked = false;  // marks seen before the epoch read are counted in it
        for (size_t i = 0; i < absent.size(); ++i) {
            if (keys.dead[i]) continue;
            marked = marked || keys.marks[i] > 0;
            rest.push_back(std::move(absent[i]));
        }
        if (rest.empty()) co_return int64_t{0};
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
        appendIdIn(c.mut(), "filter", rest);
        BSON_APPEND_INT32(c.mut(), "batchSize", 100000);
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto docs = co_await t.archive.collect(c.get());
        if (!docs.isOK()) co_return docs.getStatus();
        if (docs.getValue().empty()) co_return int64_t{0};
        auto r = co_await promoteDocs(t, ns, epoch, docs.getValue(), marked);
        if (r.isOK()) co_return r;
        last = r.getStatus();
        if (!isTransient(last)) co_return last;
        ids = std::move(rest);
        co_await backoff(attempt);
    }
    if (last.code() != ErrorCode::WriteConflict) co_return last;
    co_return Status(ErrorCode::WriteConflict,
                     fmt::format("halocline: could not copy documents up from the archive "
                                 "after {} attempts: ",
                                 kTransientAttempts) +
                         last.reason());
}

}  // namespace

asio::awaitable<StatusWith<int64_t>> promoteIds(Tiers& t, const std::string& ns,
                                                const std::vector<Id>& ids) {
    constexpr size_t kChunk = 1000;
    int64_t total = 0;
    for (size_t start = 0; start < ids.size(); start += kChunk) {
        std::vector<Id> chunk;
        for (size_t i = start; i < ids.size() && i < start + kChunk; ++i)
            chunk.push_back(ids[i].copy());
        auto r = co_await promoteChunk(t, ns, std::move(chunk));
        if (!r.isOK()) co_return r;
        total += r.getValue();
    }
    co_return total;
}

namespace {

/// The age (ms) of a document's age field; nullopt when it has none the
/// evictor would act on (so the document is never evicted).
std::optional<int64_t> ageMillis(const bson_t* doc, const CollectionPolicy& p) {
    bson_iter_t it;
    if (!bson::findDotted(doc, p.ageField, &it)) return std::nullopt;
    if (BSON_ITER_HOLDS_DATE_TIME(&it)) return bson_iter_date_time(&it);
    if (BSON_ITER_HOLDS_OID(&it))
        return static_cast<int64_t>(bson_oid_get_time_t(bson_iter_oid(&it))) * 1000;
    return std::nullopt;
}

}  // namespace

bson::Doc matchOptionsOf(const bson::Fields& cmd, const bson_t* stmt) {
    bson_t c, l;
    bool collation = stmt && bson::subDocument(stmt, "collation", &c);
    if (!collation) collation = cmd.subDocument("collation", &c);
    const bool let = cmd.subDocument("let", &l);
    bson::Doc out;
    if (collation) BSON_APPEND_DOCUMENT(out.mut(), "collation", &c);
    if (let) BSON_APPEND_DOCUMENT(out.mut(), "let", &l);
    return out;
}

bool collated(const bson_t* matchOptions) {
    return matchOptions && bson_has_field(matchOptions, "collation");
}

namespace {

/// A find of the ids of documents matching `filter` (with the age field),
/// under the client's `matchOptions` (matchOptionsOf).
bson::Doc matchingIdsCommand(const std::string& ns, const bson_t* filterDoc,
                             const CollectionPolicy* p, const bson_t* matchOptions = nullptr,
                             int64_t limit = 0) {
    auto [db, coll] = splitNs(ns);
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
    bson_concat(c.mut(), filterDoc);
    if (matchOptions) bson_concat(c.mut(), matchOptions);
    if (limit > 0) BSON_APPEND_INT64(c.mut(), "limit", limit);
    bson_t proj;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "projection", &proj);
    BSON_APPEND_INT32(&proj, "_id", 1);
    if (p && p->ageField != "_id") BSON_APPEND_INT32(&proj, p->ageField.c_str(), 1);
    bson_append_document_end(c.mut(), &proj);
    BSON_APPEND_INT32(c.mut(), "batchSize", 100000);
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    return c;
}

/// Those documents in `tier`.
asio::awaitable<StatusWith<std::vector<bson::Doc>>> matchingIds(
    Tier& tier, const std::string& ns, const bson_t* filterDoc, const CollectionPolicy* p,
    const bson_t* matchOptions = nullptr, int64_t limit = 0) {
    bson::Doc c = matchingIdsCommand(ns, filterDoc, p, matchOptions, limit);
    co_return co_await tier.collect(c.get());
}

/// Writes the pins (n += 1, at = now), durably. Retries write conflicts with
/// the evictor's transaction on the same pin. One update command per id, all
/// sent in one round trip: each is retried alone, never applied twice, and no
/// tier has to resume a command of several statements half done (CONSISTENCY.md,
/// Pins).
asio::awaitable<Status> pinIds(Tiers& t, const std::string& ns, const std::vector<Id>& ids,
                               int delta) {
    if (ids.empty()) co_return Status::OK();
    std::vector<bson::Doc> cmds;
    cmds.reserve(ids.size());
    for (const Id& id : ids) {
        bson::Doc up;
        BSON_APPEND_UTF8(up.mut(), "update", Metadata::kPins);
        bson_t arr, stmt, q, u, inc, set;
        BSON_APPEND_ARRAY_BEGIN(up.mut(), "updates", &arr);
        bson_append_document_begin(&arr, "0", -1, &stmt);
        BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
        t.meta.appendTombstoneKey(&q, "_id", ns, id);
        bson_append_document_end(&stmt, &q);
        BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
        BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
        BSON_APPEND_INT32(&inc, "n", delta);
        bson_append_document_end(&u, &inc);
        if (delta > 0) {
            BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
            BSON_APPEND_DATE_TIME(&set, "at", wallMillis());
            bson_append_document_end(&u, &set);
        }
        bson_append_document_end(&stmt, &u);
        BSON_APPEND_BOOL(&stmt, "upsert", delta > 0);
        bson_append_document_end(&arr, &stmt);
        bson_append_array_end(up.mut(), &arr);
        appendMajority(up.mut());
        BSON_APPEND_UTF8(up.mut(), "$db", t.meta.db.c_str());
        cmds.push_back(std::move(up));
    }
    std::vector<const bson_t*> pending;
    for (auto& c : cmds) pending.push_back(c.get());
    Status last = Status::OK();
    for (int attempt = 0; attempt < 50; ++attempt) {
        auto r = co_await t.fast.runAll(pending);
        if (!r.isOK()) co_return r.getStatus();
        std::vector<const bson_t*> again;
        for (size_t i = 0; i < pending.size(); ++i) {
            Status s = replyStatus(r.getValue()[i].get());
            if (s.isOK()) continue;
            if (s.code() != ErrorCode::WriteConflict) co_return s;
            last = s;
            again.push_back(pending[i]);
        }
        if (again.empty()) co_return Status::OK();
        pending = std::move(again);
        asio::steady_timer timer(co_await asio::this_coro::executor);
        timer.expires_after(std::chrono::milliseconds(2 + attempt));
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return last;
}

/// Pins `toPin`, then promotes what of it is missing from the fast tier.
asio::awaitable<StatusWith<Pinned>> pinAndPromote(Tiers& t, const std::string& ns,
                                                  std::vector<Id> toPin) {
    Pinned out{ns, {}};
    if (toPin.empty()) co_return out;
    Status s = co_await pinIds(t, ns, toPin, +1);
    if (!s.isOK()) co_return s;
    out.ids = std::move(toPin);
    // After the pins are durable no eviction can remove these; anything the
    // evictor removed before is missing now and is promoted here.
    auto r = co_await promoteIds(t, ns, out.ids);
    if (!r.isOK()) {
        co_await unpin(t, out);
        co_return r.getStatus();
    }
    co_return out;
}

}  // namespace

asio::awaitable<void> unpin(Tiers& t, const Pinned& pins) {
    (void)co_await pinIds(t, pins.ns, pins.ids, -1);
}

asio::awaitable<StatusWith<Pinned>> prepareWrite(Tiers& t, const CollectionPolicy& p, Millis guard,
                                                 const std::vector<Id>& ids,
                                                 const PrepareOptions& o) {
    if (ids.empty()) co_return Pinned{p.ns, {}};
    int64_t evictableBelow = wallMillis() - p.horizon.count() + guard.count();
    std::vector<Id> toPin, absent;
    // One round trip: the presence query, then (as asked) the tombstone keys
    // and the retry record, which the fast tier reads in that order.
    bson::Doc f;
    appendIdIn(f.mut(), "filter", ids);
    std::vector<bson::Doc> cmds;
    cmds.push_back(matchingIdsCommand(p.ns, f.get(), &p));
    if (o.keysUpFront) cmds.push_back(keyStatesCommand(t.meta, p.ns, ids));
    if (o.retryKey) cmds.push_back(retryCommand(t.meta, o.retryKey));
    std::vector<const bson_t*> sent;
    for (auto& c : cmds) sent.push_back(c.get());
    auto got = co_await collectAll(t.fast, sent);
    if (!got.isOK()) co_return got.getStatus();
    Pinned out{p.ns, {}};
    if (o.retryKey) {
        out.retryRead = true;
        out.retry = retryFrom(got.getValue().back());
    }
    std::unordered_set<std::string> found;
    for (auto& d : got.getValue()[0]) {
        Id id;
        if (!idOf(d.get(), &id)) continue;
        found.insert(idKey(id));
        auto age = ageMillis(d.get(), p);
        if (age && *age < evictableBelow) toPin.push_back(std::move(id));
    }
    for (auto& id : ids)
        if (!found.count(idKey(id))) absent.push_back(id.copy());
    if (!absent.empty()) {
        // Absent ids that exist in the archive (and are not tombstoned) will be promoted.
        StatusWith<KeyStates> keys = KeyStates{};
        if (o.keysUpFront)
            keys = keyStatesFrom(got.getValue()[1], absent);
        else
            keys = co_await keyStates(t, p.ns, absent);
        if (!keys.isOK()) co_return keys.getStatus();
        // (A guard this statement's first attempt holds: a retry of a cold
        // write, which the cold path finishes and the archive answers.)
        const bool mine = keys.getValue().guarded[0] && o.retryKey &&
                          sameRetry(keys.getValue().guards[0].get(), o.retryKey);
        if (o.coldOk && ids.size() == 1 && !keys.getValue().dead[0] &&
            (!keys.getValue().guarded[0] || mine)) {
            out.cold = true;
            co_return out;
        }
        std::vector<Id> rest;
        for (size_t i = 0; i < absent.size(); ++i)
            if (!keys.getValue().dead[i]) rest.push_back(std::move(absent[i]));
        if (!rest.empty()) {
            bson::Doc af;
            appendIdIn(af.mut(), "filter", rest);
            auto inArchive = co_await matchingIds(t.archive, p.ns, af.get(), nullptr);
            if (!inArchive.isOK()) co_return inArchive.getStatus();
            for (auto& d : inArchive.getValue()) {
                Id id;
                if (idOf(d.get(), &id)) toPin.push_back(std::move(id));
            }
        }
    }
    // A promotion may follow a cold write of this statement, whose record is
    // written before its guard goes: the record is read again after it.
    if (!toPin.empty()) out.retryRead = false;
    auto pinned = co_await pinAndPromote(t, p.ns, std::move(toPin));
    if (!pinned.isOK()) co_return pinned.getStatus();
    out.ids = std::move(pinned.getValue().ids);
    co_return out;
}

asio::awaitable<StatusWith<Pinned>> prepareWriteMatching(Tiers& t, const CollectionPolicy& p,
                                                         Millis guard, const bson_t* filter,
                                                         const bson_t* matchOptions,
                                                         int64_t archiveCap) {
    int64_t evictableBelow = wallMillis() - p.horizon.count() + guard.count();
    bson::Doc f;
    BSON_APPEND_DOCUMENT(f.mut(), "filter", filter);
    std::vector<Id> toPin;
    std::unordered_set<std::string> seen;
    auto fast = co_await matchingIds(t.fast, p.ns, f.get(), &p, matchOptions);
    if (!fast.isOK()) co_return fast.getStatus();
    for (auto& d : fast.getValue()) {
        Id id;
        if (!idOf(d.get(), &id)) continue;
        auto age = ageMillis(d.get(), p);
        if (age && *age < evictableBelow && seen.insert(idKey(id)).second)
            toPin.push_back(std::move(id));
    }
    auto archive = co_await matchingIds(t.archive, p.ns, f.get(), nullptr, matchOptions,
                                        archiveCap > 0 ? archiveCap + 1 : 0);
    if (!archive.isOK()) co_return archive.getStatus();
    if (archiveCap > 0 && static_cast<int64_t>(archive.getValue().size()) > archiveCap)
        co_return Status(ErrorCode::TransactionTooLarge,
                         fmt::format("halocline: the statement matches more than "
                                     "tiering.transactionPromotionLimit ({}) documents of {} "
                                     "that live in the archive, which a transaction would have "
                                     "to copy up to the fast tier first; narrow its filter (an "
                                     "age bound or _ids) or raise the limit",
                                     archiveCap, p.ns));
    for (auto& d : archive.getValue()) {
        Id id;
        if (idOf(d.get(), &id) && seen.insert(idKey(id)).second) toPin.push_back(std::move(id));
    }
    co_return co_await pinAndPromote(t, p.ns, std::move(toPin));
}

asio::awaitable<StatusWith<int64_t>> promoteMatching(Tiers& t, const std::string& ns,
                                                     const bson_t* filter) {
    auto [db, coll] = splitNs(ns);
    bson::Doc f;
    BSON_APPEND_DOCUMENT(f.mut(), "filter", filter);
    bson::Doc c = findIdsCommand(db, coll, f.get());
    auto docs = co_await t.archive.collect(c.get());
    if (!docs.isOK()) co_return docs.getStatus();
    std::vector<Id> ids;
    for (auto& d : docs.getValue()) {
        Id id;
        if (idOf(d.get(), &id)) ids.push_back(std::move(id));
    }
    co_return co_await promoteIds(t, ns, ids);
}

asio::awaitable<StatusWith<std::optional<DeleteResult>>> findRetry(Tiers& t,
                                                                   const bson_t* retryKey) {
    bson::Doc c = retryCommand(t.meta, retryKey);
    auto r = co_await t.fast.collect(c.get());
    if (!r.isOK()) co_return r.getStatus();
    co_return retryFrom(r.getValue());
}

asio::awaitable<StatusWith<DeleteResult>> deleteAndTombstone(
    CommandRunner run, const Metadata& meta, const std::string& ns, const bson_t* filter, int limit,
    const bson_t* sort, const bson_t* matchOptions) {
    auto [db, coll] = splitNs(ns);
    DeleteResult out;
    std::vector<Id> ids;
    if (limit == 1) {
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "findAndModify", coll.c_str());
        BSON_APPEND_DOCUMENT(c.mut(), "query", filter);
        if (sort) BSON_APPEND_DOCUMENT(c.mut(), "sort", sort);
        if (matchOptions) bson_concat(c.mut(), matchOptions);
        BSON_APPEND_BOOL(c.mut(), "remove", true);
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await run(c.get());
        if (!r.isOK()) co_return r.getStatus();
        bson_t v;
        if (bson::subDocument(r.getValue().get(), "value", &v)) {
            Id id;
            if (idOf(&v, &id)) ids.push_back(std::move(id));
            out.deleted = bson::Doc::copyOf(&v);
        }
    } else {
        bson::Doc f;
        BSON_APPEND_DOCUMENT(f.mut(), "filter", filter);
        bson::Doc c = findIdsCommand(db, coll, f.get());
        if (matchOptions) bson_concat(c.mut(), matchOptions);
        auto r = co_await collectWith(run, c.get());
        if (!r.isOK()) co_return r.getStatus();
        for (auto& d : r.getValue()) {
            Id id;
            if (idOf(d.get(), &id)) ids.push_back(std::move(id));
        }
        if (!ids.empty()) {
            bson::Doc del;
            BSON_APPEND_UTF8(del.mut(), "delete", coll.c_str());
            bson_t arr, stmt;
            BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
            appendIdIn(&stmt, "q", ids);
            BSON_APPEND_INT32(&stmt, "limit", 0);
            bson_append_document_end(&arr, &stmt);
            bson_append_array_end(del.mut(), &arr);
            BSON_APPEND_UTF8(del.mut(), "$db", db.c_str());
            auto dr = co_await run(del.get());
            if (!dr.isOK()) co_return dr.getStatus();
        }
    }
    out.n = static_cast<int64_t>(ids.size());
    if (!ids.empty()) {
        bson_oid_t version;
        bson_oid_init(&version, nullptr);
        bson::Doc up;
        BSON_APPEND_UTF8(up.mut(), "update", Metadata::kTombstones);
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(up.mut(), "updates", &arr);
        ArrayKey key;
        for (size_t i = 0; i < ids.size(); ++i) {
            bson_t stmt, q, u;
            bson_append_document_begin(&arr, key(i), -1, &stmt);
            BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
            meta.appendTombstoneKey(&q, "_id", ns, ids[i]);
            bson_append_document_end(&stmt, &q);
            BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
            BSON_APPEND_OID(&u, "v", &version);
            bson_append_document_end(&stmt, &u);
            BSON_APPEND_BOOL(&stmt, "upsert", true);
            bson_append_document_end(&arr, &stmt);
        }
        bson_append_array_end(up.mut(), &arr);
        BSON_APPEND_UTF8(up.mut(), "$db", meta.db.c_str());
        auto ur = co_await run(up.get());
        if (!ur.isOK()) co_return ur.getStatus();
    }
    co_return out;
}

asio::awaitable<StatusWith<DeleteResult>> deleteWithTombstones(Tiers& t, const std::string& ns,
                                                               const bson_t* filter, int limit,
                                                               const bson_t* sort,
                                                               const bson_t* matchOptions,
                                                               const bson_t* retryKey) {
    Status last = Status::OK();
    for (int attempt = 0; attempt < kTransientAttempts; ++attempt) {
        auto lease = t.appSessions.take();
        Transaction txn(t.fast, lease.lsid.get(), lease.txnNumber);
        DeleteResult out;
        Status st = Status::OK();
        do {
            auto removed =
                co_await deleteAndTombstone([&txn](const bson_t* x) { return txn.run(x); }, t.meta,
                                            ns, filter, limit, sort, matchOptions);
            if (!removed.isOK()) {
                st = removed.getStatus();
                break;
            }
            out = std::move(removed.getValue());
            if (retryKey) {
                bson::Doc rec;
                BSON_APPEND_UTF8(rec.mut(), "insert", Metadata::kRetries);
                bson_t arr, d;
                BSON_APPEND_ARRAY_BEGIN(rec.mut(), "documents", &arr);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &d);
                BSON_APPEND_DOCUMENT(&d, "_id", retryKey);
                BSON_APPEND_INT64(&d, "n", out.n);
                if (out.deleted) BSON_APPEND_DOCUMENT(&d, "value", out.deleted->get());
                BSON_APPEND_DATE_TIME(&d, "at", wallMillis());
                bson_append_document_end(&arr, &d);
                bson_append_array_end(rec.mut(), &arr);
                BSON_APPEND_UTF8(rec.mut(), "$db", t.meta.db.c_str());
                auto rr = co_await txn.run(rec.get());
                if (!rr.isOK()) {
                    st = rr.getStatus();
                    break;
                }
            }
            auto cr = co_await txn.commit();
            if (!cr.isOK()) {
                st = cr.getStatus();
                break;
            }
            bson_iter_t it;
            if (bson_iter_init_find(&it, cr.getValue().get(), "operationTime"))
                bson_append_iter(out.operationTime.mut(), "t", 1, &it);
        } while (false);
        if (st.isOK()) {
            t.appSessions.give(std::move(lease));
            co_return std::move(out);
        }
        co_await txn.abort();
        t.appSessions.give(std::move(lease));
        // Redoing a delete that did commit would find nothing and answer n: 0.
        if (!isTransient(st) || txn.commitUnknown()) co_return st;
        last = st;
        co_await backoff(attempt);
    }
    // A tier that stayed unreachable is a network error, not a conflict.
    if (last.code() != ErrorCode::WriteConflict) co_return last;
    co_return Status(ErrorCode::WriteConflict,
                     "halocline: delete kept conflicting with concurrent writes: " + last.reason());
}

}  // namespace halo::tiering
