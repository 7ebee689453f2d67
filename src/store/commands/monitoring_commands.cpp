// Server monitoring: top (per-collection usage, exec/top.h) and connPoolStats
// (outgoing connection pools: this store opens none).
#include "store/commands/command.h"
#include "store/server/store.h"

namespace halo::store {
namespace {

void runTop(OperationContext& op, bson_t* reply) {
    bson_t totals;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "totals", &totals);
    BSON_APPEND_UTF8(&totals, "note", "all times in microseconds");
    op.store.top().appendTotals(&totals);
    bson_append_document_end(reply, &totals);
}

HALO_REGISTER_COMMAND(CommandSpec{{"top"}, runTop, true});

void runConnPoolStats(OperationContext&, bson_t* reply) {
    for (const char* k :
         {"numClientConnections", "numAScopedConnections", "totalInUse", "totalAvailable",
          "totalLeased", "totalCreated", "totalRefreshing", "totalRefreshed", "totalWasNeverUsed",
          "totalWasUsedOnce", "totalConnUsageTimeMillis"})
        BSON_APPEND_INT32(reply, k, 0);
    bson_t empty;
    for (const char* k : {"pools", "hosts", "replicaSets"}) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, k, &empty);
        bson_append_document_end(reply, &empty);
    }
    BSON_APPEND_INT32(reply, "numReplicaSetMonitorsCreated", 0);
}

HALO_REGISTER_COMMAND(CommandSpec{{"connPoolStats"}, runConnPoolStats});

}  // namespace
}  // namespace halo::store
