// Collection maintenance: validate (records against indexes, exec/collection_validator.h),
// compact (WiredTiger compaction of the collection's tables) and fsync (a checkpoint).
#include <fmt/format.h>

#include "common/log.h"
#include "store/commands/write_path.h"
#include "store/exec/collection_validator.h"

namespace halo::store {
namespace {

std::string nsOf(const OperationContext& op) {
    validateDbName(op.db);
    return op.db + "." + cmdarg::collectionName(op);
}

void runValidate(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    cmdarg::checkFields(op, {"full", "repair", "background", "metadata", "checkBSONConformance",
                             "enforceFastCount", "scandata", "fixMultikey"});
    if (cmdarg::getBool(op.cmd, "repair", false))
        uasserted(ErrorCode::CommandNotSupported,
                  "validate with { repair: true } is not supported by this server");
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    if (!coll)
        uasserted(ErrorCode::NamespaceNotFound,
                  fmt::format("Collection '{}' does not exist to validate.", ns));
    ValidateResults r;
    {
        PooledSession s(op.store.catalog().sessions());
        Txn txn(*s);
        r = validateCollection(*s, *coll);
    }
    BSON_APPEND_UTF8(reply, "ns", ns.c_str());
    bson_append_binary(reply, "uuid", 4, BSON_SUBTYPE_UUID, coll->uuid, 16);
    bson::appendNumber(reply, "nInvalidDocuments", r.nInvalidDocuments);
    bson::appendNumber(reply, "nNonCompliantDocuments", r.nNonCompliantDocuments);
    bson::appendNumber(reply, "nrecords", r.nrecords);
    bson::appendNumber(reply, "nIndexes", static_cast<int64_t>(r.indexes.size()));
    bson_t keys, details;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "keysPerIndex", &keys);
    for (const auto& i : r.indexes) bson::appendNumber(&keys, i.name, i.keys);
    bson_append_document_end(reply, &keys);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "indexDetails", &details);
    for (const auto& i : r.indexes) {
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(&details, i.name.c_str(), &d);
        BSON_APPEND_BOOL(&d, "valid", i.valid);
        bson_append_document_end(&details, &d);
    }
    bson_append_document_end(reply, &details);
    BSON_APPEND_BOOL(reply, "valid", r.valid());
    BSON_APPEND_BOOL(reply, "repaired", false);
    bson::appendStringArray(reply, "warnings", r.warnings);
    bson::appendStringArray(reply, "errors", r.errors);
    bson::appendDocArray(reply, "extraIndexEntries", r.extraIndexEntries);
    bson::appendDocArray(reply, "missingIndexEntries", r.missingIndexEntries);
    bson::appendDocArray(reply, "corruptRecords", {});
    if (!r.valid())
        log::warning("storage", 20300, "Validation complete: collection is not valid",
                     fmt::format(R"({{"namespace":{}}})", log::quote(ns)));
}

HALO_REGISTER_COMMAND(CommandSpec{{"validate"}, runValidate});

/// {compact: coll}: compacts the collection's table and its indexes' tables;
/// bytesFreed is what the files shrank by.
void runCompact(OperationContext& op, bson_t* reply) {
    std::string ns = nsOf(op);
    cmdarg::checkFields(op, {"force", "freeSpaceTargetMB", "dryRun"});
    if (cmdarg::getBool(op.cmd, "dryRun", false))
        uasserted(ErrorCode::CommandNotSupported, "compact dryRun is not supported by this server");
    CollectionLock lk(op.store.catalog());
    auto coll = op.store.catalog().lookup(ns);
    if (!coll) uasserted(ErrorCode::NamespaceNotFound, "collection does not exist");
    Engine& e = op.store.engine();
    std::vector<std::string> uris{coll->uri};
    for (const auto& idx : coll->indexes) uris.push_back(idx->uri);
    log::info("command", 20284, "Compact begin",
              fmt::format(R"({{"namespace":{}}})", log::quote(ns)));
    int64_t freed = 0;
    for (const auto& uri : uris) {
        int64_t before = e.tableSizes(uri).fileBytes;
        uassertStatusOK(e.compact(uri));
        int64_t after = e.tableSizes(uri).fileBytes;
        freed += std::max<int64_t>(0, before - after);
    }
    log::info("command", 20286, "Compact end",
              fmt::format(R"({{"namespace":{},"bytesFreed":{}}})", log::quote(ns), freed));
    bson::appendNumber(reply, "bytesFreed", freed);
}

HALO_REGISTER_COMMAND(CommandSpec{{"compact"}, runCompact});

/// createSearchIndexes, updateSearchIndex, dropSearchIndex: Atlas Search needs
/// mongot, which a mongod without searchIndexManagementHostAndPort (and this
/// store) does not have; mongod 7.0 answers so before anything else.
void runSearchIndexCommand(OperationContext&, bson_t*) {
    uasserted(ErrorCode::CommandNotSupported,
              "Search index commands are only supported with Atlas.");
}

HALO_REGISTER_COMMAND(CommandSpec{{"createSearchIndexes"}, runSearchIndexCommand});
HALO_REGISTER_COMMAND(CommandSpec{{"updateSearchIndex"}, runSearchIndexCommand});
HALO_REGISTER_COMMAND(CommandSpec{{"dropSearchIndex"}, runSearchIndexCommand});

/// {fsync: 1}: a checkpoint, so the data files hold every write (and file sizes
/// show them). The fsync lock is not supported.
void runFsync(OperationContext& op, bson_t* reply) {
    if (cmdarg::getBool(op.cmd, "lock", false))
        uasserted(ErrorCode::CommandNotSupported, "fsync lock is not supported by this server");
    op.store.engine().checkpoint();
    BSON_APPEND_INT32(reply, "numFiles", 1);
}

HALO_REGISTER_COMMAND(CommandSpec{{"fsync"}, runFsync, true});

}  // namespace
}  // namespace halo::store
