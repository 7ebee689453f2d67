// Reads of tiered collections (CONSISTENCY.md, Reads, Merged reads) and cursors.
#include <fmt/format.h>

#include "common/clock.h"
#include "common/log.h"
#include "tiering/client_connection.h"
#include "tiering/merged_read.h"

namespace halo::tiering {

namespace {

/// A batch is at most this many bytes of documents (at least one document), as mongod's.
constexpr size_t kBatchBytes = 16 * 1024 * 1024;
/// The first batch of a find or an aggregate without a batchSize, as mongod's.
constexpr int64_t kDefaultFirstBatch = 101;

/// Where a batch of at most `most` documents (0: no count limit) from `begin` ends.
size_t batchEnd(const std::vector<bson::Doc>& docs, size_t begin, int64_t most) {
    size_t end = begin, bytes = 0;
    while (end < docs.size() && (most <= 0 || static_cast<int64_t>(end - begin) < most)) {
        bytes += docs[end].get()->len;
        if (end > begin && bytes > kBatchBytes) break;
        ++end;
    }
    return end;
}

/// {cursor: {<key>: docs[begin, end), id, ns}}.
void appendBatch(bson_t* out, const char* key, const std::string& ns,
                 const std::vector<bson::Doc>& docs, size_t begin, size_t end, int64_t id) {
    bson_t cursor, batch;
    BSON_APPEND_DOCUMENT_BEGIN(out, "cursor", &cursor);
    bson_append_array_begin(&cursor, key, -1, &batch);
    ArrayKey k;
    for (size_t i = begin; i < end; ++i)
        bson_append_document(&batch, k(i - begin), -1, docs[i].get());
    bson_append_array_end(&cursor, &batch);
    BSON_APPEND_INT64(&cursor, "id", id);
    BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
    bson_append_document_end(out, &cursor);
}

/// The batchSize a find or an aggregate asks for its first batch (the default: 101).
int64_t firstBatchSize(std::string_view name, const bson_t* cmd) {
    bson_iter_t it;
    bson_t cursor;
    if (name == "find" && bson_iter_init_find(&it, cmd, "batchSize") && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    if (name == "aggregate" && bson::subDocument(cmd, "cursor", &cursor) &&
        bson_iter_init_find(&it, &cursor, "batchSize") && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return kDefaultFirstBatch;
}

}  // namespace

bson::Doc ClientConnection::mergedReply(const MergedShape& shape, std::string_view name,
                                        const bson_t* cmd, const std::string& ns,
                                        std::vector<bson::Doc> docs) {
    bson::Doc d;
    if (!shape.documents()) {
        shape.appendReply(d.mut(), ns, docs);
    } else {
        // The first batch as the client asked (mongod's default and byte limit);
        // the rest stays in the proxy for its getMores.
        const int64_t first = firstBatchSize(name, cmd);
        size_t end = first == 0 ? 0 : batchEnd(docs, 0, first);
        int64_t id = 0;
        if (end < docs.size() && !truthy(cmd, "singleBatch")) {
            CursorEntry e;
            e.ns = ns;
            e.buffered = std::make_shared<BufferedCursor>();
            e.buffered->docs.assign(std::make_move_iterator(docs.begin() + end),
                                    std::make_move_iterator(docs.end()));
            docs.resize(end);
            id = addCursor(std::move(e));
        }
        appendBatch(d.mut(), "firstBatch", ns, docs, 0, end, id);
    }
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    appendClock(d.mut(), p_.state().fastClusterTime.load());
    return d;
}

bson::Doc ClientConnection::bufferedGetMore(const CursorEntry& e, int64_t id, const bson_t* cmd) {
    bson_iter_t it;
    int64_t most = 0;
    if (bson_iter_init_find(&it, cmd, "batchSize") && BSON_ITER_HOLDS_NUMBER(&it))
        most = bson_iter_as_int64(&it);
    bson::Doc d;
    {
        BufferedCursor& b = *e.buffered;
        std::lock_guard lk(b.mu);
        size_t begin = b.next;
        size_t end = batchEnd(b.docs, begin, most);
        b.next = end;
        const bool done = end == b.docs.size();
        if (done)
            p_.cursors().erase(id);
        else
            p_.cursors().touch(id);
        appendBatch(d.mut(), "nextBatch", e.ns, b.docs, begin, end, done ? 0 : id);
    }
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    appendClock(d.mut(), p_.state().fastClusterTime.load());
    return d;
}

bson::Doc getMoreBody(const bson_t* cmd, int64_t remoteId) {
    bson::Doc body;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        // lsid, txnNumber and autocommit go along: the tier checks that they
        // match the cursor's (a cursor opened in a transaction reads its snapshot).
        if (k == "$clusterTime" || k == "recoveryToken") continue;
        if (k == "getMore") {
            BSON_APPEND_INT64(body.mut(), "getMore", remoteId);
            continue;
        }
        bson_append_iter(body.mut(), nullptr, 0, &it);
    }
    return body;
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
    if (p_.config().enableTestCommands)
        if (auto failed = failGetMoreAfterCheckout(cmd, *e, id)) co_return std::move(*failed);
    if (e->buffered) co_return bufferedGetMore(*e, id, cmd);
    if (e->merged) co_return co_await mergedGetMore(*e, id, cmd);
    bson::Doc body = getMoreBody(cmd, e->remoteId);
    wire::OpMsg none;
    auto r = co_await send(*e->tier, none, body.get());
    if (!r.isOK()) co_return e->changeStream ? streamError(r.getStatus()) : errorDoc(r.getStatus());
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
    // (The command's field index when this is the running command: no scan of
    // the whole command for a readConcern most reads do not carry.)
    bson_t rc;
    const bool hasReadConcern = fields_ && fields_->doc() == cmd
                                    ? fields_->subDocument("readConcern", &rc)
                                    : bson::subDocument(cmd, "readConcern", &rc);
    if (hasReadConcern && str(&rc, "level") == "snapshot")
        co_return co_await snapshotRead(p, name, msg, cmd);
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
        std::optional<bson::Fields> ownFields;
        std::vector<Id> ids;
        ids.push_back(d.lookupId->copy());
        bool wasPresent = false;
        // A promotion of what the archive answers (below) needs the epoch read
        // before the archive is: it comes with the tombstone check.
        const bool mayPromote = p.promoteOnRead && p_.config().workersEnabled;
        std::optional<Epoch> epoch;
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
            // (Asked only of an empty answer: most lookups find their document.)
            if (!answered && plainIdLookup(fieldsOf(cmd, ownFields))) {
                // Nothing but the _id: empty means absent when the fast tier
                // read. Tombstoned: deleted, the empty answer stands. Else the
                // archive is current (invariant A). (With the epoch, in one
                // round trip, when the answer may be copied up.)
                const auto readAt = std::chrono::steady_clock::now();
                bson::Doc kc = keyStatesCommand(p_.tiers().meta, p.ns, ids);
                bson::Doc ec = epochCommand(p_.tiers().meta, p.ns);
                std::vector<const bson_t*> cmds{kc.get()};
                if (mayPromote) cmds.push_back(ec.get());
                auto got = co_await collectAll(p_.fast(), cmds);
                if (!got.isOK()) co_return errorDoc(got.getStatus());
                answered = keyStatesFrom(got.getValue()[0], ids).dead[0];
                if (mayPromote) epoch = epochFrom(got.getValue()[1], p.ns, readAt);
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
        if (mayPromote) {
            // Copy it up in the background when it is inside the horizon:
            // the version just read, when the epoch was read before it
            // (CONSISTENCY.md, Promotion), else from the archive again.
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
                    if (epoch)
                        p_.readPromotions().add(p.ns, *epoch, bson::Doc::copyOf(v.get()));
                    else
                        p_.readPromotions().addId(p.ns, d.lookupId->copy());
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
                co_return mergedReply(*shape, name, cmd, p.ns, std::move(merged.getValue()));
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

}  // namespace halo::tiering
