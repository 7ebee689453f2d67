#pragma once
// The database profiler (mongod's): with a database's profiling level at 2,
// every operation on it is recorded in <db>.system.profile; at 1 those slower
// than slowms (sampled by sampleRate), or those the level's filter matches.
// system.profile is created on first use, capped at 1 MB (oldest documents
// are removed first), has no _id index and is not replicated, as in mongod.
#include <bson/bson.h>

#include <string_view>

namespace halo::store {

class Store;
struct ClientState;

/// Called by the dispatcher after every command: records it in system.profile
/// and logs mongod's "Slow query" line (51803) when the settings say so; one
/// comparison for a fast command while profiling is off.
/// Never throws: a failure to record is logged.
void profileCommand(Store& store, const ClientState& client, std::string_view db, const bson_t* cmd,
                    const bson_t* reply, int64_t micros);

}  // namespace halo::store
