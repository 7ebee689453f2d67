// Collection and database statistics: the $collStats stage (count,
// storageStats, latencyStats, queryExecStats), and the collStats and dbStats
// commands. Sizes are real: document bytes from the record store's accounting,
// file sizes and reusable space from WiredTiger's block-manager statistics.
#include <fmt/format.h>

#include <chrono>

#include "store/commands/auth_commands.h"
#include "store/commands/stage_sources.h"
#include "store/commands/write_path.h"

namespace halo::store {

bool isServerSourceStage(std::string_view name) {
    return name == "$currentOp" || name == "$collStats" || name == "$listLocalSessions";
}

namespace {

int64_t nowMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool isCapped(const CollectionEntry& c) {
    bson_iter_t it;
    return bson::find(c.options.get(), "capped", &it) && bson::isTruthy(*bson_iter_value(&it));
}

/// mongod's minimal wiredTiger section for one table.
void appendWiredTiger(Engine& e, const std::string& uri, const Engine::TableSizes& sizes,
                      bson_t* out, const char* key) {
    bson_t wt, meta, block;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &wt);
    BSON_APPEND_DOCUMENT_BEGIN(&wt, "metadata", &meta);
    BSON_APPEND_INT32(&meta, "formatVersion", 1);
    bson_append_document_end(&wt, &meta);
    std::string creation = e.creationString(uri);
    BSON_APPEND_UTF8(&wt, "creationString", creation.c_str());
    BSON_APPEND_UTF8(&wt, "type", "file");
    std::string statsUri = "statistics:" + uri;
    BSON_APPEND_UTF8(&wt, "uri", statsUri.c_str());
    BSON_APPEND_DOCUMENT_BEGIN(&wt, "block-manager", &block);
    BSON_APPEND_INT64(&block, "file bytes available for reuse", sizes.reusableBytes);
    BSON_APPEND_INT64(&block, "file size in bytes", sizes.fileBytes);
    bson_append_document_end(&wt, &block);
    bson_append_document_end(out, &wt);
}

/// The storageStats fields (also the collStats command's reply), sizes divided by `scale`.
void appendStorageStats(Store& store, const CollectionEntry& c, int64_t scale, bson_t* out) {
    Engine& e = store.engine();
    const int64_t n = c.numRecords.load(), size = c.dataSize.load();
    const Engine::TableSizes data = e.tableSizes(c.uri);
    bson::appendNumber(out, "size", size / scale);
    bson::appendNumber(out, "count", n);
    if (n > 0) bson::appendNumber(out, "avgObjSize", size / n);
    bson::appendNumber(out, "numOrphanDocs", 0);
    bson::appendNumber(out, "storageSize", data.fileBytes / scale);
    bson::appendNumber(out, "freeStorageSize", data.reusableBytes / scale);
    BSON_APPEND_BOOL(out, "capped", isCapped(c));
    appendWiredTiger(e, c.uri, data, out, "wiredTiger");
    bson::appendNumber(out, "nindexes", static_cast<int64_t>(c.indexes.size()));
    std::vector<std::pair<std::string, Engine::TableSizes>> indexes;
    for (const auto& idx : c.indexes) indexes.emplace_back(idx->name, e.tableSizes(idx->uri));
    bson_t details, builds, sizes;
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexDetails", &details);
    for (size_t i = 0; i < c.indexes.size(); ++i)
        appendWiredTiger(e, c.indexes[i]->uri, indexes[i].second, &details,
                         c.indexes[i]->name.c_str());
    bson_append_document_end(out, &details);
    BSON_APPEND_ARRAY_BEGIN(out, "indexBuilds", &builds);
    bson_append_array_end(out, &builds);
    int64_t totalIndex = 0;
    for (const auto& [name, s] : indexes) totalIndex += s.fileBytes;
    bson::appendNumber(out, "totalIndexSize", totalIndex / scale);
    bson::appendNumber(out, "totalSize", (data.fileBytes + totalIndex) / scale);
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexSizes", &sizes);
    for (const auto& [name, s] : indexes) bson::appendNumber(&sizes, name, s.fileBytes / scale);
    bson_append_document_end(out, &sizes);
    bson::appendNumber(out, "scaleFactor", scale);
}

/// A $collStats sub-option: an object (or absent).
bool optionDoc(const bson_iter_t& it, bson_t* out) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '$collStats.{}' is the wrong type '{}', expected type "
                              "'object'",
                              bson_iter_key(&it), bson::typeName(bson_iter_type(&it))));
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

void checkOnly(const bson_t* doc, std::string_view parent,
               std::initializer_list<std::string_view> known) {
    bson_iter_t it;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (std::find(known.begin(), known.end(), k) == known.end())
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '{}.{}' is an unknown field.", parent, k));
    }
}

[[noreturn]] void notFound(std::string_view what, const std::string& ns) {
    uasserted(ErrorCode::NamespaceNotFound,
              fmt::format("Unable to retrieve {} in $collStats stage :: caused by :: Collection "
                          "[{}] not found.",
                          what, ns));
}

}  // namespace

std::vector<bson::Doc> collStatsStage(OperationContext& op, const std::string& ns,
                                      const bson_t* spec) {
    checkOnly(spec, "$collStats", {"latencyStats", "storageStats", "count", "queryExecStats"});
    bson::Doc out;
    BSON_APPEND_UTF8(out.mut(), "ns", ns.c_str());
    std::string host = op.store.hostAndPort();
    BSON_APPEND_UTF8(out.mut(), "host", host.c_str());
    BSON_APPEND_DATE_TIME(out.mut(), "localTime", nowMillis());
    auto coll = op.store.catalog().lookup(ns);
    bson_iter_t it;
    bson_t sub;
    if (bson::find(spec, "latencyStats", &it) && optionDoc(it, &sub)) {
        checkOnly(&sub, "latencyStats", {"histograms"});
        bson_t stats;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "latencyStats", &stats);
        op.store.top().appendLatencyStats(ns, cmdarg::getBool(&sub, "histograms", false), &stats);
        bson_append_document_end(out.mut(), &stats);
    }
    if (bson::find(spec, "storageStats", &it) && optionDoc(it, &sub)) {
        checkOnly(&sub, "storageStats", {"scale", "verbose", "waitForLock", "numericOnly"});
        int64_t scale = cmdarg::getInt(&sub, "scale", 1, "$collStats.storageStats");
        if (scale < 1)
            uasserted(
                ErrorCode::Location51024,
                fmt::format("BSON field 'scale' value must be >= 1, actual value '{}'", scale));
        if (!coll) notFound("storageStats", ns);
        bson_t stats;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "storageStats", &stats);
        appendStorageStats(op.store, *coll, scale, &stats);
        bson_append_document_end(out.mut(), &stats);
    }
    if (bson::find(spec, "count", &it) && optionDoc(it, &sub)) {
        checkOnly(&sub, "count", {});
        if (!coll) notFound("count", ns);
        bson::appendNumber(out.mut(), "count", coll->numRecords.load());
    }
    if (bson::find(spec, "queryExecStats", &it) && optionDoc(it, &sub)) {
        checkOnly(&sub, "queryExecStats", {});
        if (!coll) notFound("queryExecStats", ns);
        bson_t q, scans;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "queryExecStats", &q);
        BSON_APPEND_DOCUMENT_BEGIN(&q, "collectionScans", &scans);
        BSON_APPEND_INT64(&scans, "total", coll->collectionScans.load());
        BSON_APPEND_INT64(&scans, "nonTailable", coll->collectionScans.load());
        bson_append_document_end(&q, &scans);
        bson_append_document_end(out.mut(), &q);
    }
    std::vector<bson::Doc> docs;
    docs.push_back(std::move(out));
    return docs;
}

namespace {

int64_t commandScale(const OperationContext& op) {
    int64_t scale = cmdarg::getInt(op.cmd, "scale", 1, op.name);
    if (scale < 1) uasserted(ErrorCode::BadValue, "scale has to be >= 1");
    return scale;
}

HALO_REGISTER_COMMAND(CommandSpec{{"collStats"}, [](OperationContext& op, bson_t* reply) {
                                      validateDbName(op.db);
                                      std::string ns = op.db + "." + cmdarg::collectionName(op);
                                      int64_t scale = commandScale(op);
                                      CollectionLock lk(op.store.catalog());
                                      auto coll = op.store.catalog().lookup(ns);
                                      if (!coll)
                                          uasserted(ErrorCode::NamespaceNotFound,
                                                    fmt::format("Collection [{}] not found.", ns));
                                      BSON_APPEND_UTF8(reply, "ns", ns.c_str());
                                      appendStorageStats(op.store, *coll, scale, reply);
                                  }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"dbStats"}, [](OperationContext& op, bson_t* reply) {
        validateDbName(op.db);
        int64_t scale = commandScale(op);
        CollectionLock lk(op.store.catalog());
        int64_t objects = 0, size = 0, indexes = 0, storage = 0, free = 0, indexSize = 0;
        Engine& e = op.store.engine();
        auto colls = op.store.catalog().listCollections(op.db);
        for (const auto& c : colls) {
            objects += c->numRecords.load();
            size += c->dataSize.load();
            indexes += static_cast<int64_t>(c->indexes.size());
            auto sizes = e.tableSizes(c->uri);
            storage += sizes.fileBytes;
            free += sizes.reusableBytes;
            for (const auto& idx : c->indexes) indexSize += e.tableSizes(idx->uri).fileBytes;
        }
        BSON_APPEND_UTF8(reply, "db", op.db.c_str());
        bson::appendNumber(reply, "collections", static_cast<int64_t>(colls.size()));
        bson::appendNumber(reply, "views", 0);
        bson::appendNumber(reply, "objects", objects);
        BSON_APPEND_DOUBLE(
            reply, "avgObjSize",
            objects ? static_cast<double>(size) / static_cast<double>(objects) : 0.0);
        BSON_APPEND_DOUBLE(reply, "dataSize", static_cast<double>(size) / scale);
        BSON_APPEND_DOUBLE(reply, "storageSize", static_cast<double>(storage) / scale);
        BSON_APPEND_DOUBLE(reply, "freeStorageSize", static_cast<double>(free) / scale);
        bson::appendNumber(reply, "indexes", indexes);
        BSON_APPEND_DOUBLE(reply, "indexSize", static_cast<double>(indexSize) / scale);
        BSON_APPEND_DOUBLE(reply, "totalSize", static_cast<double>(storage + indexSize) / scale);
        BSON_APPEND_DOUBLE(reply, "scaleFactor", static_cast<double>(scale));
    }});

}  // namespace
}  // namespace halo::store
