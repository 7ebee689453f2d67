// Change streams on tiered collections (CONSISTENCY.md, Change streams).
#include <fmt/format.h>

#include "tiering/client_connection.h"

namespace halo::tiering {

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

}  // namespace halo::tiering
