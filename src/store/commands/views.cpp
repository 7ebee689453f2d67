// Views: see views.h.
#include "store/commands/views.h"

#include <fmt/format.h>

#include <set>

#include "store/aggregate/pipeline.h"
#include "store/aggregate/vector_source.h"
#include "store/commands/write_path.h"
#include "store/exec/find_executor.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

/// mongod's bound on a chain of views over views.
constexpr int kMaxViewDepth = 20;

std::string viewsNs(std::string_view db) {
    return std::string(db) + ".system.views";
}

std::optional<ViewDefinition> parseDefinition(const bson_t* d) {
    bson_iter_t id, on;
    if (!bson::find(d, "_id", &id) || !BSON_ITER_HOLDS_UTF8(&id) || !bson::find(d, "viewOn", &on) ||
        !BSON_ITER_HOLDS_UTF8(&on))
        return std::nullopt;
    ViewDefinition v;
    v.ns = bson_iter_utf8(&id, nullptr);
    v.viewOn = bson_iter_utf8(&on, nullptr);
    bson_t sub;
    if (bson::subDocument(d, "pipeline", &sub)) v.pipeline = bson::Doc::copyOf(&sub);
    if (bson::subDocument(d, "collation", &sub)) v.collation = bson::Doc::copyOf(&sub);
    return v;
}

/// The definition of `ns` read from its database's system.views (the caller
/// holds the DDL lock shared).
std::optional<ViewDefinition> readDefinition(Store& store, const std::string& ns) {
    if (store.catalog().lookup(ns)) return std::nullopt;  // a collection
    auto coll = store.catalog().lookup(viewsNs(splitNs(ns).first));
    if (!coll) return std::nullopt;
    ReadScope scope(store);
    bson_value_t id;
    id.value_type = BSON_TYPE_UTF8;
    id.value.v_utf8.str = const_cast<char*>(ns.c_str());
    id.value.v_utf8.len = static_cast<uint32_t>(ns.size());
    std::optional<ViewDefinition> out;
    if (auto rid = rs::findById(scope.session(), *coll, id))
        if (auto d = rs::fetch(scope.session(), *coll, *rid)) out = parseDefinition(d->get());
    scope.done();
    return out;
}

void appendArray(bson_t* out, const char* key, const std::vector<bson::Doc>& stages) {
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
    for (size_t i = 0; i < stages.size(); ++i)
        BSON_APPEND_DOCUMENT(&arr, std::to_string(i).c_str(), stages[i].get());
    bson_append_array_end(out, &arr);
}

bson::Doc stage(const char* name, const bson_iter_t& value) {
    bson::Doc d;
    bson::appendIter(d.mut(), name, value);
    return d;
}

/// Checks a definition before it is written: the pipeline parses, writes no
/// collection, and the chain it starts neither loops nor runs deeper than 20.
void checkDefinition(OperationContext& op, const std::string& ns, const std::string& viewOn,
                     const bson_t* pipeline) {
    if (viewOn.empty()) uasserted(ErrorCode::BadValue, "'viewOn' cannot be empty");
    bson_iter_t it;
    bson_iter_init(&it, pipeline);
    while (bson_iter_next(&it)) {
        bson_iter_t s;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &s) || !bson_iter_next(&s))
            continue;  // the parse below reports it
        std::string_view name = bson_iter_key(&s);
        if (name == "$out" || name == "$merge" || name == "$changeStream")
            uasserted(ErrorCode::OptionNotSupportedOnView,
                      fmt::format("{} cannot be used in a view definition", name));
    }
    aggregate::PipelineContext ctx;
    ctx.catalog = &op.store.catalog();
    ctx.db = op.db;
    ctx.ns = ns;
    {
        CollectionLock lk(op.store.catalog());
        (void)aggregate::buildPipeline(
            std::make_unique<aggregate::VectorSource>(std::vector<bson::Doc>{}), pipeline, ctx);
    }
    std::vector<std::string> chain{ns};
    std::string next = op.db + "." + viewOn;
    for (int depth = 1;; ++depth) {
        chain.push_back(next);
        if (next == ns) {
            std::string path;
            for (const auto& n : chain) path += (path.empty() ? "" : " => ") + n;
            uasserted(ErrorCode::GraphContainsCycle, "View cycle detected: " + path);
        }
        if (depth > kMaxViewDepth)
            uasserted(ErrorCode::ViewDepthLimitExceeded,
                      fmt::format("View depth too deep or view cycle detected. Maximum depth is {}",
                                  kMaxViewDepth));
        auto v = findView(op.store, next);
        if (!v) return;
        next = op.db + "." + v->viewOn;
    }
}

/// The find/count/distinct arguments an aggregate over a view takes as they are.
bool passesThrough(std::string_view k) {
    return k == "collation" || k == "hint" || k == "let" || k == "comment" || k == "maxTimeMS" ||
           k == "allowDiskUse" || (cmdarg::isGenericArgument(k) && k != "writeConcern");
}

bson::Doc aggregateCommand(const OperationContext& op, const std::string& viewName,
                           const std::vector<bson::Doc>& stages, std::optional<int64_t> batchSize,
                           std::initializer_list<std::string_view> consumed) {
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "aggregate", viewName.c_str());
    appendArray(cmd.mut(), "pipeline", stages);
    bson_t cursor;
    BSON_APPEND_DOCUMENT_BEGIN(cmd.mut(), "cursor", &cursor);
    if (batchSize) BSON_APPEND_INT64(&cursor, "batchSize", *batchSize);
    bson_append_document_end(cmd.mut(), &cursor);
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (std::find(consumed.begin(), consumed.end(), k) != consumed.end()) continue;
        if (passesThrough(k)) bson::appendIter(cmd.mut(), k, it);
    }
    return cmd;
}

void appendMatch(std::vector<bson::Doc>& stages, const OperationContext& op, const char* field) {
    bson_iter_t it;
    if (op.args.find(field, &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t q;
        bson::subDocument(op.cmd, field, &q);
        if (bson_count_keys(&q) > 0) stages.push_back(stage("$match", it));
    }
}

void appendSkipLimit(std::vector<bson::Doc>& stages, const OperationContext& op) {
    bson_iter_t it;
    if (op.args.find("skip", &it) && bson::isNumber(bson_iter_type(&it)) &&
        bson_iter_as_int64(&it) > 0)
        stages.push_back(stage("$skip", it));
    if (op.args.find("limit", &it) && bson::isNumber(bson_iter_type(&it))) {
        int64_t n = bson_iter_as_int64(&it);
        if (n != 0) {
            bson::Doc d;
            BSON_APPEND_INT64(d.mut(), "$limit", n < 0 ? -n : n);
            stages.push_back(std::move(d));
        }
    }
}

}  // namespace

std::vector<ViewDefinition> viewsIn(Store& store, const std::string& db) {
    auto coll = store.catalog().lookup(viewsNs(db));
    if (!coll) return {};
    ReadScope scope(store);
    FindExecutor exec(coll, FindSpec{});
    std::vector<ViewDefinition> out;
    while (auto d = exec.next(scope.session()))
        if (auto v = parseDefinition(d->get())) out.push_back(std::move(*v));
    scope.done();
    return out;
}

std::optional<ViewDefinition> findView(Store& store, const std::string& ns) {
    CollectionLock lk(store.catalog());
    return readDefinition(store, ns);
}

std::optional<ResolvedView> resolveView(Store& store, const std::string& ns) {
    std::vector<ViewDefinition> chain;
    std::string db(splitNs(ns).first);
    std::string cur = ns;
    while (auto v = findView(store, cur)) {
        if (static_cast<int>(chain.size()) >= kMaxViewDepth)
            uasserted(ErrorCode::ViewDepthLimitExceeded,
                      fmt::format("View depth too deep or view cycle detected. Maximum depth is {}",
                                  kMaxViewDepth));
        cur = db + "." + v->viewOn;
        chain.push_back(std::move(*v));
    }
    if (chain.empty()) return std::nullopt;
    ResolvedView r;
    r.sourceNs = cur;
    if (chain.front().collation) r.collation = chain.front().collation->copy();
    bson::Doc stages;
    int i = 0;
    for (auto v = chain.rbegin(); v != chain.rend(); ++v) {
        bson_iter_t it;
        bson_iter_init(&it, v->pipeline.get());
        while (bson_iter_next(&it)) bson::appendIter(stages.mut(), std::to_string(i++), it);
    }
    r.pipeline = std::move(stages);
    return r;
}

void refuseView(Store& store, const std::string& ns) {
    if (findView(store, ns))
        uasserted(ErrorCode::CommandNotSupportedOnView,
                  fmt::format("Namespace {} is a view, not a collection", ns));
}

void createView(OperationContext& op, const std::string& ns, const bson_t* cmd) {
    if (currentOperation().txn)
        uasserted(ErrorCode::OperationNotSupportedInTransaction,
                  "Cannot create a view in a multi-document transaction.");
    auto [db, name] = splitNs(ns);
    if (name.starts_with("system."))
        uasserted(ErrorCode::InvalidNamespace, fmt::format("Invalid view name: {}", ns));
    std::string viewOn;
    bool haveViewOn = false;
    bson::Doc pipeline;  // [] unless given
    std::optional<bson::Doc> collation;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "viewOn") {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                uasserted(ErrorCode::TypeMismatch,
                          fmt::format("BSON field 'create.viewOn' is the wrong type '{}', "
                                      "expected type 'string'",
                                      bson::typeName(bson_iter_type(&it))));
            viewOn = bson_iter_utf8(&it, nullptr);
            haveViewOn = true;
        } else if (k == "pipeline") {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                uasserted(ErrorCode::TypeMismatch,
                          fmt::format("BSON field 'create.pipeline' is the wrong type '{}', "
                                      "expected type 'array'",
                                      bson::typeName(bson_iter_type(&it))));
            uint32_t len;
            const uint8_t* data;
            bson_iter_array(&it, &len, &data);
            pipeline = bson::Doc::copyOf(data, len);
        } else if (k == "collation") {
            bson_t c;
            if (!bson::subDocument(cmd, "collation", &c))
                uasserted(ErrorCode::TypeMismatch, "'collation' must be an object");
            (void)effectiveCollator(&c, nullptr);  // mongod's errors for a bad collation
            collation = bson::Doc::copyOf(&c);
        } else if (!cmdarg::isGenericArgument(k)) {
            uasserted(ErrorCode::InvalidOptions,
                      fmt::format("option not supported on a view: {}", k));
        }
    }
    if (!haveViewOn)
        uasserted(ErrorCode::InvalidOptions, "'pipeline' requires 'viewOn' to also be specified");
    bool exists;
    {
        CollectionLock lk(op.store.catalog());
        exists = op.store.catalog().lookup(ns) || readDefinition(op.store, ns);
    }
    if (exists)
        uasserted(ErrorCode::NamespaceExists, fmt::format("Namespace {} already exists", ns));
    checkDefinition(op, ns, viewOn, pipeline.get());
    bson::Doc def;
    BSON_APPEND_UTF8(def.mut(), "_id", ns.c_str());
    BSON_APPEND_UTF8(def.mut(), "viewOn", viewOn.c_str());
    BSON_APPEND_ARRAY(def.mut(), "pipeline", pipeline.get());
    if (collation) BSON_APPEND_DOCUMENT(def.mut(), "collation", collation->get());
    bson::Doc insert;
    BSON_APPEND_UTF8(insert.mut(), "insert", "system.views");
    bson_t docs;
    BSON_APPEND_ARRAY_BEGIN(insert.mut(), "documents", &docs);
    BSON_APPEND_DOCUMENT(&docs, "0", def.get());
    bson_append_array_end(insert.mut(), &docs);
    try {
        runCommandInternally(op, std::string(db), insert.get());
    } catch (const DBException& e) {
        if (e.code() == ErrorCode::DuplicateKey)
            uasserted(ErrorCode::NamespaceExists, fmt::format("Namespace {} already exists", ns));
        throw;
    }
    // As mongod: the oplog says a view was created ({create, viewOn, pipeline},
    // no collection UUID), which change streams with showExpandedEvents report
    // as a create event whose operationDescription holds the definition.
    bson::Doc created;
    BSON_APPEND_UTF8(created.mut(), "create", std::string(name).c_str());
    BSON_APPEND_UTF8(created.mut(), "viewOn", viewOn.c_str());
    BSON_APPEND_ARRAY(created.mut(), "pipeline", pipeline.get());
    if (collation) BSON_APPEND_DOCUMENT(created.mut(), "collation", collation->get());
    logCommand(op.store, std::string(db), created.get());
}

bool modifyView(OperationContext& op, const std::string& ns, const bson_t* viewOn,
                const bson_t* pipeline) {
    auto v = findView(op.store, ns);
    if (!v) return false;
    std::string on = v->viewOn;
    if (viewOn) {
        bson_iter_t it;
        if (!bson_iter_init(&it, viewOn) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
            uasserted(ErrorCode::TypeMismatch, "'viewOn' must be a string");
        on = bson_iter_utf8(&it, nullptr);
    }
    const bson_t* p = pipeline ? pipeline : v->pipeline.get();
    checkDefinition(op, ns, on, p);
    bson::Doc update;
    BSON_APPEND_UTF8(update.mut(), "update", "system.views");
    bson_t arr, st, q, u, set;
    BSON_APPEND_ARRAY_BEGIN(update.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", ns.c_str());
    bson_append_document_end(&st, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "u", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$set", &set);
    BSON_APPEND_UTF8(&set, "viewOn", on.c_str());
    BSON_APPEND_ARRAY(&set, "pipeline", p);
    bson_append_document_end(&u, &set);
    bson_append_document_end(&st, &u);
    bson_append_document_end(&arr, &st);
    bson_append_array_end(update.mut(), &arr);
    runCommandInternally(op, std::string(splitNs(ns).first), update.get());
    return true;
}

bool dropView(OperationContext& op, const std::string& ns) {
    if (!findView(op.store, ns)) return false;
    bson::Doc del;
    BSON_APPEND_UTF8(del.mut(), "delete", "system.views");
    bson_t arr, st, q;
    BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", ns.c_str());
    bson_append_document_end(&st, &q);
    BSON_APPEND_INT32(&st, "limit", 1);
    bson_append_document_end(&arr, &st);
    bson_append_array_end(del.mut(), &arr);
    runCommandInternally(op, std::string(splitNs(ns).first), del.get());
    return true;
}

bson::Doc findAsAggregate(const OperationContext& op, const std::string& viewName) {
    std::vector<bson::Doc> stages;
    appendMatch(stages, op, "filter");
    bson_iter_t it;
    if (op.args.find("sort", &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t s;
        bson::subDocument(op.cmd, "sort", &s);
        if (bson_count_keys(&s) > 0) stages.push_back(stage("$sort", it));
    }
    appendSkipLimit(stages, op);
    if (op.args.find("projection", &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t p;
        bson::subDocument(op.cmd, "projection", &p);
        if (bson_count_keys(&p) > 0) stages.push_back(stage("$project", it));
    }
    std::optional<int64_t> batchSize;
    if (op.args.find("batchSize", &it) && bson::isNumber(bson_iter_type(&it)))
        batchSize = bson_iter_as_int64(&it);
    return aggregateCommand(
        op, viewName, stages, batchSize,
        {"filter", "sort", "skip", "limit", "projection", "batchSize", "singleBatch"});
}

bson::Doc countAsAggregate(const OperationContext& op, const std::string& viewName) {
    std::vector<bson::Doc> stages;
    appendMatch(stages, op, "query");
    appendSkipLimit(stages, op);
    bson::Doc count;
    BSON_APPEND_UTF8(count.mut(), "$count", "count");
    stages.push_back(std::move(count));
    return aggregateCommand(op, viewName, stages, std::nullopt, {"query", "skip", "limit"});
}

bson::Doc distinctAsAggregate(const OperationContext& op, const std::string& viewName,
                              const std::string& key) {
    std::vector<bson::Doc> stages;
    appendMatch(stages, op, "query");
    std::string path = "$" + key;
    bson::Doc unwind, group;
    bson_t u, g, acc;
    BSON_APPEND_DOCUMENT_BEGIN(unwind.mut(), "$unwind", &u);
    BSON_APPEND_UTF8(&u, "path", path.c_str());
    BSON_APPEND_BOOL(&u, "preserveNullAndEmptyArrays", true);
    bson_append_document_end(unwind.mut(), &u);
    stages.push_back(std::move(unwind));
    BSON_APPEND_DOCUMENT_BEGIN(group.mut(), "$group", &g);
    BSON_APPEND_NULL(&g, "_id");
    BSON_APPEND_DOCUMENT_BEGIN(&g, "values", &acc);
    BSON_APPEND_UTF8(&acc, "$addToSet", path.c_str());
    bson_append_document_end(&g, &acc);
    bson_append_document_end(group.mut(), &g);
    stages.push_back(std::move(group));
    return aggregateCommand(op, viewName, stages, std::nullopt, {"key", "query"});
}

}  // namespace halo::store
