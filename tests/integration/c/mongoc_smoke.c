/* libmongoc smoke test against a running server.
 *
 * Usage: mongoc_smoke <uri> [--expect-compressor NAME] [--coll NAME]
 *
 * Does CRUD, index creation, a cursor over many batches, an aggregate, and error cases.
 * Exits 0 when everything matched, 1 with a message on stderr at the first mismatch.
 * With --expect-compressor, also checks that the server's handshake reply agreed to NAME.
 * With --coll, works on mongoc_smoke.NAME instead of mongoc_smoke.c_<compressor|plain>.
 */
#include <mongoc/mongoc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_NAME "mongoc_smoke"
#define N_DOCS 1000

static mongoc_client_t *g_client;

static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mongoc_smoke: FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

#define CHECK(cond, ...)     \
  do {                       \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

#define CHECK_OK(ok, err, what) CHECK((ok), "%s: %s (domain %u code %u)", (what), (err).message, (err).domain, (err).code)

static int64_t get_int(const bson_t *doc, const char *dotted) {
  bson_iter_t it, child;
  if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, dotted, &child)) {
    char *s = bson_as_relaxed_extended_json(doc, NULL);
    fprintf(stderr, "missing field %s in %s\n", dotted, s);
    bson_free(s);
    exit(1);
  }
  if (BSON_ITER_HOLDS_INT32(&child)) return bson_iter_int32(&child);
  if (BSON_ITER_HOLDS_INT64(&child)) return bson_iter_int64(&child);
  if (BSON_ITER_HOLDS_DOUBLE(&child)) return (int64_t)bson_iter_double(&child);
  fail("field %s is not numeric", dotted);
  return 0;
}

/* Checks reply[field] == want, printing the whole reply when it is not. */
static void expect_count(const bson_t *reply, const char *field, int64_t want, const char *what) {
  int64_t got = get_int(reply, field);
  if (got != want) {
    char *s = bson_as_relaxed_extended_json(reply, NULL);
    fail("%s: %s = %lld, want %lld; reply %s", what, field, (long long)got, (long long)want, s);
  }
}

static void step(const char *name) { fprintf(stderr, "mongoc_smoke: %s\n", name); }

static void check_handshake(const char *expect_compressor) {
  bson_error_t err;
  bson_t reply;
  bson_t *cmd = BCON_NEW("ping", BCON_INT32(1));
  bool ok = mongoc_client_command_simple(g_client, "admin", cmd, NULL, &reply, &err);
  CHECK_OK(ok, err, "ping");
  bson_destroy(&reply);
  bson_destroy(cmd);

  cmd = BCON_NEW("buildInfo", BCON_INT32(1));
  ok = mongoc_client_command_simple(g_client, "admin", cmd, NULL, &reply, &err);
  bson_destroy(cmd);
  CHECK_OK(ok, err, "buildInfo");
  bson_iter_t it;
  CHECK(bson_iter_init_find(&it, &reply, "version") && BSON_ITER_HOLDS_UTF8(&it), "buildInfo without version");
  bson_destroy(&reply);

  if (expect_compressor) {
    mongoc_server_description_t **sds;
    size_t n = 0;
    sds = mongoc_client_get_server_descriptions(g_client, &n);
    CHECK(n == 1, "expected one server description, got %zu", n);
    const bson_t *hello = mongoc_server_description_hello_response(sds[0]);
    bool found = false;
    if (bson_iter_init_find(&it, hello, "compression") && BSON_ITER_HOLDS_ARRAY(&it)) {
      bson_iter_t arr;
      bson_iter_recurse(&it, &arr);
      while (bson_iter_next(&arr)) {
        if (BSON_ITER_HOLDS_UTF8(&arr) && strcmp(bson_iter_utf8(&arr, NULL), expect_compressor) == 0) found = true;
      }
    }
    mongoc_server_descriptions_destroy_all(sds, n);
    CHECK(found, "server did not agree to compressor %s in its hello reply", expect_compressor);
  }
}

static void crud(mongoc_collection_t *coll) {
  bson_error_t err;
  bson_t reply;
  bool ok;

  step("insert_many");
  bson_t *docs[N_DOCS];
  for (int i = 0; i < N_DOCS; i++) docs[i] = BCON_NEW("_id", BCON_INT32(i), "v", BCON_INT32(i % 10), "s", BCON_UTF8("payload"));
  ok = mongoc_collection_insert_many(coll, (const bson_t **)docs, N_DOCS, NULL, &reply, &err);
  for (int i = 0; i < N_DOCS; i++) bson_destroy(docs[i]);
  CHECK_OK(ok, err, "insert_many");
  expect_count(&reply, "insertedCount", N_DOCS, "insert_many");
  bson_destroy(&reply);

  step("count_documents");
  bson_t *filter = BCON_NEW("v", BCON_INT32(3));
  int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &err);
  CHECK(n == N_DOCS / 10, "count_documents(v=3) = %lld: %s", (long long)n, err.message);
  bson_destroy(filter);
  n = mongoc_collection_estimated_document_count(coll, NULL, NULL, NULL, &err);
  CHECK(n == N_DOCS, "estimated_document_count = %lld: %s", (long long)n, err.message);

  step("update_one / update_many / replace_one");
  bson_t *sel = BCON_NEW("_id", BCON_INT32(5));
  bson_t *upd = BCON_NEW("$set", "{", "x", BCON_INT32(1), "}", "$inc", "{", "v", BCON_INT32(100), "}");
  ok = mongoc_collection_update_one(coll, sel, upd, NULL, &reply, &err);
  CHECK_OK(ok, err, "update_one");
  expect_count(&reply, "matchedCount", 1, "update_one");
  expect_count(&reply, "modifiedCount", 1, "update_one");
  bson_destroy(&reply);
  bson_destroy(upd);
  bson_destroy(sel);

  sel = BCON_NEW("v", BCON_INT32(7));
  upd = BCON_NEW("$set", "{", "seven", BCON_BOOL(true), "}");
  ok = mongoc_collection_update_many(coll, sel, upd, NULL, &reply, &err);
  CHECK_OK(ok, err, "update_many");
  expect_count(&reply, "modifiedCount", N_DOCS / 10, "update_many");
  bson_destroy(&reply);
  bson_destroy(upd);
  bson_destroy(sel);

  sel = BCON_NEW("_id", BCON_INT32(6));
  bson_t *repl = BCON_NEW("replaced", BCON_BOOL(true));
  ok = mongoc_collection_replace_one(coll, sel, repl, NULL, &reply, &err);
  CHECK_OK(ok, err, "replace_one");
  expect_count(&reply, "modifiedCount", 1, "replace_one");
  bson_destroy(&reply);
  bson_destroy(repl);

  mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, sel, NULL, NULL);
  const bson_t *doc;
  CHECK(mongoc_cursor_next(cur, &doc), "replaced doc not found");
  bson_iter_t it;
  CHECK(bson_iter_init_find(&it, doc, "replaced") && !bson_iter_init_find(&it, doc, "v"), "replacement content");
  mongoc_cursor_destroy(cur);
  bson_destroy(sel);

  step("upsert");
  sel = BCON_NEW("_id", BCON_INT32(5000));
  upd = BCON_NEW("$set", "{", "v", BCON_INT32(-1), "}");
  bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
  ok = mongoc_collection_update_one(coll, sel, upd, opts, &reply, &err);
  CHECK_OK(ok, err, "upsert");
  expect_count(&reply, "upsertedCount", 1, "upsert");
  expect_count(&reply, "upsertedId", 5000, "upsert");
  bson_destroy(&reply);
  bson_destroy(opts);
  bson_destroy(upd);
  bson_destroy(sel);

  step("find_and_modify");
  mongoc_find_and_modify_opts_t *fam = mongoc_find_and_modify_opts_new();
  bson_t *famupd = BCON_NEW("$inc", "{", "v", BCON_INT32(1000), "}");
  mongoc_find_and_modify_opts_set_update(fam, famupd);
  mongoc_find_and_modify_opts_set_flags(fam, MONGOC_FIND_AND_MODIFY_RETURN_NEW);
  sel = BCON_NEW("_id", BCON_INT32(1));
  ok = mongoc_collection_find_and_modify_with_opts(coll, sel, fam, &reply, &err);
  CHECK_OK(ok, err, "find_and_modify");
  expect_count(&reply, "value.v", 1001, "find_and_modify");
  bson_destroy(&reply);
  bson_destroy(sel);
  bson_destroy(famupd);
  mongoc_find_and_modify_opts_destroy(fam);

  step("delete_one / delete_many");
  sel = BCON_NEW("v", BCON_INT32(9));
  ok = mongoc_collection_delete_many(coll, sel, NULL, &reply, &err);
  CHECK_OK(ok, err, "delete_many");
  expect_count(&reply, "deletedCount", N_DOCS / 10, "delete_many");
  bson_destroy(&reply);
  bson_destroy(sel);
  sel = BCON_NEW("_id", BCON_INT32(5000));
  ok = mongoc_collection_delete_one(coll, sel, NULL, &reply, &err);
  CHECK_OK(ok, err, "delete_one");
  expect_count(&reply, "deletedCount", 1, "delete_one");
  bson_destroy(&reply);
  bson_destroy(sel);
}

static void cursors(mongoc_collection_t *coll) {
  step("find over many batches (batchSize 7, sorted)");
  bson_t filter = BSON_INITIALIZER;
  bson_t *opts = BCON_NEW("batchSize", BCON_INT32(7), "sort", "{", "_id", BCON_INT32(1), "}");
  mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
  const bson_t *doc;
  int count = 0;
  int64_t last = -1;
  while (mongoc_cursor_next(cur, &doc)) {
    int64_t id = get_int(doc, "_id");
    CHECK(id > last, "cursor order broken: %lld after %lld", (long long)id, (long long)last);
    last = id;
    count++;
  }
  bson_error_t err;
  CHECK(!mongoc_cursor_error(cur, &err), "cursor error: %s", err.message);
  CHECK(count == N_DOCS - N_DOCS / 10, "cursor returned %d documents", count);
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);

  step("abandon a cursor mid-way (killCursors on destroy), then keep working");
  opts = BCON_NEW("batchSize", BCON_INT32(5));
  cur = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
  for (int i = 0; i < 12; i++) CHECK(mongoc_cursor_next(cur, &doc), "early end of cursor");
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);

  step("aggregate over many batches");
  bson_t *pipeline = BCON_NEW("pipeline", "[", "{", "$match", "{", "v", "{", "$lt", BCON_INT32(5), "}", "}", "}", "]");
  opts = BCON_NEW("batchSize", BCON_INT32(11));
  cur = mongoc_collection_aggregate(coll, MONGOC_QUERY_NONE, pipeline, opts, NULL);
  count = 0;
  while (mongoc_cursor_next(cur, &doc)) count++;
  CHECK(!mongoc_cursor_error(cur, &err), "aggregate error: %s", err.message);
  /* v in 0..4: 500 docs minus _id 1 (its v became 1001). */
  CHECK(count == 499, "aggregate returned %d documents", count);
  mongoc_cursor_destroy(cur);
  bson_destroy(opts);
  bson_destroy(pipeline);

  step("aggregate $group");
  pipeline = BCON_NEW("pipeline", "[", "{", "$match", "{", "v", "{", "$lt", BCON_INT32(10), "}", "}", "}", "{", "$group", "{",
                      "_id", BCON_NULL, "n", "{", "$sum", BCON_INT32(1), "}", "}", "}", "]");
  cur = mongoc_collection_aggregate(coll, MONGOC_QUERY_NONE, pipeline, NULL, NULL);
  CHECK(mongoc_cursor_next(cur, &doc), "no $group result");
  /* 900 left; _id 1 (v 1001), _id 5 (v 105) and _id 6 (no v) do not match. */
  CHECK(get_int(doc, "n") == 897, "$group count = %lld", (long long)get_int(doc, "n"));
  mongoc_cursor_destroy(cur);
  bson_destroy(pipeline);
  bson_destroy(&filter);
}

static void indexes(mongoc_database_t *db, mongoc_collection_t *coll) {
  bson_error_t err;
  bson_t reply;
  step("createIndexes (compound + unique)");
  bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(mongoc_collection_get_name(coll)), "indexes", "[", "{", "key", "{", "v",
                         BCON_INT32(1), "s", BCON_INT32(-1), "}", "name", BCON_UTF8("v_1_s_-1"), "}", "{", "key", "{", "email",
                         BCON_INT32(1), "}", "name", BCON_UTF8("email_1"), "unique", BCON_BOOL(true), "sparse", BCON_BOOL(true),
                         "}", "]");
  bool ok = mongoc_database_write_command_with_opts(db, cmd, NULL, &reply, &err);
  CHECK_OK(ok, err, "createIndexes");
  expect_count(&reply, "numIndexesAfter", 3, "createIndexes");
  bson_destroy(&reply);
  bson_destroy(cmd);

  step("listIndexes");
  mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(coll, NULL);
  const bson_t *doc;
  int count = 0;
  while (mongoc_cursor_next(cur, &doc)) count++;
  CHECK(!mongoc_cursor_error(cur, &err), "listIndexes: %s", err.message);
  CHECK(count == 3, "listIndexes returned %d", count);
  mongoc_cursor_destroy(cur);

  step("unique violation -> 11000");
  bson_t *d = BCON_NEW("_id", BCON_INT32(100001), "email", BCON_UTF8("a@x"));
  ok = mongoc_collection_insert_one(coll, d, NULL, NULL, &err);
  CHECK_OK(ok, err, "insert a@x");
  bson_destroy(d);
  d = BCON_NEW("_id", BCON_INT32(100002), "email", BCON_UTF8("a@x"));
  ok = mongoc_collection_insert_one(coll, d, NULL, NULL, &err);
  CHECK(!ok && err.code == 11000, "duplicate email: ok=%d code=%u %s", ok, err.code, err.message);
  bson_destroy(d);

  step("dropIndex");
  ok = mongoc_collection_drop_index_with_opts(coll, "v_1_s_-1", NULL, &err);
  CHECK_OK(ok, err, "drop_index");
  ok = mongoc_collection_drop_index_with_opts(coll, "v_1_s_-1", NULL, &err);
  CHECK(!ok && err.code == 27, "dropping a missing index: code %u (want 27)", err.code);
}

static void errors(mongoc_collection_t *coll) {
  bson_error_t err;
  step("duplicate _id -> 11000");
  bson_t *d = BCON_NEW("_id", BCON_INT32(0));
  bool ok = mongoc_collection_insert_one(coll, d, NULL, NULL, &err);
  CHECK(!ok && err.code == 11000, "duplicate _id: ok=%d code=%u %s", ok, err.code, err.message);
  bson_destroy(d);

  step("unknown command -> 59");
  bson_t *cmd = BCON_NEW("noSuchCommand", BCON_INT32(1));
  ok = mongoc_client_command_simple(g_client, "admin", cmd, NULL, NULL, &err);
  CHECK(!ok && err.code == 59, "unknown command: ok=%d code=%u %s", ok, err.code, err.message);
  bson_destroy(cmd);

  step("bad query operator -> 2");
  bson_t *filter = BCON_NEW("v", "{", "$nope", BCON_INT32(1), "}");
  mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
  const bson_t *doc;
  CHECK(!mongoc_cursor_next(cur, &doc), "bad filter returned a document");
  CHECK(mongoc_cursor_error(cur, &err) && err.code == 2, "bad filter: code %u %s", err.code, err.message);
  mongoc_cursor_destroy(cur);
  bson_destroy(filter);

  step("bad update -> 9");
  bson_t *sel = BCON_NEW("_id", BCON_INT32(0));
  bson_t *upd = BCON_NEW("$nope", "{", "a", BCON_INT32(1), "}");
  ok = mongoc_collection_update_one(coll, sel, upd, NULL, NULL, &err);
  CHECK(!ok && err.code == 9, "bad update: ok=%d code=%u %s", ok, err.code, err.message);
  bson_destroy(sel);
  bson_destroy(upd);

  step("still healthy after errors");
  cmd = BCON_NEW("ping", BCON_INT32(1));
  ok = mongoc_client_command_simple(g_client, "admin", cmd, NULL, NULL, &err);
  CHECK_OK(ok, err, "ping after errors");
  bson_destroy(cmd);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <uri> [--expect-compressor NAME] [--coll NAME]\n", argv[0]);
    return 2;
  }
  const char *expect_compressor = NULL;
  const char *coll_name = NULL;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--expect-compressor") == 0 && i + 1 < argc) expect_compressor = argv[++i];
    else if (strcmp(argv[i], "--coll") == 0 && i + 1 < argc) coll_name = argv[++i];
  }
  mongoc_init();
  bson_error_t err;
  mongoc_uri_t *uri = mongoc_uri_new_with_error(argv[1], &err);
  CHECK(uri, "bad uri: %s", err.message);
  g_client = mongoc_client_new_from_uri_with_error(uri, &err);
  CHECK(g_client, "client: %s", err.message);
  mongoc_client_set_error_api(g_client, MONGOC_ERROR_API_VERSION_2);
  mongoc_client_set_appname(g_client, "mongoc_smoke");

  check_handshake(expect_compressor);

  mongoc_database_t *db = mongoc_client_get_database(g_client, DB_NAME);
  char collname[64];
  if (coll_name)
    snprintf(collname, sizeof collname, "%s", coll_name);
  else
    snprintf(collname, sizeof collname, "c_%s", expect_compressor ? expect_compressor : "plain");
  mongoc_collection_t *coll = mongoc_database_get_collection(db, collname);
  mongoc_collection_drop_with_opts(coll, NULL, NULL); /* fresh start; missing is fine */

  crud(coll);
  cursors(coll);
  indexes(db, coll);
  errors(coll);

  mongoc_collection_destroy(coll);
  mongoc_database_destroy(db);
  mongoc_client_destroy(g_client);
  mongoc_uri_destroy(uri);
  mongoc_cleanup();
  printf("mongoc_smoke: OK\n");
  return 0;
}
