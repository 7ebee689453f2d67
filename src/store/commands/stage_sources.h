#pragma once
// Aggregation first stages whose documents the server computes instead of
// reading a collection: $currentOp (the operations in flight) and $collStats
// (a collection's statistics). The aggregate command runs the rest of the
// pipeline over what these return. Both throw DBException with mongod's codes
// for a bad specification.
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/commands/command.h"

namespace halo::store {

/// Whether a pipeline stage named `name` is one of these (they must come first).
bool isServerSourceStage(std::string_view name);

/// The documents of `{$currentOp: spec}` run as {aggregate: 1} on admin.
std::vector<bson::Doc> currentOpStage(OperationContext& op, const bson_t* spec);

/// The sessions `{$listLocalSessions: spec}` lists (run with {aggregate: 1}).
std::vector<bson::Doc> listLocalSessionsStage(OperationContext& op, const bson_t* spec);

/// The document of `{$collStats: spec}` on collection `ns`.
std::vector<bson::Doc> collStatsStage(OperationContext& op, const std::string& ns,
                                      const bson_t* spec);

}  // namespace halo::store
