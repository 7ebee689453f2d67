#pragma once
// The argument of killSessions and killAllSessions as mongod parses it, for
// the store (which kills the sessions) and the proxy (which names its clients'
// sessions to the tiers, never its own). A pure function of the command.
#include <set>
#include <string>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::store {

struct KillSessionsArgs {
    /// killSessions: the listed lsid ids (their bytes).
    std::set<std::string> ids;
    /// killAllSessions: the listed users, as "user@db".
    std::set<std::string> users;
    /// The list was empty: the caller's sessions (killSessions) or every
    /// session (killAllSessions).
    bool empty = true;
};

/// `cmd` is {killSessions: [{id: UUID}, ...]} or {killAllSessions: [{user, db}, ...]}.
StatusWith<KillSessionsArgs> parseKillSessions(const bson_t* cmd);

}  // namespace halo::store
