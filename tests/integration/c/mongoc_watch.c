/* libmongoc change streams against `halocline store --replSet`: mongoc_collection_watch
 * sees an insert, an update (with fullDocument: updateLookup) and a delete in order, the
 * resume token advances, and a second stream resumed after the first event sees exactly
 * the later ones. Usage: mongoc_watch <uri with replicaSet=...>. Exits non-zero on failure. */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);         \
            fprintf(stderr, "\n");                \
            return 1;                             \
        }                                         \
    } while (0)

static const bson_t* next_event(mongoc_change_stream_t* cs) {
    const bson_t* ev = NULL;
    /* Each mongoc_change_stream_next waits up to maxAwaitTimeMS; a bounded number of rounds. */
    for (int i = 0; i < 20 && !ev; ++i) {
        if (!mongoc_change_stream_next(cs, &ev)) ev = NULL;
        bson_error_t err;
        if (mongoc_change_stream_error_document(cs, &err, NULL)) {
            fprintf(stderr, "change stream error: %s\n", err.message);
            return NULL;
        }
    }
    return ev;
}

static const char* op_type(const bson_t* ev) {
    bson_iter_t it;
    return bson_iter_init_find(&it, ev, "operationType") ? bson_iter_utf8(&it, NULL) : "";
}

int main(int argc, char** argv) {
    CHECK(argc >= 2, "usage: mongoc_watch URI");
    mongoc_init();
    bson_error_t err;
    mongoc_uri_t* uri = mongoc_uri_new_with_error(argv[1], &err);
    CHECK(uri, "bad uri: %s", err.message);
    mongoc_client_t* client = mongoc_client_new_from_uri(uri);
    mongoc_collection_t* coll = mongoc_client_get_collection(client, "mongoc_watch", "events");
    mongoc_collection_drop(coll, NULL);

    bson_t* opts = BCON_NEW("fullDocument", BCON_UTF8("updateLookup"), "maxAwaitTimeMS", BCON_INT64(500));
    bson_t empty = BSON_INITIALIZER;
    mongoc_change_stream_t* cs = mongoc_collection_watch(coll, &empty, opts);
    CHECK(cs, "watch returned NULL");
    CHECK(!mongoc_change_stream_error_document(cs, &err, NULL), "watch failed: %s", err.message);

    bson_t* doc = BCON_NEW("_id", BCON_INT32(1), "v", BCON_INT32(1));
    CHECK(mongoc_collection_insert_one(coll, doc, NULL, NULL, &err), "insert: %s", err.message);
    bson_t* sel = BCON_NEW("_id", BCON_INT32(1));
    bson_t* upd = BCON_NEW("$set", "{", "v", BCON_INT32(2), "}");
    CHECK(mongoc_collection_update_one(coll, sel, upd, NULL, NULL, &err), "update: %s", err.message);
    CHECK(mongoc_collection_delete_one(coll, sel, NULL, NULL, &err), "delete: %s", err.message);

    const bson_t* ev = next_event(cs);
    CHECK(ev && strcmp(op_type(ev), "insert") == 0, "expected insert, got %s", ev ? op_type(ev) : "nothing");
    bson_t* first_token = bson_copy(mongoc_change_stream_get_resume_token(cs));
    CHECK(first_token && !bson_empty(first_token), "no resume token after the first event");
    ev = next_event(cs);
    CHECK(ev && strcmp(op_type(ev), "update") == 0, "expected update, got %s", ev ? op_type(ev) : "nothing");
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, ev, "updateDescription"), "update event without updateDescription");
    ev = next_event(cs);
    CHECK(ev && strcmp(op_type(ev), "delete") == 0, "expected delete, got %s", ev ? op_type(ev) : "nothing");
    mongoc_change_stream_destroy(cs);

    /* Resume after the first event: exactly the update and the delete follow. */
    bson_t* resume = BCON_NEW("resumeAfter", BCON_DOCUMENT(first_token), "maxAwaitTimeMS", BCON_INT64(500));
    cs = mongoc_collection_watch(coll, &empty, resume);
    ev = next_event(cs);
    CHECK(ev && strcmp(op_type(ev), "update") == 0, "resumed stream: expected update, got %s", ev ? op_type(ev) : "nothing");
    ev = next_event(cs);
    CHECK(ev && strcmp(op_type(ev), "delete") == 0, "resumed stream: expected delete, got %s", ev ? op_type(ev) : "nothing");
    mongoc_change_stream_destroy(cs);

    bson_destroy(resume);
    bson_destroy(first_token);
    bson_destroy(doc);
    bson_destroy(sel);
    bson_destroy(upd);
    bson_destroy(opts);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    mongoc_uri_destroy(uri);
    mongoc_cleanup();
    printf("mongoc_watch: OK\n");
    return 0;
}
