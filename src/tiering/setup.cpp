// What every proxy makes sure of before serving (see workers.h, ensureSetup).
#include <fmt/format.h>

#include "common/log.h"
#include "tiering/worker_context.h"
#include "tiering/workers.h"

namespace halo::tiering {

using namespace workers;

namespace {

constexpr int32_t kRetryRecordSeconds = 30 * 60;

/// create {name} in `db` (NamespaceExists is fine), with optional options.
asio::awaitable<Status> createCollection(Tier& tier, const std::string& db, const std::string& coll,
                                         const bson_t* collation) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "create", coll.c_str());
    if (collation) BSON_APPEND_DOCUMENT(c.mut(), "collation", collation);
    appendMajority(c.mut());
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    auto r = co_await tier.runOk(c.get());
    if (r.isOK() || r.getStatus().code() == ErrorCode::NamespaceExists) co_return Status::OK();
    co_return r.getStatus();
}

/// listIndexes; a missing collection has none.
asio::awaitable<StatusWith<std::vector<bson::Doc>>> listIndexes(Tier& tier, const std::string& db,
                                                                const std::string& coll) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "listIndexes", coll.c_str());
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    auto r = co_await tier.collect(c.get());
    if (!r.isOK() && r.getStatus().code() == ErrorCode::NamespaceNotFound)
        co_return std::vector<bson::Doc>{};
    co_return r;
}

std::string indexName(const bson_t* spec) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

/// Whether the index's key starts with `field` (it can serve a range on it).
bool leadsWith(const bson_t* spec, const std::string& field) {
    bson_t key;
    if (!bson::subDocument(spec, "key", &key)) return false;
    bson_iter_t it;
    return bson_iter_init(&it, &key) && bson_iter_next(&it) && field == bson_iter_key(&it);
}

/// A collection's options (listCollections), empty when it does not exist.
asio::awaitable<StatusWith<bson::Doc>> collectionOptions(Tier& tier, const std::string& db,
                                                         const std::string& coll) {
    bson::Doc c;
    BSON_APPEND_INT32(c.mut(), "listCollections", 1);
    bson_t f;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "filter", &f);
    BSON_APPEND_UTF8(&f, "name", coll.c_str());
    bson_append_document_end(c.mut(), &f);
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    auto r = co_await tier.collect(c.get());
    if (!r.isOK()) co_return r.getStatus();
    bson::Doc out;
    for (auto& d : r.getValue()) {
        bson_t opts;
        if (bson::subDocument(d.get(), "options", &opts)) out = bson::Doc::copyOf(&opts);
    }
    co_return out;
}

/// The validation options of a collection's options, as collMod takes them:
/// {validator, validationLevel, validationAction}, with mongod's defaults
/// ({}, strict, error) for what is absent.
bson::Doc validationOf(const bson_t* options) {
    bson::Doc v;
    bson_t validator;
    if (bson::subDocument(options, "validator", &validator))
        BSON_APPEND_DOCUMENT(v.mut(), "validator", &validator);
    else {
        bson_t empty;
        BSON_APPEND_DOCUMENT_BEGIN(v.mut(), "validator", &empty);
        bson_append_document_end(v.mut(), &empty);
    }
    for (auto [key, dflt] :
         {std::pair{"validationLevel", "strict"}, std::pair{"validationAction", "error"}}) {
        bson_iter_t it;
        const char* value = dflt;
        if (bson_iter_init_find(&it, options, key) && BSON_ITER_HOLDS_UTF8(&it))
            value = bson_iter_utf8(&it, nullptr);
        BSON_APPEND_UTF8(v.mut(), key, value);
    }
    return v;
}

asio::awaitable<Status> setupCollection(const CollectionPolicy& p, Tiers& t) {
    auto [db, coll] = splitNs(p.ns);
    auto archiveOpts = co_await collectionOptions(t.archive, db, coll);
    if (!archiveOpts.isOK()) co_return archiveOpts.getStatus();
    bson_t collation;
    bool haveCollation = bson::subDocument(archiveOpts.getValue().get(), "collation", &collation);
    Status st = co_await createCollection(t.fast, db, coll, haveCollation ? &collation : nullptr);
    if (!st.isOK()) co_return st;
    // The archive's validation, so writes through the proxy are checked as the
    // application expects (copies bypass it: see Promotion and the feeder).
    auto fastOpts = co_await collectionOptions(t.fast, db, coll);
    if (!fastOpts.isOK()) co_return fastOpts.getStatus();
    bson::Doc want = validationOf(archiveOpts.getValue().get());
    bson::Doc have = validationOf(fastOpts.getValue().get());
    if (!bson_equal(want.get(), have.get())) {
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "collMod", coll.c_str());
        bson_concat(c.mut(), want.get());
        appendMajority(c.mut());
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await t.fast.runOk(c.get());
        if (!r.isOK()) co_return r.getStatus();
    }

    auto archived = co_await listIndexes(t.archive, db, coll);
    if (!archived.isOK()) co_return archived.getStatus();
    auto present = co_await listIndexes(t.fast, db, coll);
    if (!present.isOK()) co_return present.getStatus();
    bool fastHasAgeIndex = p.ageField == "_id";
    bool archiveHasAgeIndex = p.ageField == "_id";
    std::set<std::string> fastNames;
    for (auto& s : present.getValue()) {
        fastNames.insert(indexName(s.get()));
        fastHasAgeIndex |= leadsWith(s.get(), p.ageField);
    }
    for (auto& s : archived.getValue()) {
        archiveHasAgeIndex |= leadsWith(s.get(), p.ageField);
        std::string name = indexName(s.get());
        if (name == "_id_" || fastNames.count(name)) continue;
        bson::Doc spec;
        bson_iter_t it;
        bson_iter_init(&it, s.get());
        bool ttl = false;
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "v" || k == "ns") continue;
            // A TTL index in the fast tier would delete documents without the
            // evictor's checks (CONSISTENCY.md, The evictor): the archive's own
            // TTL index keeps the semantics.
            if (k == "expireAfterSeconds") {
                ttl = true;
                continue;
            }
            bson::appendIter(spec.mut(), k, it);
        }
        if (ttl)
            log::info("tiering", 8210052, "TTL index copied to the fast tier without its TTL",
                      fmt::format(R"({{"ns":{},"index":{}}})", log::quote(p.ns), log::quote(name)));
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "createIndexes", coll.c_str());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "indexes", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", spec.get());
        bson_append_array_end(c.mut(), &arr);
        appendMajority(c.mut());
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await t.fast.runOk(c.get());
        if (!r.isOK()) {
            ErrorCode code = r.getStatus().code();
            if (code != ErrorCode::IndexOptionsConflict &&
                code != ErrorCode::IndexKeySpecsConflict && code != ErrorCode::IndexAlreadyExists)
                co_return r.getStatus();
            log::warning("tiering", 8210051,
                         "An archive index conflicts with a fast-tier index; kept the fast one",
                         fmt::format(R"({{"ns":{},"index":{},"error":{}}})", log::quote(p.ns),
                                     log::quote(name), log::quote(r.getStatus().reason())));
            continue;
        }
        fastHasAgeIndex |= leadsWith(spec.get(), p.ageField);
    }
    if (!fastHasAgeIndex) {
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "createIndexes", coll.c_str());
        bson_t arr, spec, key;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &spec);
        BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
        BSON_APPEND_INT32(&key, p.ageField.c_str(), 1);
        bson_append_document_end(&spec, &key);
        BSON_APPEND_UTF8(&spec, "name", ageIndexName(p).c_str());
        bson_append_document_end(&arr, &spec);
        bson_append_array_end(c.mut(), &arr);
        appendMajority(c.mut());
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await t.fast.runOk(c.get());
        if (!r.isOK()) co_return r.getStatus();
    }
    if (!archiveHasAgeIndex)
        log::warning(
            "tiering", 8210050,
            "The archive has no index on the age field: the warmer sorts without one",
            fmt::format(R"({{"ns":{},"ageField":{}}})", log::quote(p.ns), log::quote(p.ageField)));
    co_return Status::OK();
}

/// The first and last `n` documents of the archive collection in `_id` order,
/// projected to the age field.
asio::awaitable<StatusWith<std::vector<bson::Doc>>> sampleEnds(Tier& archive,
                                                               const CollectionPolicy& p, int n) {
    auto [db, coll] = splitNs(p.ns);
    std::vector<bson::Doc> out;
    for (int dir : {1, -1}) {
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "find", coll.c_str());
        bson_t sort, proj;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "sort", &sort);
        BSON_APPEND_INT32(&sort, "_id", dir);
        bson_append_document_end(c.mut(), &sort);
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "projection", &proj);
        BSON_APPEND_INT32(&proj, p.ageField.c_str(), 1);
        bson_append_document_end(c.mut(), &proj);
        BSON_APPEND_INT64(c.mut(), "limit", n);
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await archive.collect(c.get());
        if (!r.isOK()) co_return r.getStatus();
        for (auto& d : r.getValue()) out.push_back(std::move(d));
    }
    co_return out;
}

}  // namespace

asio::awaitable<StatusWith<std::string>> checkAgeField(Tier& archive, const CollectionPolicy& p) {
    auto sample = co_await sampleEnds(archive, p, 100);
    if (!sample.isOK()) co_return sample.getStatus();
    const bool byId = p.ageField == "_id";
    const bson_type_t wanted = byId ? BSON_TYPE_OID : BSON_TYPE_DATE_TIME;
    size_t missing = 0, wrong = 0;
    std::map<std::string, size_t> wrongTypes;
    for (auto& d : sample.getValue()) {
        bson_iter_t it;
        if (!bson::findDotted(d.get(), p.ageField, &it)) {
            ++missing;
        } else if (bson_iter_type(&it) != wanted) {
            ++wrong;
            ++wrongTypes[std::string(bson::typeName(bson_iter_type(&it)))];
        }
    }
    const size_t n = sample.getValue().size();
    const std::string consequence =
        "such documents are never evicted, and no read can be proven to lie in the fast tier, so "
        "reads go to the archive";
    if (n > 0 && missing * 2 > n)
        co_return fmt::format(
            "the age field '{}' is missing from {} of {} sampled documents of {}: {}", p.ageField,
            missing, n, p.ns, consequence);
    if (n > 0 && (missing + wrong) * 2 > n) {
        std::string types;
        for (auto& [t, c] : wrongTypes) types += (types.empty() ? "" : ", ") + t;
        co_return fmt::format(
            "the age field '{}' holds {} instead of {} in {} of {} sampled "
            "documents of {}: {}",
            p.ageField, types, byId ? "ObjectIds" : "dates", wrong, n, p.ns, consequence);
    }
    co_return std::string();
}

asio::awaitable<Status> ensureSetup(const ProxyConfig& cfg, Tiers& t) {
    for (const char* coll : {Metadata::kTombstones, Metadata::kState, Metadata::kPins,
                             Metadata::kRetries, Metadata::kRefused}) {
        Status st = co_await createCollection(t.fast, t.meta.db, coll, nullptr);
        if (!st.isOK()) co_return st;
    }
    {
        // A retried delete answers from its record only while its session can
        // still retry: mongod forgets idle sessions after 30 minutes.
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "createIndexes", Metadata::kRetries);
        bson_t arr, spec, key;
        BSON_APPEND_ARRAY_BEGIN(c.mut(), "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &spec);
        BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
        BSON_APPEND_INT32(&key, "at", 1);
        bson_append_document_end(&spec, &key);
        BSON_APPEND_UTF8(&spec, "name", "halocline_retries_ttl");
        BSON_APPEND_INT32(&spec, "expireAfterSeconds", kRetryRecordSeconds);
        bson_append_document_end(&arr, &spec);
        bson_append_array_end(c.mut(), &arr);
        appendMajority(c.mut());
        BSON_APPEND_UTF8(c.mut(), "$db", t.meta.db.c_str());
        auto r = co_await t.fast.runOk(c.get());
        if (!r.isOK()) co_return r.getStatus();
    }
    for (const auto& p : cfg.collections) {
        Status st = co_await setupCollection(p, t);
        if (!st.isOK())
            co_return Status(st.code(), fmt::format("setting up {}: {}", p.ns, st.reason()));
    }
    co_return Status::OK();
}

}  // namespace halo::tiering
