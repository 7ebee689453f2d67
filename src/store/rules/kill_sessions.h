#pragma once
// The argument of killSessions, killAllSessions and killAllSessionsByPattern
// as mongod parses it, for
// the store (which kills the sessions) and the proxy (which names its clients'
// sessions to the tiers, never its own). A pure function of the command.
#include <set>
#include <string>

#include "bson/doc.h"
#include "common/status.h"

namespace halo::store {

/// The sessions a command names: the union of what is set.
struct KillSessionsArgs {
    /// Sessions named by lsid (their id bytes).
    std::set<std::string> ids;
    /// Every session of these users ("user@db").
    std::set<std::string> users;
    /// killSessions []: every session of the caller (every one without auth).
    bool mine = false;
    /// killAllSessions [] or a pattern {}: every session.
    bool every = false;
};

/// `cmd` is {killSessions: [{id: UUID}, ...]}, {killAllSessions: [{user, db}, ...]}
/// or {killAllSessionsByPattern: [{lsid: {id}} | {users: [{user, db}]} | {}, ...]}.
/// Patterns by `uid` or `roles` are refused (115): this store keeps neither.
StatusWith<KillSessionsArgs> parseKillSessions(const bson_t* cmd);

}  // namespace halo::store
