// Change streams on tiered collections (CONSISTENCY.md, Change streams).
#include <fmt/format.h>

#include <asio/experimental/awaitable_operators.hpp>

#include "tiering/client_connection.h"

namespace halo::tiering {

/// One tier's reply to a stream's aggregate or getMore, taken apart.
struct StreamBatch {
    int64_t cursorId = 0;
    std::string ns;
    std::vector<bson::Doc> events;
    std::optional<bson::Doc> postBatchToken;
};

namespace {

/// A merged stream's resume token: how far the client has seen each tier's
/// stream, {_halocline: {fast: <token>, archive: <token>}}. Opaque to drivers,
/// which only send it back.
bson::Doc mergedToken(const bson_t* fast, const bson_t* archive) {
    bson::Doc t;
    bson_t in;
    BSON_APPEND_DOCUMENT_BEGIN(t.mut(), "_halocline", &in);
    BSON_APPEND_DOCUMENT(&in, "fast", fast);
    BSON_APPEND_DOCUMENT(&in, "archive", archive);
    bson_append_document_end(t.mut(), &in);
    return t;
}

/// The two tiers' tokens of a merged token; false when `token` is not one.
bool splitToken(const bson_t* token, bson_t* fast, bson_t* archive) {
    bson_t in;
    return bson_count_keys(token) == 1 && bson::subDocument(token, "_halocline", &in) &&
           bson::subDocument(&in, "fast", fast) && bson::subDocument(&in, "archive", archive);
}

/// `body` with its pipeline replaced by `stages`.
bson::Doc withPipeline(const bson_t* body, const bson_t* stages) {
    bson::Doc out = bson::copyWithout(body, {"pipeline", "$db"});
    BSON_APPEND_ARRAY(out.mut(), "pipeline", stages);
    BSON_APPEND_UTF8(out.mut(), "$db", str(body, "$db").c_str());
    return out;
}

/// {"ns.db": db, "ns.coll": coll} for each tiered collection of `scope`.
void appendNamespaces(bson_t* arr, const std::vector<const CollectionPolicy*>& scope, ArrayKey& key,
                      size_t& n) {
    for (const CollectionPolicy* p : scope) {
        auto [db, coll] = splitNs(p->ns);
        bson_t one;
        bson_append_document_begin(arr, key(n++), -1, &one);
        BSON_APPEND_UTF8(&one, "ns.db", db.c_str());
        BSON_APPEND_UTF8(&one, "ns.coll", coll.c_str());
        bson_append_document_end(arr, &one);
    }
}

StreamBatch takeApart(const bson_t* reply) {
    StreamBatch b;
    bson_t cursor;
    if (!bson::subDocument(reply, "cursor", &cursor)) return b;
    b.ns = str(&cursor, "ns");
    bson_iter_t it;
    if (bson_iter_init_find(&it, &cursor, "id")) b.cursorId = bson_iter_as_int64(&it);
    bson_t batch, pbrt;
    if (bson::subDocument(&cursor, "firstBatch", &batch) ||
        bson::subDocument(&cursor, "nextBatch", &batch)) {
        bson_iter_init(&it, &batch);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            b.events.push_back(bson::Doc::copyOf(data, len));
        }
    }
    if (bson::subDocument(&cursor, "postBatchResumeToken", &pbrt))
        b.postBatchToken = bson::Doc::copyOf(&pbrt);
    return b;
}

int64_t wallTimeOf(const bson::Doc& event) {
    bson_iter_t it;
    return bson_iter_init_find(&it, event.get(), "wallTime") && BSON_ITER_HOLDS_DATE_TIME(&it)
               ? bson_iter_date_time(&it)
               : 0;
}

/// The request for one tier, run concurrently with the other's.
asio::awaitable<StatusWith<bson::Doc>> roundTripBody(Tier& tier, Frame request) {
    auto r = co_await tier.roundTrip(std::move(request));
    if (!r.isOK()) co_return r.getStatus();
    co_return bodyOf(r.getValue());
}

/// The reply to a merged stream's aggregate or getMore when a tier failed: a
/// tier's own error reply (its labels tell the driver whether to resume), else
/// the proxy's error, labelled resumable when mongod would label it so (a
/// network or retriable error: the driver resumes from its last merged token).
bson::Doc streamFailure(const StatusWith<bson::Doc>& fast, const StatusWith<bson::Doc>& archive) {
    for (const auto* r : {&fast, &archive})
        if (r->isOK() && !replyStatus(r->getValue().get()).isOK())
            return bson::copyWithout(r->getValue().get(), {"$clusterTime", "operationTime"});
    return streamError(!fast.isOK() ? fast.getStatus() : archive.getStatus());
}

}  // namespace

bson::Doc streamError(const Status& s) {
    bson::Doc out = errorDoc(s);
    const int code = static_cast<int>(s.code());
    if (isNetworkError(code) || isRetriableError(code)) {
        bson_t labels;
        BSON_APPEND_ARRAY_BEGIN(out.mut(), "errorLabels", &labels);
        BSON_APPEND_UTF8(&labels, "0", "ResumableChangeStreamError");
        bson_append_array_end(out.mut(), &labels);
    }
    return out;
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
    if (!r.isOK()) co_return streamError(r.getStatus());
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

Status ClientConnection::mergedStreamAllowed(const std::vector<const CollectionPolicy*>& scope,
                                             const std::string& db) {
    for (const CollectionPolicy* p : scope)
        if (!p->changeStreams)
            return Status(
                ErrorCode::CommandNotSupported,
                fmt::format("halocline: a change stream over {} would include the tiered "
                            "collection {}, whose change streams are not enabled: set "
                            "changeStreams: true in its tiering.collections entry "
                            "(docs/OPERATIONS.md), or watch untiered collections individually",
                            db == "admin" ? std::string("the cluster") : "database " + db, p->ns));
    return Status::OK();
}

asio::awaitable<bson::Doc> ClientConnection::mergedChangeStream(
    const wire::OpMsg& msg, const bson_t* cmd, const std::vector<const CollectionPolicy*>& scope) {
    bson_t pipeline, stage, spec;
    if (!bson::subDocument(cmd, "pipeline", &pipeline) ||
        !bson::subDocument(&pipeline, "0", &stage) ||
        !bson::subDocument(&stage, "$changeStream", &spec))
        co_return errorDoc(Status(ErrorCode::TypeMismatch,
                                  "the $changeStream stage takes an object as its argument"));
    auto stream = std::make_shared<MergedStream>();
    stream->updateLookup = str(&spec, "fullDocument") == "updateLookup";
    // Each tier's $changeStream: the client's options, a merged token split in two.
    bson::Doc fastSpec, archiveSpec;
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "resumeAfter" || k == "startAfter") {
            bson_t token, f, a;
            if (!bson::subDocument(&spec, bson_iter_key(&it), &token) ||
                !splitToken(&token, &f, &a))
                co_return errorDoc(Status(
                    ErrorCode::InvalidResumeToken,
                    fmt::format("halocline: the {} token is not one of this proxy's database or "
                                "cluster change streams (they merge the fast tier's and the "
                                "archive's streams: use a token such a stream returned)",
                                k)));
            BSON_APPEND_DOCUMENT(fastSpec.mut(), bson_iter_key(&it), &f);
            BSON_APPEND_DOCUMENT(archiveSpec.mut(), bson_iter_key(&it), &a);
            continue;
        }
        bson_append_iter(fastSpec.mut(), nullptr, 0, &it);
        bson_append_iter(archiveSpec.mut(), nullptr, 0, &it);
    }
    // The fast tier's events of the tiered collections, the application's
    // only; the archive's of every other collection but the proxy's metadata.
    // Then the client's own stages (per event: $match, $project, ...) on both.
    bson::Doc fastPipe, archivePipe;
    {
        ArrayKey fk, ak;
        size_t fn = 0, an = 0;
        bson_t s, m, list;
        bson_append_document_begin(fastPipe.mut(), fk(fn++), -1, &s);
        BSON_APPEND_DOCUMENT(&s, "$changeStream", fastSpec.get());
        bson_append_document_end(fastPipe.mut(), &s);
        appendUserEventsOnly(fastPipe.mut(), fk(fn++));
        bson_append_document_begin(fastPipe.mut(), fk(fn++), -1, &s);
        BSON_APPEND_DOCUMENT_BEGIN(&s, "$match", &m);
        BSON_APPEND_ARRAY_BEGIN(&m, "$or", &list);
        size_t n = 0;
        ArrayKey lk;
        appendNamespaces(&list, scope, lk, n);
        bson_append_array_end(&m, &list);
        bson_append_document_end(&s, &m);
        bson_append_document_end(fastPipe.mut(), &s);

        bson_append_document_begin(archivePipe.mut(), ak(an++), -1, &s);
        BSON_APPEND_DOCUMENT(&s, "$changeStream", archiveSpec.get());
        bson_append_document_end(archivePipe.mut(), &s);
        bson_append_document_begin(archivePipe.mut(), ak(an++), -1, &s);
        BSON_APPEND_DOCUMENT_BEGIN(&s, "$match", &m);
        BSON_APPEND_ARRAY_BEGIN(&m, "$nor", &list);
        n = 0;
        appendNamespaces(&list, scope, lk, n);
        bson_t meta;
        bson_append_document_begin(&list, lk(n++), -1, &meta);
        BSON_APPEND_UTF8(&meta, "ns.db", p_.config().metadataDb.c_str());
        bson_append_document_end(&list, &meta);
        bson_append_array_end(&m, &list);
        bson_append_document_end(&s, &m);
        bson_append_document_end(archivePipe.mut(), &s);

        bson_iter_init(&it, &pipeline);
        bson_iter_next(&it);  // $changeStream
        while (bson_iter_next(&it)) {
            bson_append_iter(fastPipe.mut(), fk(fn++), -1, &it);
            bson_append_iter(archivePipe.mut(), ak(an++), -1, &it);
        }
    }
    bson::Doc fastBody = withPipeline(forwardBody(cmd, false).get(), fastPipe.get());
    bson::Doc archiveBody = withPipeline(forwardBody(cmd, true).get(), archivePipe.get());
    using namespace asio::experimental::awaitable_operators;
    slot_.sentTo("fast+archive");
    auto [fr, ar] = co_await (roundTripBody(p_.fast(), buildForward(msg, fastBody.get())) &&
                              roundTripBody(p_.archive(), buildForward(msg, archiveBody.get())));
    std::optional<StreamBatch> fast, archive;
    if (fr.isOK()) fast = takeApart(fr.getValue().get());
    if (ar.isOK()) archive = takeApart(ar.getValue().get());
    Status st = !fr.isOK() ? fr.getStatus() : replyStatus(fr.getValue().get());
    if (st.isOK()) st = !ar.isOK() ? ar.getStatus() : replyStatus(ar.getValue().get());
    const bool noToken = st.isOK() && (!fast->postBatchToken || !archive->postBatchToken);
    if (noToken)
        st = Status(ErrorCode::InternalError,
                    "halocline: a tier's change stream returned no postBatchResumeToken");
    if (!st.isOK()) {
        // One tier's stream may be open: it closes with the other's error.
        CursorEntry e;
        e.tier = &p_.archive();
        e.remoteId = archive ? archive->cursorId : 0;
        e.ns = archive ? archive->ns : fast ? fast->ns : std::string();
        e.merged = stream;
        stream->fastId = fast ? fast->cursorId : 0;
        if (e.remoteId != 0 || stream->fastId != 0) p_.killRemote({e});
        co_return noToken ? errorDoc(st) : streamFailure(fr, ar);
    }
    stream->fastId = fast->cursorId;
    stream->archiveId = archive->cursorId;
    stream->fastPos = std::move(*fast->postBatchToken);
    stream->archivePos = std::move(*archive->postBatchToken);
    // Both positions start at the tiers' first batch: a token seen before
    // this reply's events resumes from there.
    fast->postBatchToken.reset();
    archive->postBatchToken.reset();
    int64_t id = 0;
    if (stream->archiveId == 0 && stream->fastId != 0) {
        // The archive's stream ended at once (invalidated): the fast one goes too.
        CursorEntry rest;
        rest.tier = &p_.archive();
        rest.ns = archive->ns;
        rest.merged = stream;
        p_.killRemote({rest});
    } else if (stream->archiveId != 0) {
        CursorEntry e;
        e.tier = &p_.archive();
        e.remoteId = stream->archiveId;
        e.ns = archive->ns;
        e.changeStream = true;
        e.merged = stream;
        id = addCursor(std::move(e));
    }
    co_return co_await mergedBatch(*stream, *fast, *archive, "firstBatch", id);
}

asio::awaitable<bson::Doc> ClientConnection::mergedBatch(MergedStream& s, StreamBatch& fast,
                                                         StreamBatch& archive, const char* key,
                                                         int64_t id) {
    // The fast tier's events completed as on a collection's stream; its
    // dropDatabase and invalidate are the archive's to show (both tiers drop).
    std::vector<bson::Doc> fastEvents;
    for (auto& ev : fast.events) {
        std::string op = str(ev.get(), "operationType");
        if (op == "invalidate" || op == "dropDatabase") continue;
        bson_t ns;
        const CollectionPolicy* p = nullptr;
        if (bson::subDocument(ev.get(), "ns", &ns))
            p = p_.config().policyFor(str(&ns, "db") + "." + str(&ns, "coll"));
        if (p)
            fastEvents.push_back(co_await completeEvent(*p, ev.get(), s.updateLookup));
        else
            fastEvents.push_back(std::move(ev));
    }
    // Each tier's events in its own order, the two interleaved by wall time,
    // each event's _id the merged token of everything up to it.
    bson::Doc out;
    bson_t cursor, batch;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "cursor", &cursor);
    bson_append_array_begin(&cursor, key, -1, &batch);
    ArrayKey k;
    size_t n = 0, f = 0, a = 0;
    while (f < fastEvents.size() || a < archive.events.size()) {
        const bool fromFast =
            a == archive.events.size() ||
            (f < fastEvents.size() && wallTimeOf(fastEvents[f]) <= wallTimeOf(archive.events[a]));
        bson::Doc& ev = fromFast ? fastEvents[f++] : archive.events[a++];
        bson_t token;
        if (bson::subDocument(ev.get(), "_id", &token))
            (fromFast ? s.fastPos : s.archivePos) = bson::Doc::copyOf(&token);
        bson::Doc merged = mergedToken(s.fastPos.get(), s.archivePos.get());
        bson::Doc shown = bson::copyWithout(ev.get(), {"_id"});
        bson_t whole;
        bson_append_document_begin(&batch, k(n++), -1, &whole);
        BSON_APPEND_DOCUMENT(&whole, "_id", merged.get());
        bson_concat(&whole, shown.get());
        bson_append_document_end(&batch, &whole);
    }
    bson_append_array_end(&cursor, &batch);
    if (fast.postBatchToken) s.fastPos = std::move(*fast.postBatchToken);
    if (archive.postBatchToken) s.archivePos = std::move(*archive.postBatchToken);
    bson::Doc pbrt = mergedToken(s.fastPos.get(), s.archivePos.get());
    BSON_APPEND_DOCUMENT(&cursor, "postBatchResumeToken", pbrt.get());
    BSON_APPEND_INT64(&cursor, "id", id);
    BSON_APPEND_UTF8(&cursor, "ns", archive.ns.c_str());
    bson_append_document_end(out.mut(), &cursor);
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), p_.state().fastClusterTime.load());
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::mergedGetMore(const CursorEntry& e, int64_t id,
                                                           const bson_t* cmd) {
    MergedStream& s = *e.merged;
    if (s.busy.exchange(true))
        co_return errorDoc(
            Status(ErrorCode::CursorInUse, fmt::format("cursor id {} is already in use", id)));
    struct Release {
        MergedStream& s;
        ~Release() { s.busy = false; }
    } release{s};
    // Both tiers' getMores at once (each waits up to the client's maxTimeMS
    // for events); a fast stream that ended is not asked again.
    bson::Doc fastBody = getMoreBody(cmd, s.fastId);
    bson::Doc archiveBody = getMoreBody(cmd, s.archiveId);
    using namespace asio::experimental::awaitable_operators;
    slot_.sentTo("fast+archive");
    wire::OpMsg none;
    StatusWith<bson::Doc> fr = bson::Doc();
    StatusWith<bson::Doc> ar = bson::Doc();
    if (s.fastId != 0) {
        auto [x, y] = co_await (roundTripBody(p_.fast(), buildForward(none, fastBody.get())) &&
                                roundTripBody(p_.archive(), buildForward(none, archiveBody.get())));
        fr = std::move(x);
        ar = std::move(y);
    } else {
        ar = co_await roundTripBody(p_.archive(), buildForward(none, archiveBody.get()));
    }
    if (slot_.killed()) {
        fr = interrupted();
    }
    Status st = !fr.isOK() ? fr.getStatus() : replyStatus(fr.getValue().get());
    if (st.isOK()) st = !ar.isOK() ? ar.getStatus() : replyStatus(ar.getValue().get());
    if (!st.isOK()) {
        // The client resumes from its last merged token; both tier cursors go.
        p_.cursors().erase(id);
        CursorEntry dead = e;
        if (ar.isOK()) dead.remoteId = takeApart(ar.getValue().get()).cursorId;
        if (fr.isOK() && s.fastId != 0) s.fastId = takeApart(fr.getValue().get()).cursorId;
        if (dead.remoteId != 0 || s.fastId != 0) p_.killRemote({dead});
        co_return streamFailure(fr, ar);
    }
    StreamBatch fast = s.fastId != 0 ? takeApart(fr.getValue().get()) : StreamBatch{};
    StreamBatch archive = takeApart(ar.getValue().get());
    if (archive.ns.empty()) archive.ns = e.ns;
    s.fastId = fast.cursorId;
    s.archiveId = archive.cursorId;
    if (s.archiveId == 0) {
        // The archive's stream ended (invalidated): so does the merged one.
        p_.cursors().erase(id);
        if (s.fastId != 0) {
            CursorEntry rest = e;
            rest.remoteId = 0;
            p_.killRemote({rest});
        }
    } else {
        p_.cursors().touch(id);
    }
    co_return co_await mergedBatch(s, fast, archive, "nextBatch", s.archiveId == 0 ? 0 : id);
}

}  // namespace halo::tiering
