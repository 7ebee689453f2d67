// $out and $merge: see aggregate_write.h.
#include "store/commands/aggregate_write.h"

#include <fmt/format.h>

#include <set>

#include "bson/compare.h"
#include "store/commands/document_validation.h"
#include "store/commands/write_path.h"
#include "store/query/expression.h"
#include "store/txn/session_catalog.h"

namespace halo::store {
namespace {

// mongod's codes for $out and $merge (numbered, without names).
constexpr ErrorCode kCode13113 = static_cast<ErrorCode>(13113);
constexpr ErrorCode kCode16990 = static_cast<ErrorCode>(16990);
constexpr ErrorCode kCode17152 = static_cast<ErrorCode>(17152);
constexpr ErrorCode kCode17385 = static_cast<ErrorCode>(17385);
constexpr ErrorCode kCode28769 = static_cast<ErrorCode>(28769);
constexpr ErrorCode kCode31319 = static_cast<ErrorCode>(31319);
constexpr ErrorCode kCode31320 = static_cast<ErrorCode>(31320);
constexpr ErrorCode kCode31321 = static_cast<ErrorCode>(31321);
constexpr ErrorCode kCode31465 = static_cast<ErrorCode>(31465);
constexpr ErrorCode kCode40601 = static_cast<ErrorCode>(40601);
constexpr ErrorCode kCode51132 = static_cast<ErrorCode>(51132);
constexpr ErrorCode kCode51134 = static_cast<ErrorCode>(51134);
constexpr ErrorCode kCode51181 = static_cast<ErrorCode>(51181);
constexpr ErrorCode kCode51183 = static_cast<ErrorCode>(51183);
constexpr ErrorCode kCode51185 = static_cast<ErrorCode>(51185);
constexpr ErrorCode kCode51186 = static_cast<ErrorCode>(51186);
constexpr ErrorCode kCode51187 = static_cast<ErrorCode>(51187);
constexpr ErrorCode kCode51199 = static_cast<ErrorCode>(51199);
constexpr ErrorCode kCode51273 = static_cast<ErrorCode>(51273);

using WhenMatched = WriteStageSpec::WhenMatched;
using WhenNotMatched = WriteStageSpec::WhenNotMatched;

std::string_view firstKey(const bson_iter_t& stage) {
    bson_iter_t s;
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage) || !bson_iter_recurse(&stage, &s) || !bson_iter_next(&s))
        return {};
    return bson_iter_key(&s);
}

[[noreturn]] void unknownField(std::string_view stage, std::string_view field) {
    uasserted(ErrorCode::Location40415,
              fmt::format("BSON field '{}.{}' is an unknown field.", stage, field));
}

[[noreturn]] void missingField(std::string_view stage, std::string_view field) {
    uasserted(ErrorCode::Location40414,
              fmt::format("BSON field '{}.{}' is missing but a required field", stage, field));
}

std::string stringField(const bson_iter_t& it, std::string_view stage) {
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type 'string'",
                              stage, bson_iter_key(&it), bson::typeName(bson_iter_type(&it))));
    return bson_iter_utf8(&it, nullptr);
}

/// {db, coll} (either may be absent in $merge's `into`).
void parseTargetDoc(const bson_iter_t& it, std::string_view stage, WriteStageSpec& w,
                    bool dbRequired) {
    bson_iter_t f;
    bson_iter_recurse(&it, &f);
    bool haveColl = false, haveDb = false;
    while (bson_iter_next(&f)) {
        std::string_view k = bson_iter_key(&f);
        if (k == "db") {
            w.db = stringField(f, stage);
            haveDb = true;
        } else if (k == "coll") {
            w.coll = stringField(f, stage);
            haveColl = true;
        } else if (k == "timeseries" && w.kind == WriteStageSpec::Kind::Out) {
            uasserted(ErrorCode::CommandNotSupported,
                      "$out to a time-series collection is not supported by this store");
        } else {
            unknownField(stage, k);
        }
    }
    if (!haveColl) missingField(stage, "coll");
    if (dbRequired && !haveDb) missingField(stage, "db");
}

void checkTarget(const WriteStageSpec& w) {
    bool out = w.kind == WriteStageSpec::Kind::Out;
    if (w.coll.empty() || w.db.empty() || w.coll.find('$') != std::string::npos ||
        w.db.find_first_of("/\\. \"$") != std::string::npos)
        uasserted(ErrorCode::InvalidNamespace,
                  fmt::format("Invalid {} target namespace: '{}'", w.stageName(), w.ns()));
    if (w.coll.starts_with("system."))
        uasserted(out ? kCode17385 : kCode31319,
                  out ? fmt::format("Can't $out to special collection: {}", w.coll)
                      : fmt::format("Cannot $merge to special collection: {}", w.coll));
    if (w.db == "admin" || w.db == "local" || w.db == "config")
        uasserted(out ? kCode31321 : kCode31320,
                  out ? fmt::format("Can't $out to internal database: {}", w.db)
                      : fmt::format("Cannot $merge to internal database: {}", w.db));
}

WriteStageSpec parseOut(const bson_iter_t& arg, const std::string& db) {
    WriteStageSpec w;
    w.kind = WriteStageSpec::Kind::Out;
    w.db = db;
    if (BSON_ITER_HOLDS_UTF8(&arg)) {
        w.coll = bson_iter_utf8(&arg, nullptr);
    } else if (BSON_ITER_HOLDS_DOCUMENT(&arg)) {
        parseTargetDoc(arg, "$out", w, true);
    } else {
        uasserted(kCode16990,
                  fmt::format("$out only supports a string or object argument, but found {}",
                              bson::typeName(bson_iter_type(&arg))));
    }
    checkTarget(w);
    return w;
}

WhenMatched parseWhenMatched(const bson_iter_t& it, WriteStageSpec& w) {
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_array(&it, &len, &data);
        w.whenMatchedPipeline = bson::Doc::copyOf(data, len);
        return WhenMatched::Pipeline;
    }
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '$merge.whenMatched' is the wrong type '{}', expected "
                              "types '[string, array]'",
                              bson::typeName(bson_iter_type(&it))));
    std::string_view v = bson_iter_utf8(&it, nullptr);
    if (v == "replace") return WhenMatched::Replace;
    if (v == "keepExisting") return WhenMatched::KeepExisting;
    if (v == "merge") return WhenMatched::Merge;
    if (v == "fail") return WhenMatched::Fail;
    uasserted(ErrorCode::BadValue,
              fmt::format("Enumeration value '{}' for field '$merge.whenMatched' is not a valid "
                          "value.",
                          v));
}

WhenNotMatched parseWhenNotMatched(const bson_iter_t& it) {
    std::string v = stringField(it, "$merge");
    if (v == "insert") return WhenNotMatched::Insert;
    if (v == "discard") return WhenNotMatched::Discard;
    if (v == "fail") return WhenNotMatched::Fail;
    uasserted(ErrorCode::BadValue,
              fmt::format("Enumeration value '{}' for field '$merge.whenNotMatched' is not a "
                          "valid value.",
                          v));
}

std::vector<std::string> parseOn(const bson_iter_t& it) {
    std::vector<std::string> on;
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        on.push_back(bson_iter_utf8(&it, nullptr));
    } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        std::set<std::string> seen;
        while (bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_UTF8(&a))
                uasserted(kCode51134,
                          fmt::format("$merge 'on' array elements must be strings, but found {}",
                                      bson::typeName(bson_iter_type(&a))));
            std::string f = bson_iter_utf8(&a, nullptr);
            if (!seen.insert(f).second)
                uasserted(kCode31465, fmt::format("Found a duplicate field '{}'", f));
            on.push_back(std::move(f));
        }
        if (on.empty())
            uasserted(kCode51187,
                      "If explicitly specifying $merge 'on', must include at least one field");
    } else {
        uasserted(kCode51186,
                  fmt::format("$merge 'on' field must be either a string or an array of strings, "
                              "but found {}",
                              bson::typeName(bson_iter_type(&it))));
    }
    return on;
}

const char* whenMatchedName(WhenMatched m) {
    switch (m) {
        case WhenMatched::Replace:
            return "replace";
        case WhenMatched::KeepExisting:
            return "keepExisting";
        case WhenMatched::Merge:
            return "merge";
        case WhenMatched::Fail:
            return "fail";
        case WhenMatched::Pipeline:
            return "pipeline";
    }
    return "";
}

const char* whenNotMatchedName(WhenNotMatched m) {
    switch (m) {
        case WhenNotMatched::Insert:
            return "insert";
        case WhenNotMatched::Discard:
            return "discard";
        case WhenNotMatched::Fail:
            return "fail";
    }
    return "";
}

WriteStageSpec parseMerge(const bson_iter_t& arg, const std::string& db) {
    WriteStageSpec w;
    w.kind = WriteStageSpec::Kind::Merge;
    w.db = db;
    if (BSON_ITER_HOLDS_UTF8(&arg)) {
        w.coll = bson_iter_utf8(&arg, nullptr);
        checkTarget(w);
        return w;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(&arg))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("$merge requires a string or object argument, but found {}",
                              bson::typeName(bson_iter_type(&arg))));
    bson_iter_t f;
    bson_iter_recurse(&arg, &f);
    bool haveInto = false;
    while (bson_iter_next(&f)) {
        std::string_view k = bson_iter_key(&f);
        if (k == "into") {
            haveInto = true;
            if (BSON_ITER_HOLDS_UTF8(&f))
                w.coll = bson_iter_utf8(&f, nullptr);
            else if (BSON_ITER_HOLDS_DOCUMENT(&f))
                parseTargetDoc(f, "$merge.into", w, false);
            else
                uasserted(ErrorCode::TypeMismatch,
                          fmt::format("BSON field '$merge.into' is the wrong type '{}', expected "
                                      "types '[string, object]'",
                                      bson::typeName(bson_iter_type(&f))));
        } else if (k == "on") {
            w.on = parseOn(f);
        } else if (k == "whenMatched") {
            w.whenMatched = parseWhenMatched(f, w);
        } else if (k == "whenNotMatched") {
            w.whenNotMatched = parseWhenNotMatched(f);
        } else if (k == "let") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                uasserted(ErrorCode::TypeMismatch,
                          fmt::format("BSON field '$merge.let' is the wrong type '{}', expected "
                                      "type 'object'",
                                      bson::typeName(bson_iter_type(&f))));
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&f, &len, &data);
            w.let = bson::Doc::copyOf(data, len);
        } else {
            unknownField("$merge", k);
        }
    }
    if (!haveInto) missingField("$merge", "into");
    checkTarget(w);
    bool supported =
        w.whenMatched == WhenMatched::KeepExisting || w.whenMatched == WhenMatched::Fail
            ? w.whenNotMatched == WhenNotMatched::Insert
            : true;
    if (!supported)
        uasserted(
            kCode51181,
            fmt::format("Combination of $merge modes 'whenMatched: {}' and 'whenNotMatched: "
                        "{}' is not supported",
                        whenMatchedName(w.whenMatched), whenNotMatchedName(w.whenNotMatched)));
    if (w.whenMatched != WhenMatched::Pipeline && w.let)
        uasserted(kCode51199, fmt::format("Cannot use 'let' variables with 'whenMatched: {}' mode",
                                          whenMatchedName(w.whenMatched)));
    if (w.let) {
        bson_iter_t n;
        if (bson::find(w.let->get(), "new", &n) &&
            !(BSON_ITER_HOLDS_UTF8(&n) &&
              std::string_view(bson_iter_utf8(&n, nullptr)) == "$$ROOT"))
            uasserted(kCode51273,
                      "'let' may not define a value for the reserved 'new' variable other than "
                      "'$$ROOT'");
    }
    return w;
}

/// The temporary collection $out fills (mongod's naming).
std::string temporaryName() {
    bson_oid_t oid;
    bson_oid_init(&oid, nullptr);
    char hex[25];
    bson_oid_to_string(&oid, hex);
    return std::string("tmp.agg_out.") + hex;
}

/// The index specs and options a $out target has (to copy them, and to see
/// whether they changed while the pipeline ran).
bson::Doc shapeOf(const CollectionEntry& c) {
    bson::Doc d;
    BSON_APPEND_DOCUMENT(d.mut(), "options", c.options.get());
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(d.mut(), "indexes", &arr);
    int i = 0;
    for (const auto& idx : c.indexes) {
        std::string k = std::to_string(i++);
        BSON_APPEND_DOCUMENT(&arr, k.c_str(), idx->spec.get());
    }
    bson_append_array_end(d.mut(), &arr);
    return d;
}

void runOut(OperationContext& op, const WriteStageSpec& w,
            const std::function<bool(std::vector<bson::Doc>&)>& readBatch) {
    std::string tmp = temporaryName();
    std::string tmpNs = w.db + "." + tmp;
    std::optional<bson::Doc> shape;
    {
        bson::Doc create;
        BSON_APPEND_UTF8(create.mut(), "create", tmp.c_str());
        if (auto target = lookupCollection(op.store, w.ns())) {
            shape = shapeOf(*target);
            bson_concat(create.mut(), target->options.get());
        }
        runCommandInternally(op, w.db, create.get());
    }
    auto dropTemporary = [&] {
        try {
            bson::Doc drop;
            BSON_APPEND_UTF8(drop.mut(), "drop", tmp.c_str());
            runCommandInternally(op, w.db, drop.get());
        } catch (const DBException&) {
            // The original error matters more; the temporary collection is
            // empty of meaning and named as mongod's are.
        }
    };
    try {
        if (shape) {
            bson_t indexes;
            bson::subDocument(shape->get(), "indexes", &indexes);
            bson::Doc create;
            BSON_APPEND_UTF8(create.mut(), "createIndexes", tmp.c_str());
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(create.mut(), "indexes", &arr);
            bson_iter_t it;
            bson_iter_init(&it, &indexes);
            int n = 0;
            while (bson_iter_next(&it)) {
                bson_t spec;
                bson::subDocument(&indexes, bson_iter_key(&it), &spec);
                bson_iter_t name;
                if (bson::find(&spec, "name", &name) &&
                    std::string_view(bson_iter_utf8(&name, nullptr)) == "_id_")
                    continue;
                std::string k = std::to_string(n++);
                BSON_APPEND_DOCUMENT(&arr, k.c_str(), &spec);
            }
            bson_append_array_end(create.mut(), &arr);
            if (n > 0) runCommandInternally(op, w.db, create.get());
        }
        std::vector<bson::Doc> batch;
        bool more = true;
        while (more) {
            batch.clear();
            more = readBatch(batch);
            if (!batch.empty()) insertBatch(op.store, tmpNs, batch);
        }
        auto target = lookupCollection(op.store, w.ns());
        bool changed = target
                           ? !shape || bson::compareDocs(shapeOf(*target).get(), shape->get()) != 0
                           : shape.has_value();
        if (changed)
            uasserted(
                kCode28769,
                fmt::format("collection or index options of {} changed during processing", w.ns()));
        bson::Doc rename;
        BSON_APPEND_UTF8(rename.mut(), "renameCollection", tmpNs.c_str());
        std::string to = w.ns();
        BSON_APPEND_UTF8(rename.mut(), "to", to.c_str());
        BSON_APPEND_BOOL(rename.mut(), "dropTarget", true);
        runCommandInternally(op, "admin", rename.get());
    } catch (...) {
        dropTemporary();
        throw;
    }
}

/// The value of `path` in `doc` ($merge's `on` fields), checked as mongod does.
void appendOnValue(bson_t* query, const bson_t* doc, const std::string& path) {
    bson_iter_t it, found;
    bool have = bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path.c_str(), &found);
    if (!have || BSON_ITER_HOLDS_NULL(&found) || BSON_ITER_HOLDS_UNDEFINED(&found))
        uasserted(kCode51132,
                  fmt::format("$merge write error: 'on' field '{}' cannot be missing, null or "
                              "undefined if supporting index is sparse",
                              path));
    if (BSON_ITER_HOLDS_ARRAY(&found))
        uasserted(kCode51185,
                  fmt::format("$merge write error: 'on' field '{}' cannot be an array", path));
    bson_t cond;
    BSON_APPEND_DOCUMENT_BEGIN(query, path.c_str(), &cond);
    bson::appendIter(&cond, "$eq", found);
    bson_append_document_end(query, &cond);
}

/// `doc` with an _id first (generated when it has none), as mongod gives a
/// $merge output document before matching on _id.
bson::Doc withId(const bson_t* doc) {
    if (bson_has_field(doc, "_id")) return bson::Doc::copyOf(doc);
    bson::Doc out;
    bson_oid_t oid;
    bson_oid_init(&oid, nullptr);
    BSON_APPEND_OID(out.mut(), "_id", &oid);
    bson_concat(out.mut(), doc);
    return out;
}

/// The command-level `let` of a whenMatched pipeline's update for `doc`: the
/// stage's variables evaluated against it, and $$new.
bson::Doc letFor(const WriteStageSpec& w, const bson_t* doc) {
    bson::Doc let;
    bson_t lit;
    BSON_APPEND_DOCUMENT_BEGIN(let.mut(), "new", &lit);
    BSON_APPEND_DOCUMENT(&lit, "$literal", doc);
    bson_append_document_end(let.mut(), &lit);
    if (!w.let) return let;
    bson_iter_t it;
    bson_iter_init(&it, w.let->get());
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "new") continue;
        auto e = query::Expression::parse(*bson_iter_value(&it), {});
        query::Value v = e->evaluate(doc);
        BSON_APPEND_DOCUMENT_BEGIN(let.mut(), std::string(k).c_str(), &lit);
        if (!v.isMissing()) bson_append_value(&lit, "$literal", -1, &v.get());
        bson_append_document_end(let.mut(), &lit);
    }
    return let;
}

void mergeOne(OperationContext& op, const WriteStageSpec& w, const bson_t* source,
              const bson_t* collation, bool bypass) {
    bool onId = std::find(w.on.begin(), w.on.end(), "_id") != w.on.end();
    bson::Doc doc = onId ? withId(source) : bson::Doc::copyOf(source);
    bson::Doc query;
    for (const auto& f : w.on) appendOnValue(query.mut(), doc.get(), f);

    auto insert = [&] {
        bson::Doc cmd;
        BSON_APPEND_UTF8(cmd.mut(), "insert", w.coll.c_str());
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(cmd.mut(), "documents", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", doc.get());
        bson_append_array_end(cmd.mut(), &arr);
        BSON_APPEND_BOOL(cmd.mut(), "bypassDocumentValidation", bypass);
        runCommandInternally(op, w.db, cmd.get());
    };
    if (w.whenMatched == WhenMatched::Fail) return insert();  // a match: duplicate key

    bool upsert =
        w.whenNotMatched == WhenNotMatched::Insert && w.whenMatched != WhenMatched::Pipeline;
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "update", w.coll.c_str());
    bson_t arr, st, u;
    BSON_APPEND_ARRAY_BEGIN(cmd.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
    BSON_APPEND_DOCUMENT(&st, "q", query.get());
    switch (w.whenMatched) {
        case WhenMatched::Replace:
            BSON_APPEND_DOCUMENT(&st, "u", doc.get());
            break;
        case WhenMatched::Merge:
            BSON_APPEND_DOCUMENT_BEGIN(&st, "u", &u);
            BSON_APPEND_DOCUMENT(&u, "$set", doc.get());
            bson_append_document_end(&st, &u);
            break;
        case WhenMatched::KeepExisting:
            BSON_APPEND_DOCUMENT_BEGIN(&st, "u", &u);
            BSON_APPEND_DOCUMENT(&u, "$setOnInsert", doc.get());
            bson_append_document_end(&st, &u);
            break;
        case WhenMatched::Pipeline:
            BSON_APPEND_ARRAY(&st, "u", w.whenMatchedPipeline.get());
            break;
        case WhenMatched::Fail:
            break;
    }
    BSON_APPEND_BOOL(&st, "upsert", upsert);
    BSON_APPEND_BOOL(&st, "multi", false);
    if (collation) BSON_APPEND_DOCUMENT(&st, "collation", collation);
    bson_append_document_end(&arr, &st);
    bson_append_array_end(cmd.mut(), &arr);
    BSON_APPEND_BOOL(cmd.mut(), "ordered", true);
    BSON_APPEND_BOOL(cmd.mut(), "bypassDocumentValidation", bypass);
    if (w.whenMatched == WhenMatched::Pipeline)
        BSON_APPEND_DOCUMENT(cmd.mut(), "let", letFor(w, doc.get()).get());
    bson::Doc reply = runCommandInternally(op, w.db, cmd.get());
    bson_iter_t n;
    bool matched = bson::find(reply.get(), "n", &n) && bson_iter_as_int64(&n) > 0;
    if (matched || upsert) return;
    if (w.whenNotMatched == WhenNotMatched::Fail)
        uasserted(kCode13113,
                  "$merge could not find a matching document in the target collection for at "
                  "least one document in the source collection");
    if (w.whenNotMatched == WhenNotMatched::Insert) insert();  // after a pipeline's miss
}

}  // namespace

std::optional<WriteStageSpec> takeWriteStage(bson::Doc& pipeline, const std::string& db) {
    bson_iter_t it;
    bson_iter_init(&it, pipeline.get());
    uint32_t count = bson_count_keys(pipeline.get()), i = 0;
    std::optional<WriteStageSpec> found;
    while (bson_iter_next(&it)) {
        ++i;
        std::string_view name = firstKey(it);
        if (name != "$out" && name != "$merge") continue;
        if (i != count)
            uasserted(kCode40601,
                      fmt::format("{} can only be the final stage in the pipeline", name));
        bson_iter_t arg;
        bson_iter_recurse(&it, &arg);
        bson_iter_next(&arg);
        found = name == "$out" ? parseOut(arg, db) : parseMerge(arg, db);
    }
    if (!found) return found;
    bson::Doc rest;
    bson_iter_init(&it, pipeline.get());
    for (uint32_t j = 0; j + 1 < count && bson_iter_next(&it); ++j)
        bson::appendIter(rest.mut(), std::to_string(j), it);
    pipeline = std::move(rest);
    return found;
}

void checkWriteStage(OperationContext& op, const WriteStageSpec& w) {
    if (currentOperation().txn)
        uasserted(ErrorCode::OperationNotSupportedInTransaction,
                  fmt::format("{} cannot be used in a transaction", w.stageName()));
    auto target = lookupCollection(op.store, w.ns());
    if (w.kind == WriteStageSpec::Kind::Out) {
        bson_iter_t capped;
        if (target && bson::find(target->options.get(), "capped", &capped) &&
            bson_iter_as_bool(&capped))
            uasserted(kCode17152,
                      fmt::format("namespace '{}' is capped so it can't be used for $out", w.ns()));
        return;
    }
    if (w.on.size() == 1 && w.on[0] == "_id") return;
    // Other `on` fields need a unique index on exactly those fields, so that
    // a document matches at most one.
    std::set<std::string> on(w.on.begin(), w.on.end());
    bool ok = false;
    if (target)
        for (const auto& idx : target->indexes) {
            if (!idx->unique || idx->partialFilter) continue;
            std::set<std::string> keys;
            bson_iter_t k;
            bson_iter_init(&k, idx->keyPattern.get());
            while (bson_iter_next(&k)) keys.insert(bson_iter_key(&k));
            if (keys == on) ok = true;
        }
    if (!ok) uasserted(kCode51183, "Cannot find index to verify that join fields will be unique");
}

void runWriteStage(OperationContext& op, const WriteStageSpec& w,
                   const std::function<bool(std::vector<bson::Doc>& out)>& readBatch,
                   const bson_t* collation) {
    bool bypass = cmdarg::getBool(op.args, "bypassDocumentValidation", false);
    if (w.kind == WriteStageSpec::Kind::Out) {
        BypassDocumentValidation scope(bypass);
        return runOut(op, w, readBatch);
    }
    std::vector<bson::Doc> batch;
    bool more = true;
    while (more) {
        batch.clear();
        more = readBatch(batch);
        for (const auto& d : batch) mergeOne(op, w, d.get(), collation, bypass);
    }
}

}  // namespace halo::store
