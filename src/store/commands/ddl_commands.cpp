// Catalog commands: create, drop, dropDatabase, listDatabases, listCollections,
// renameCollection, createIndexes, listIndexes, dropIndexes, collMod and explain.
#include <fmt/format.h>

#include <filesystem>

#include "bson/compare.h"
#include "store/commands/auth_commands.h"
#include "store/commands/views.h"
#include "store/commands/write_path.h"
#include "store/exec/find_executor.h"
#include "store/query/document_validator.h"
#include "store/query/matcher.h"

namespace halo::store {
namespace {

std::string nsOf(const OperationContext& op) {
    validateDbName(op.db);
    return op.db + "." + cmdarg::collectionName(op);
}

/// Checks the validation options a create or collMod would store (mongod's
/// codes), and that a validator is allowed on the namespace: not on system
/// collections nor in the admin, local and config databases (InvalidOptions).
void checkValidationOptions(const std::string& ns, const bson_t* options, std::string_view command,
                            const CollectionEntry* existing) {
    auto cv = uassertStatusOK(query::CollectionValidation::fromOptions(options, command));
    if (!cv.validator) return;
    auto [db, coll] = splitNs(ns);
    std::string withUuid;
    if (existing) {
        withUuid = " with UUID ";
        for (int i = 0; i < 16; ++i) {
            if (i == 4 || i == 6 || i == 8 || i == 10) withUuid += '-';
            withUuid += fmt::format("{:02x}", existing->uuid[i]);
        }
    }
    if (coll.rfind("system.", 0) == 0)
        uasserted(
            ErrorCode::InvalidOptions,
            fmt::format("Document validators not allowed on system collection {}{}", ns, withUuid));
    if (db == "admin" || db == "local" || db == "config")
        uasserted(ErrorCode::InvalidOptions,
                  fmt::format("Document validators are not allowed on collection {}{} in the {} "
                              "internal database",
                              ns, withUuid, db));
}

/// The name a clustered collection's index was given ("_id_" by default), or
/// nullopt for an ordinary collection.
std::optional<std::string> clusteredIndexName(const CollectionEntry& c) {
    bson_t spec;
    if (!bson::subDocument(c.options.get(), "clusteredIndex", &spec)) return std::nullopt;
    return bson::stringField(&spec, "name");
}

/// create's clusteredIndex option, checked as mongod 7.0 does, in the canonical
/// form listCollections shows ({v: 2, key: {_id: 1}, name, unique: true});
/// nullopt for `clusteredIndex: false`. Only clustering on _id is supported,
/// as in mongod without test-only parameters: the store keeps the documents in
/// its _id index order already, so a clustered collection differs only in how
/// it is listed and in expiring by _id (expireAfterSeconds).
std::optional<bson::Doc> canonicalClusteredIndex(const bson_iter_t& option) {
    if (BSON_ITER_HOLDS_BOOL(&option)) {
        if (!bson_iter_bool(&option)) return std::nullopt;
        uasserted(static_cast<ErrorCode>(5979703),
                  "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported "
                  "for specialized collections.");
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&option))
        uasserted(static_cast<ErrorCode>(5979702),
                  "'clusteredIndex' has to be a boolean or object.");
    bson_t spec;
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&option, &len, &data);
    bson_init_static(&spec, data, len);
    const char* ctx = "ClusteredUtil::parseClusteredInfo";
    bson_iter_t it;
    bson_iter_init(&it, &spec);
    std::optional<bool> unique;
    std::optional<bson::Doc> key;
    std::string name = "_id_";
    int64_t v = 2;
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        auto wrongType = [&](const char* expected) {
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type '{}'",
                                  ctx, k, bson::typeName(bson_iter_type(&it)), expected));
        };
        if (k == "key") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) wrongType("object");
            bson_t kd;
            bson::subDocument(&spec, "key", &kd);
            key = bson::Doc::copyOf(&kd);
        } else if (k == "unique") {
            if (!BSON_ITER_HOLDS_BOOL(&it)) wrongType("bool");
            unique = bson_iter_bool(&it);
        } else if (k == "name") {
            if (!BSON_ITER_HOLDS_UTF8(&it)) wrongType("string");
            name = bson_iter_utf8(&it, nullptr);
        } else if (k == "v") {
            if (!BSON_ITER_HOLDS_NUMBER(&it)) wrongType("int");
            v = bson_iter_as_int64(&it);
        } else {
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '{}.{}' is an unknown field.", ctx, k));
        }
    }
    for (const char* required : {"key", "unique"})
        if (!bson_has_field(&spec, required))
            uasserted(
                ErrorCode::Location40414,
                fmt::format("BSON field '{}.{}' is missing but a required field", ctx, required));
    if (!*unique)
        uasserted(static_cast<ErrorCode>(5979700),
                  "The clusteredIndex option requires unique: true to be specified");
    bson_iter_t kit;
    bool onId = bson_count_keys(key->get()) == 1 && bson_iter_init(&kit, key->get()) &&
                bson_iter_next(&kit) && std::string_view(bson_iter_key(&kit)) == "_id" &&
                BSON_ITER_HOLDS_NUMBER(&kit) && bson::toDouble(*bson_iter_value(&kit)) == 1.0;
    if (!onId)
        uasserted(ErrorCode::InvalidIndexSpecificationOption,
                  "The clusteredIndex option is only supported for key: {_id: 1}");
    if (v != 2)
        uasserted(static_cast<ErrorCode>(5979704),
                  fmt::format("Invalid clusteredIndex specification {}; cannot create a "
                              "clusteredIndex with v={}",
                              bson::toJson(&spec), v));
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "v", 2);
    bson_t k;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "key", &k);
    BSON_APPEND_INT32(&k, "_id", 1);
    bson_append_document_end(out.mut(), &k);
    BSON_APPEND_UTF8(out.mut(), "name", name.c_str());
    BSON_APPEND_BOOL(out.mut(), "unique", true);
    return out;
}

/// create's expireAfterSeconds: only for a clustered collection (its _id expires).
void checkClusteredOptions(const bson_t* options, bool testCommands) {
    bson_iter_t it;
    const bool clustered = bson_has_field(options, "clusteredIndex");
    if (bson::find(options, "expireAfterSeconds", &it)) {
        if (!clustered)
            uasserted(ErrorCode::InvalidOptions,
                      "'expireAfterSeconds' can be used only for clustered collections or "
                      "timeseries collections");
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            uasserted(ErrorCode::TypeMismatch,
                      fmt::format("BSON field 'create.expireAfterSeconds' is the wrong type '{}', "
                                  "expected types '[long, int, decimal, double]'",
                                  bson::typeName(bson_iter_type(&it))));
        if (bson::toDouble(*bson_iter_value(&it)) < 0)
            uasserted(ErrorCode::InvalidOptions,
                      "TTL index 'expireAfterSeconds' option must be within an acceptable range, "
                      "try a lower number");
    }
    if (!clustered) return;
    if (bson_has_field(options, "size"))
        uasserted(static_cast<ErrorCode>(6049200),
                  "'size' field for capped collections is not allowed on clustered collections. "
                  "Did you mean 'capped: true' with 'expireAfterSeconds'?");
    if (bson_has_field(options, "max"))
        uasserted(static_cast<ErrorCode>(6049204),
                  "'max' field for capped collections is not allowed on clustered collections. "
                  "Did you mean 'capped: true' with 'expireAfterSeconds'?");
    if (bson::find(options, "capped", &it) && bson::isTruthy(*bson_iter_value(&it)))
        uasserted(static_cast<ErrorCode>(6127800),
                  testCommands ? "Clustered capped collections are not supported by this store"
                               : "Clustered capped collection only available with "
                                 "'enableTestCommands' server parameter");
}

void appendUuid(bson_t* out, const char* key, const CollectionEntry& e) {
    bson_append_binary(out, key, -1, BSON_SUBTYPE_UUID, e.uuid, 16);
}

HALO_REGISTER_COMMAND(CommandSpec{
    {"create"}, [](OperationContext& op, bson_t*) {
        std::string ns = nsOf(op);
        if (op.args.has("viewOn") || op.args.has("pipeline")) return createView(op, ns, op.cmd);
        if (findView(op.store, ns))
            uasserted(ErrorCode::NamespaceExists, fmt::format("Namespace {} already exists", ns));
        // Options other than the name are kept as the collection's options.
        bson::Doc options;
        bson_iter_t it;
        bson_iter_init(&it, op.cmd);
        bson_iter_next(&it);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "$db" || k == "lsid" || k == "$clusterTime" || k == "writeConcern" ||
                k == "txnNumber" || k == "$readPreference" || k == "comment" || k == "autocommit" ||
                k == "startTransaction" || k == "apiVersion" || k == "apiStrict" ||
                k == "apiDeprecationErrors")
                continue;
            if (k == "timeseries")
                uasserted(ErrorCode::CommandNotSupported,
                          "time-series collections are not supported by this store");
            if (k == "clusteredIndex") {
                if (auto spec = canonicalClusteredIndex(it))
                    BSON_APPEND_DOCUMENT(options.mut(), "clusteredIndex", spec->get());
                continue;
            }
            bson::appendIter(options.mut(), k, it);
        }
        checkClusteredOptions(options.get(), op.store.options().enableTestCommands);
        checkValidationOptions(ns, options.get(), "create", nullptr);
        std::unique_lock lk(op.store.catalog().ddlLock());
        auto sw = op.store.catalog().createCollection(ns, options.get());
        if (!sw.isOK()) {
            if (sw.getStatus().code() == ErrorCode::NamespaceExists)
                uasserted(ErrorCode::NamespaceExists,
                          fmt::format("Collection {} already exists. NS: {}", ns, ns));
            uassertStatusOK(sw.getStatus());
        }
        noteCreatedInTransaction(op.store.catalog(), *sw.getValue());
        logCreate(op.store, *sw.getValue());
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"drop"}, [](OperationContext& op, bson_t* reply) {
        std::string ns = nsOf(op);
        if (dropView(op, ns)) return;
        std::unique_lock lk(op.store.catalog().ddlLock());
        auto coll = op.store.catalog().lookup(ns);
        if (!coll) return;  // dropping a missing collection succeeds since 7.0
        BSON_APPEND_INT32(reply, "nIndexesWas", static_cast<int32_t>(coll->indexes.size()));
        BSON_APPEND_UTF8(reply, "ns", ns.c_str());
        uassertStatusOK(op.store.catalog().dropCollection(ns));
        op.store.top().collectionDropped(ns);
        bson::Doc o;
        BSON_APPEND_UTF8(o.mut(), "drop", coll->name.c_str());
        logCommand(op.store, coll->db, o.get(), coll->uuid);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"dropDatabase"}, [](OperationContext& op, bson_t* reply) {
        validateDbName(op.db);
        std::unique_lock lk(op.store.catalog().ddlLock());
        for (const auto& c : op.store.catalog().listCollections(op.db)) {
            uassertStatusOK(op.store.catalog().dropCollection(c->ns));
            op.store.top().collectionDropped(c->ns);
            bson::Doc o;
            BSON_APPEND_UTF8(o.mut(), "drop", c->name.c_str());
            logCommand(op.store, c->db, o.get(), c->uuid);
        }
        bson::Doc o;
        BSON_APPEND_INT32(o.mut(), "dropDatabase", 1);
        logCommand(op.store, op.db, o.get());
        // As mongod: the database's profiling level goes with it.
        op.store.profiling().update(op.db, 0, std::nullopt, std::nullopt, std::nullopt);
        BSON_APPEND_UTF8(reply, "dropped", op.db.c_str());
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"listDatabases"},
    [](OperationContext& op, bson_t* reply) {
        bool nameOnly = cmdarg::getBool(op.cmd, "nameOnly", false);
        bson_t fv;
        std::unique_ptr<query::Matcher> filter;
        if (cmdarg::getDoc(op.cmd, "filter", &fv, "listDatabases") && bson_count_keys(&fv) > 0)
            filter = uassertStatusOK(query::Matcher::parse(&fv));
        std::shared_lock lk(op.store.catalog().ddlLock());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(reply, "databases", &arr);
        int i = 0;
        int64_t total = 0;
        for (const auto& db : op.store.catalog().listDatabases()) {
            if (!mayListDatabase(op, db)) continue;
            int64_t size = 0;
            for (const auto& c : op.store.catalog().listCollections(db)) size += c->dataSize.load();
            bson::Doc d;
            BSON_APPEND_UTF8(d.mut(), "name", db.c_str());
            BSON_APPEND_INT64(d.mut(), "sizeOnDisk", size);
            BSON_APPEND_BOOL(d.mut(), "empty", size == 0);
            if (filter && !filter->matches(d.get())) continue;
            total += size;
            std::string k = std::to_string(i++);
            if (nameOnly) {
                bson_t n;
                BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &n);
                BSON_APPEND_UTF8(&n, "name", db.c_str());
                bson_append_document_end(&arr, &n);
            } else {
                BSON_APPEND_DOCUMENT(&arr, k.c_str(), d.get());
            }
        }
        bson_append_array_end(reply, &arr);
        if (!nameOnly) BSON_APPEND_INT64(reply, "totalSize", total);
    },
    true});

HALO_REGISTER_COMMAND(CommandSpec{
    {"listCollections"}, [](OperationContext& op, bson_t* reply) {
        validateDbName(op.db);
        bool nameOnly = cmdarg::getBool(op.cmd, "nameOnly", false);
        // {authorizedCollections: true, nameOnly: true} from a user without
        // listCollections on the database: the collections it holds privileges on.
        const authz::PrivilegeSet* onlyAuthorized = nullptr;
        if (op.access && op.client.user && nameOnly &&
            cmdarg::getBool(op.cmd, "authorizedCollections", false) &&
            !op.client.user->privileges->isAuthorized(authz::ResourcePattern::database(op.db),
                                                      authz::ActionType::listCollections))
            onlyAuthorized = op.client.user->privileges.get();
        bson_t fv;
        bson::Doc filter;
        if (cmdarg::getDoc(op.cmd, "filter", &fv, "listCollections"))
            filter = bson::Doc::copyOf(&fv);
        std::unique_ptr<query::Matcher> matcher;
        if (!filter.empty()) matcher = uassertStatusOK(query::Matcher::parse(filter.get()));
        std::shared_lock lk(op.store.catalog().ddlLock());
        bson_t cursor, arr;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
        BSON_APPEND_INT64(&cursor, "id", 0);
        std::string ns = op.db + ".$cmd.listCollections";
        BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        int i = 0;
        for (const auto& c : op.store.catalog().listCollections(op.db)) {
            if (onlyAuthorized && !onlyAuthorized->anyOnCollection(op.db, c->name)) continue;
            bson::Doc d;
            BSON_APPEND_UTF8(d.mut(), "name", c->name.c_str());
            BSON_APPEND_UTF8(d.mut(), "type", "collection");
            if (!nameOnly) {
                BSON_APPEND_DOCUMENT(d.mut(), "options", c->options.get());
                bson_t info;
                BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "info", &info);
                BSON_APPEND_BOOL(&info, "readOnly", false);
                appendUuid(&info, "uuid", *c);
                bson_append_document_end(d.mut(), &info);
                // A clustered collection has no separate _id index (mongod lists none).
                const IndexEntry* id = c->idIndex();
                if (id && !bson_has_field(c->options.get(), "clusteredIndex"))
                    BSON_APPEND_DOCUMENT(d.mut(), "idIndex", id->spec.get());
            }
            if (matcher && !matcher->matches(d.get())) continue;
            std::string k = std::to_string(i++);
            BSON_APPEND_DOCUMENT(&arr, k.c_str(), d.get());
        }
        for (const auto& v : viewsIn(op.store, op.db)) {
            std::string name(splitNs(v.ns).second);
            if (onlyAuthorized && !onlyAuthorized->anyOnCollection(op.db, name)) continue;
            bson::Doc d;
            BSON_APPEND_UTF8(d.mut(), "name", name.c_str());
            BSON_APPEND_UTF8(d.mut(), "type", "view");
            if (!nameOnly) {
                bson_t options, info;
                BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "options", &options);
                BSON_APPEND_UTF8(&options, "viewOn", v.viewOn.c_str());
                BSON_APPEND_ARRAY(&options, "pipeline", v.pipeline.get());
                if (v.collation) BSON_APPEND_DOCUMENT(&options, "collation", v.collation->get());
                bson_append_document_end(d.mut(), &options);
                BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "info", &info);
                BSON_APPEND_BOOL(&info, "readOnly", true);
                bson_append_document_end(d.mut(), &info);
            }
            if (matcher && !matcher->matches(d.get())) continue;
            std::string k = std::to_string(i++);
            BSON_APPEND_DOCUMENT(&arr, k.c_str(), d.get());
        }
        bson_append_array_end(&cursor, &arr);
        bson_append_document_end(reply, &cursor);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"renameCollection"},
    [](OperationContext& op, bson_t*) {
        bson_iter_t it;
        bson_iter_init(&it, op.cmd);
        bson_iter_next(&it);
        if (!BSON_ITER_HOLDS_UTF8(&it))
            uasserted(ErrorCode::TypeMismatch, "renameCollection must be a string");
        std::string from = bson_iter_utf8(&it, nullptr);
        if (!bson::find(op.cmd, "to", &it) || !BSON_ITER_HOLDS_UTF8(&it))
            uasserted(ErrorCode::TypeMismatch, "'to' must be of type String");
        std::string to = bson_iter_utf8(&it, nullptr);
        bool dropTarget = cmdarg::getBool(op.cmd, "dropTarget", false);
        if (from.find('.') == std::string::npos || to.find('.') == std::string::npos)
            uasserted(ErrorCode::InvalidNamespace, "Invalid namespace");
        if (from == to)
            uasserted(ErrorCode::IllegalOperation, "Can't rename a collection to itself");
        std::unique_lock lk(op.store.catalog().ddlLock());
        if (!op.store.catalog().lookup(from))
            uasserted(ErrorCode::NamespaceNotFound,
                      "Source collection " + from + " does not exist");
        if (op.store.catalog().lookup(to) && !dropTarget)
            uasserted(ErrorCode::NamespaceExists, "target namespace exists");
        auto source = op.store.catalog().lookup(from);
        auto target = op.store.catalog().lookup(to);  // dropped by the rename
        uassertStatusOK(op.store.catalog().renameCollection(from, to, dropTarget));
        op.store.top().collectionDropped(from);
        op.store.top().collectionDropped(to);
        bson::Doc o;
        BSON_APPEND_UTF8(o.mut(), "renameCollection", from.c_str());
        BSON_APPEND_UTF8(o.mut(), "to", to.c_str());
        // As mongod's oplog: the UUID of the collection the rename replaced, if any.
        if (target)
            bson_append_binary(o.mut(), "dropTarget", 10, BSON_SUBTYPE_UUID, target->uuid, 16);
        else
            BSON_APPEND_BOOL(o.mut(), "dropTarget", false);
        logCommand(op.store, splitNs(from).first, o.get(), source->uuid);
    },
    true});

/// Whether every spec in the `indexes` array names an index the collection
/// already has with the same key pattern.
bool allIndexesExist(const CollectionEntry& coll, const bson_iter_t& indexes) {
    bson_iter_t a;
    bson_iter_recurse(&indexes, &a);
    bool any = false;
    while (bson_iter_next(&a)) {
        bson_t spec, key;
        if (!BSON_ITER_HOLDS_DOCUMENT(&a)) return false;
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&a, &len, &data);
        if (!bson_init_static(&spec, data, len)) return false;
        bson_iter_t name;
        if (!bson::find(&spec, "name", &name) || !BSON_ITER_HOLDS_UTF8(&name) ||
            !bson::subDocument(&spec, "key", &key))
            return false;
        const IndexEntry* idx = coll.findIndex(bson_iter_utf8(&name, nullptr));
        if (!idx || bson::compareDocs(idx->keyPattern.get(), &key) != 0) return false;
        any = true;
    }
    return any;
}

HALO_REGISTER_COMMAND(CommandSpec{
    {"createIndexes"}, [](OperationContext& op, bson_t* reply) {
        std::string ns = nsOf(op);
        bson_iter_t it;
        if (!bson::find(op.cmd, "indexes", &it) || !BSON_ITER_HOLDS_ARRAY(&it))
            uasserted(ErrorCode::Location40414,
                      "BSON field 'createIndexes.indexes' is missing but a required field");
        refuseView(op.store, ns);
        std::unique_lock lk(op.store.catalog().ddlLock());
        bool created = op.store.catalog().lookup(ns) == nullptr;
        if (currentOperation().txn && !created) {
            // Index builds are not transactional: inside a transaction only a
            // collection the transaction created, still empty, takes new
            // indexes (as in mongod); indexes that all exist are a no-op.
            auto existing = op.store.catalog().lookup(ns);
            int n = static_cast<int>(existing->indexes.size());
            if (allIndexesExist(*existing, it)) {
                BSON_APPEND_INT32(reply, "numIndexesBefore", n);
                BSON_APPEND_INT32(reply, "numIndexesAfter", n);
                BSON_APPEND_UTF8(reply, "note", "all indexes already exist");
                BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", false);
                return;
            }
            if (!createdInThisTransaction(*existing))
                uasserted(ErrorCode::OperationNotSupportedInTransaction,
                          fmt::format("Cannot create new indexes on existing collection {} in a "
                                      "multi-document transaction.",
                                      ns));
            // The transaction's own documents are invisible to the index build.
            Session& ts = *currentOperation().txn->wtSession;
            Cursor c = ts.open(existing->uri);
            if (c->next(c.get()) == 0)
                uasserted(ErrorCode::OperationNotSupportedInTransaction,
                          fmt::format("Cannot create new indexes on non-empty collection {} in a "
                                      "multi-document transaction.",
                                      ns));
        }
        auto coll = op.store.catalog().getOrCreate(ns);
        if (created) {
            noteCreatedInTransaction(op.store.catalog(), *coll);
            logCreate(op.store, *coll);
        }
        int before = static_cast<int>(coll->indexes.size());
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        int specs = 0;
        while (bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&a))
                uasserted(ErrorCode::TypeMismatch, "index specs must be objects");
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View spec(data, len);
            size_t before = op.store.catalog().lookup(ns)->indexes.size();
            uassertStatusOK(op.store.catalog().createIndex(ns, spec.get()));
            auto after = op.store.catalog().lookup(ns);
            if (after->indexes.size() > before) {
                bson::Doc o;
                BSON_APPEND_UTF8(o.mut(), "createIndexes", after->name.c_str());
                BSON_APPEND_DOCUMENT(o.mut(), "spec", after->indexes.back()->spec.get());
                logCommand(op.store, after->db, o.get(), after->uuid);
            }
            ++specs;
        }
        if (specs == 0) uasserted(ErrorCode::BadValue, "Must specify at least one index to create");
        int after = static_cast<int>(op.store.catalog().lookup(ns)->indexes.size());
        BSON_APPEND_INT32(reply, "numIndexesBefore", before);
        BSON_APPEND_INT32(reply, "numIndexesAfter", after);
        if (after == before) BSON_APPEND_UTF8(reply, "note", "all indexes already exist");
        BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", created);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"collMod"}, [](OperationContext& op, bson_t*) {
        std::string ns = nsOf(op);
        if (findView(op.store, ns)) {
            // A view takes a new viewOn and pipeline, nothing else.
            bson::Doc viewOn;  // {viewOn: ...} when given
            bson_iter_t it;
            bson_iter_init(&it, op.cmd);
            bson_iter_next(&it);
            while (bson_iter_next(&it)) {
                std::string_view k = bson_iter_key(&it);
                if (k == "viewOn")
                    bson::appendIter(viewOn.mut(), k, it);
                else if (k == "pipeline" && !BSON_ITER_HOLDS_ARRAY(&it))
                    uasserted(ErrorCode::TypeMismatch, "'pipeline' must be an array");
                else if (k != "pipeline" && !cmdarg::isGenericArgument(k))
                    uasserted(ErrorCode::InvalidOptions,
                              fmt::format("option not supported on a view: {}", k));
            }
            bson_t p;
            bool havePipeline = op.args.subDocument("pipeline", &p);
            modifyView(op, ns, viewOn.empty() ? nullptr : viewOn.get(),
                       havePipeline ? &p : nullptr);
            return;
        }
        std::unique_lock lk(op.store.catalog().ddlLock());
        auto coll = op.store.catalog().lookup(ns);
        if (!coll)
            uasserted(ErrorCode::NamespaceNotFound, fmt::format("ns does not exist: {}", ns));
        // Options replace their previous values; others are kept.
        bson::Doc next;
        bson::Doc changes;
        bson_iter_t it;
        bson_iter_init(&it, op.cmd);
        bson_iter_next(&it);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "changeStreamPreAndPostImages" || k == "validator" || k == "validationLevel" ||
                k == "validationAction" || k == "expireAfterSeconds") {
                bson::appendIter(changes.mut(), k, it);
            } else if (k == "index") {
                continue;  // TTL/hidden changes on an index: accepted, nothing to store yet
            } else if (k == "$db" || k == "lsid" || k == "$clusterTime" || k == "writeConcern" ||
                       k == "comment" || k == "$readPreference" || k == "apiVersion" ||
                       k == "apiStrict" || k == "apiDeprecationErrors") {
                continue;
            } else if (k == "viewOn" || k == "pipeline") {
                uasserted(ErrorCode::InvalidOptions,
                          fmt::format("collMod: {} is a collection, not a view: {} applies only "
                                      "to views",
                                      ns, k));
            } else {
                uasserted(ErrorCode::InvalidOptions,
                          fmt::format("unknown option to collMod: {}", k));
            }
        }
        bson_iter_init(&it, coll->options.get());
        while (bson_iter_next(&it))
            if (!bson_has_field(changes.get(), bson_iter_key(&it)))
                bson::appendIter(next.mut(), bson_iter_key(&it), it);
        bson_concat(next.mut(), changes.get());
        checkValidationOptions(ns, next.get(), "collMod", coll.get());
        uassertStatusOK(op.store.catalog().setOptions(ns, next.get()));
        bson::Doc o;
        BSON_APPEND_UTF8(o.mut(), "collMod", coll->name.c_str());
        bson_concat(o.mut(), changes.get());
        logCommand(op.store, coll->db, o.get(), coll->uuid);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"listIndexes"}, [](OperationContext& op, bson_t* reply) {
        std::string ns = nsOf(op);
        refuseView(op.store, ns);
        std::shared_lock lk(op.store.catalog().ddlLock());
        auto coll = op.store.catalog().lookup(ns);
        if (!coll)
            uasserted(ErrorCode::NamespaceNotFound, fmt::format("ns does not exist: {}", ns));
        bson_t cursor, arr;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
        BSON_APPEND_INT64(&cursor, "id", 0);
        std::string cns = op.db + ".$cmd.listIndexes." + coll->name;
        BSON_APPEND_UTF8(&cursor, "ns", cns.c_str());
        BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &arr);
        bson_t clustered;
        const bool isClustered =
            bson::subDocument(coll->options.get(), "clusteredIndex", &clustered);
        for (size_t i = 0; i < coll->indexes.size(); ++i) {
            std::string k = std::to_string(i);
            const IndexEntry& idx = *coll->indexes[i];
            if (!isClustered || !idx.isIdIndex()) {
                BSON_APPEND_DOCUMENT(&arr, k.c_str(), idx.spec.get());
                continue;
            }
            // As mongod lists the cluster key: the clusteredIndex spec, then the
            // collation and the collection's expireAfterSeconds, then clustered: true.
            bson::Doc shown = bson::Doc::copyOf(&clustered);
            bson_iter_t f;
            if (bson::find(idx.spec.get(), "collation", &f))
                bson::appendIter(shown.mut(), "collation", f);
            if (bson::find(coll->options.get(), "expireAfterSeconds", &f))
                bson::appendIter(shown.mut(), "expireAfterSeconds", f);
            BSON_APPEND_BOOL(shown.mut(), "clustered", true);
            BSON_APPEND_DOCUMENT(&arr, k.c_str(), shown.get());
        }
        bson_append_array_end(&cursor, &arr);
        bson_append_document_end(reply, &cursor);
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"dropIndexes", "deleteIndexes"}, [](OperationContext& op, bson_t* reply) {
        std::string ns = nsOf(op);
        std::unique_lock lk(op.store.catalog().ddlLock());
        auto coll = op.store.catalog().lookup(ns);
        if (!coll) uasserted(ErrorCode::NamespaceNotFound, fmt::format("ns not found {}", ns));
        BSON_APPEND_INT32(reply, "nIndexesWas", static_cast<int32_t>(coll->indexes.size()));
        bson_iter_t it;
        if (!bson::find(op.cmd, "index", &it))
            uasserted(ErrorCode::Location40414,
                      "BSON field 'dropIndexes.index' is missing but a required field");
        std::vector<std::string> names;
        if (BSON_ITER_HOLDS_UTF8(&it)) {
            std::string name = bson_iter_utf8(&it, nullptr);
            if (name == "*") {
                for (const auto& i : coll->indexes)
                    if (!i->isIdIndex()) names.push_back(i->name);
            } else {
                names.push_back(name);
            }
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t a;
            bson_iter_recurse(&it, &a);
            while (bson_iter_next(&a))
                if (BSON_ITER_HOLDS_UTF8(&a)) names.emplace_back(bson_iter_utf8(&a, nullptr));
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t key;
            bson::subDocument(op.cmd, "index", &key);
            std::string found;
            for (const auto& i : coll->indexes)
                if (bson::compareDocs(i->keyPattern.get(), &key) == 0) found = i->name;
            if (found.empty())
                uasserted(ErrorCode::IndexNotFound,
                          fmt::format("can't find index with key: {}", bson::toJson(&key)));
            names.push_back(found);
        }
        const auto clusteredName = clusteredIndexName(*coll);
        for (const auto& n : names) {
            if (n == "_id_" || n == clusteredName)
                uasserted(ErrorCode::InvalidOptions, "cannot drop _id index");
            const IndexEntry* idx = coll->findIndex(n);
            bson::Doc spec = idx ? idx->spec.copy() : bson::Doc();
            uassertStatusOK(op.store.catalog().dropIndex(ns, n));
            bson::Doc o;
            BSON_APPEND_UTF8(o.mut(), "dropIndexes", coll->name.c_str());
            BSON_APPEND_UTF8(o.mut(), "index", n.c_str());
            BSON_APPEND_DOCUMENT(o.mut(), "spec", spec.get());
            logCommand(op.store, coll->db, o.get(), coll->uuid);
        }
    }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"explain"}, [](OperationContext& op, bson_t* reply) {
        bson_t inner;
        if (!cmdarg::getDoc(op.cmd, "explain", &inner, "explain"))
            uasserted(ErrorCode::FailedToParse, "explain command requires a nested object");
        bson_iter_t it;
        bson_iter_init(&it, &inner);
        if (!bson_iter_next(&it))
            uasserted(ErrorCode::FailedToParse, "explain of an empty command");
        std::string verb = bson_iter_key(&it);
        if (!BSON_ITER_HOLDS_UTF8(&it))
            uasserted(ErrorCode::InvalidNamespace, "collection name must be a string");
        std::string ns = op.db + "." + bson_iter_utf8(&it, nullptr);
        FindSpec spec;
        bson_t sub;
        // The explained operation's collation: the command's, or its first statement's.
        std::optional<bson::Doc> collation;
        if (bson::subDocument(&inner, "collation", &sub)) collation = bson::Doc::copyOf(&sub);
        auto take = [&](const char* f) {
            return bson::subDocument(&inner, f, &sub) ? bson::Doc::copyOf(&sub) : bson::Doc();
        };
        if (verb == "find") {
            spec.filter = take("filter");
            spec.sort = take("sort");
            spec.projection = take("projection");
            spec.skip = cmdarg::getInt(&inner, "skip", 0, "find");
            spec.limit = cmdarg::getInt(&inner, "limit", 0, "find");
        } else if (verb == "count" || verb == "distinct") {
            spec.filter = take("query");
        } else if (verb == "aggregate") {
            // The leading $match decides the access path.
            bson_t pipeline;
            if (bson::subDocument(&inner, "pipeline", &pipeline)) {
                bson_iter_t p;
                bson_iter_init(&p, &pipeline);
                if (bson_iter_next(&p) && BSON_ITER_HOLDS_DOCUMENT(&p)) {
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&p, &len, &data);
                    bson_t stage;
                    bson_init_static(&stage, data, len);
                    if (bson::subDocument(&stage, "$match", &sub))
                        spec.filter = bson::Doc::copyOf(&sub);
                }
            }
        } else if (verb == "update" || verb == "delete" || verb == "findAndModify") {
            bson_t arr;
            const char* listName = verb == "update" ? "updates" : "deletes";
            if (verb == "findAndModify") {
                spec.filter = take("query");
                spec.sort = take("sort");
            } else if (bson::subDocument(&inner, listName, &arr)) {
                bson_iter_t p;
                bson_iter_init(&p, &arr);
                if (bson_iter_next(&p) && BSON_ITER_HOLDS_DOCUMENT(&p)) {
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&p, &len, &data);
                    bson_t stmt;
                    bson_init_static(&stmt, data, len);
                    if (bson::subDocument(&stmt, "q", &sub)) spec.filter = bson::Doc::copyOf(&sub);
                    if (bson::subDocument(&stmt, "collation", &sub))
                        collation = bson::Doc::copyOf(&sub);
                }
            }
        } else {
            uasserted(ErrorCode::CommandNotFound,
                      fmt::format("Explain failed due to unknown command: {}", verb));
        }
        bson_iter_t h;
        if (bson::find(&inner, "hint", &h)) {
            if (BSON_ITER_HOLDS_UTF8(&h))
                BSON_APPEND_UTF8(spec.hint.mut(), "$hint", bson_iter_utf8(&h, nullptr));
            else
                spec.hint = take("hint");
        }
        std::string verbosity = "allPlansExecution";
        if (bson::find(op.cmd, "verbosity", &it) && BSON_ITER_HOLDS_UTF8(&it))
            verbosity = bson_iter_utf8(&it, nullptr);
        CollectionLock lk(op.store.catalog());
        auto coll = op.store.catalog().lookup(ns);
        spec.collator = effectiveCollator(collation ? collation->get() : nullptr, coll.get());
        FindExecutor exec(coll, std::move(spec));
        bson_t qp, wp, rejected;
        BSON_APPEND_INT32(reply, "explainVersion", 1);
        BSON_APPEND_DOCUMENT_BEGIN(reply, "queryPlanner", &qp);
        BSON_APPEND_UTF8(&qp, "namespace", ns.c_str());
        BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
        if (coll) {
            exec.explain(&wp);
        } else {
            BSON_APPEND_UTF8(&wp, "stage", "EOF");
        }
        bson_append_document_end(&qp, &wp);
        BSON_APPEND_ARRAY_BEGIN(&qp, "rejectedPlans", &rejected);
        bson_append_array_end(&qp, &rejected);
        bson_append_document_end(reply, &qp);
        if (coll && verbosity != "queryPlanner") {
            int64_t n = 0;
            {
                PooledSession s(op.store.catalog().sessions());
                Txn txn(*s);
                while (exec.next(*s)) ++n;
            }
            bson_t es;
            BSON_APPEND_DOCUMENT_BEGIN(reply, "executionStats", &es);
            BSON_APPEND_BOOL(&es, "executionSuccess", true);
            BSON_APPEND_INT64(&es, "nReturned", n);
            BSON_APPEND_INT64(&es, "totalKeysExamined", exec.keysExamined());
            BSON_APPEND_INT64(&es, "totalDocsExamined", exec.docsExamined());
            bson_append_document_end(reply, &es);
        }
        bson_t si;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "serverInfo", &si);
        BSON_APPEND_UTF8(&si, "version", "7.0.15");
        bson_append_document_end(reply, &si);
    }});

}  // namespace
}  // namespace halo::store
