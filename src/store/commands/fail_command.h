#pragma once
// The store's side of the fail points (store/rules/fail_command.h has the
// rules): configureFailPoint, and the target a command on a connection is.
#include <string>
#include <string_view>

#include "store/rules/fail_command.h"

namespace halo::store {

struct ClientState;
struct CommandSpec;

/// What the fail point filters see of `cmd` (named `name`, on `ns`), run by
/// `client`; `spec` gives its aliases (null: only `name`).
FailPointTarget failPointTarget(const CommandSpec* spec, std::string_view name, std::string ns,
                                const ClientState& client, const bson_t* cmd);

}  // namespace halo::store
