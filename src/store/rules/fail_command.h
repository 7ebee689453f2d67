#pragma once
// The failCommand fail point, with mongod's semantics (its
// CommandHelpers::shouldActivateFailCommandFailPoint and
// evaluateFailCommandFailPoint). Its data says which commands it is about:
//   failCommands: [names]   (a command matches by any of its names; or failAllCommands)
//   appName                 only connections whose handshake had this client.application.name
//   namespace               only commands on this "db.collection"
//   threadName              only this connection ("conn<id>")
//   failInternalCommands    also the store's own commands and internal clients
//                           (hello with internalClient), which are otherwise spared
// and what happens to them, in this order:
//   blockConnection + blockTimeMS   wait before anything else
//   closeConnection                 the connection closes; no reply is sent
//   errorCode                       {ok: 0, code, codeName, errmsg: "Failing command via
//                                   'failCommand' failpoint"}
//   errorLabels                     replace the labels the store would add to the reply
//   writeConcernError               a command that takes a write concern runs, and its
//                                   reply carries this document as writeConcernError
// configureFailPoint itself is never affected. The point fires (and counts
// against {times}/{skip}) only for a command it is about that it does something
// to: blockConnection, closeConnection or errorCode; writeConcernError is a
// second, separate activation after the command ran.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"
#include "store/rules/fail_point.h"

namespace halo::store {

/// The connection a command came on, as the filters see it.
struct FailPointClient {
    bool local = true;            // the server's own work: no client connection
    bool internalClient = false;  // its handshake said internalClient
    uint64_t connectionId = 0;
    const bson_t* metadata = nullptr;  // the handshake's client metadata, once seen
};

/// The command a fail point looks at.
struct FailPointTarget {
    std::vector<std::string_view> names;  // all its names (aliases); empty: `name` only
    std::string_view name;                // as sent
    std::string ns;                       // "db.collection" (or "db.$cmd")
    FailPointClient client;
    const bson_t* cmd = nullptr;  // a handshake's hello carries the client's metadata
};

/// Whether failCommand-style `data` is about `target` (filters above). With
/// `onlyCommand`, failCommands is taken as naming just that command (mongod's
/// failGetMoreAfterCursorCheckout).
bool failPointAppliesTo(const bson_t* data, const FailPointTarget& target,
                        std::optional<std::string_view> onlyCommand = std::nullopt);

/// What failCommand does to one command, decided when it arrives.
struct FailCommandEffect {
    std::shared_ptr<const bson::Doc> data;  // null: the point did not fire
    std::optional<std::chrono::milliseconds> block;
    bool closeConnection = false;
    std::optional<Status> error;           // errorCode, or a bad blockTimeMS
    std::optional<bson::Doc> errorLabels;  // the labels of the reply, as given
    bool fired() const { return data != nullptr; }
};

/// Evaluates failCommand for a command about to run.
FailCommandEffect evaluateFailCommand(FailPoint& failCommand, const FailPointTarget& target);

/// The effect of data that already fired (a blocked command resumes with it).
FailCommandEffect failCommandEffectOf(std::shared_ptr<const bson::Doc> data);

/// After a command that takes a write concern ran: the writeConcernError the
/// fail point puts in its reply (and the labels to go with it), if it fires.
struct FailCommandWriteConcernError {
    bson::Doc field;  // {writeConcernError: <as given>}, to append to the reply
    std::optional<bson::Doc> errorLabels;
};
std::optional<FailCommandWriteConcernError> evaluateFailCommandWriteConcern(
    FailPoint& failCommand, const FailPointTarget& target);

}  // namespace halo::store
