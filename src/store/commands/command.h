#pragma once
// Commands self-register in a table keyed by name (and aliases). A handler
// reads the command document and appends its reply fields; it may throw
// DBException, which the dispatcher turns into {ok:0, code, codeName, errmsg}.
#include <bson/bson.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bson/doc.h"
#include "bson/fields.h"
#include "common/status.h"
#include "store/authz/authorization.h"

namespace halo::store {

class Store;
struct ClientState;
struct WriteProgress;

/// A command that wants to wait before answering (awaitable hello, getMore on
/// an awaitData cursor) fills this instead of replying; the connection waits
/// without blocking a thread and runs the command again (finalAttempt at the
/// deadline).
struct Deferral {
    bool requested = false;
    std::chrono::steady_clock::time_point deadline;
    bool wakeOnOplogCommit = false;
    uint64_t seenCommitSeq = 0;  // the oplog's commitSeq() when the command looked
    int64_t cursorId = 0;        // a killCursors on it ends the wait
    /// In: the command's write conflicts in its earlier runs. Out, with
    /// `requested`: it yielded on a write conflict (ConflictYield) and runs
    /// again after writeConflictDelay(writeConflicts), with this count in.
    int writeConflicts = 0;
    /// In and out with writeConflicts: how far a write command's statements
    /// got before it yielded (its next run resumes there).
    std::shared_ptr<WriteProgress> progress;
};

/// Everything a command sees while it runs on one connection.
struct OperationContext {
    Store& store;
    ClientState& client;
    std::string db;                // from $db (or the OP_QUERY namespace)
    const bson_t* cmd;             // the whole command document, sequences merged in
    const bson::Fields& args;      // cmd's top-level fields, read once: look arguments up here
    std::string_view name;         // the command name as sent
    Deferral* deferral = nullptr;  // null: the command may not wait
    bool finalAttempt = true;      // false while a wait is still possible
    /// With --auth: what the command needed (a cursor it opens keeps it, so
    /// a getMore is refused once the user no longer holds it). Null otherwise.
    const authz::CommandAccess* access = nullptr;
    /// Set by a command that turns out to serve a change stream (a getMore on
    /// its cursor): its errors get the change stream labels.
    bool changeStream = false;
};

struct CommandSpec {
    std::vector<std::string> names;  // first is canonical; the rest are aliases
    std::function<void(OperationContext&, bson_t* reply)> run;
    bool adminOnly = false;
    /// A test command: unknown (CommandNotFound) unless the store runs with
    /// --setParameter enableTestCommands=1, as in mongod.
    bool testOnly = false;
    /// A client's write command whose single-document writes, waiting on an
    /// open transaction's write, give their thread back (ConflictYieldScope).
    bool yieldsOnWriteConflict = false;
};

/// The process-wide command table. Registration happens during static
/// initialisation (see HALO_REGISTER_COMMAND); lookups are read-only after.
class CommandRegistry {
  public:
    static CommandRegistry& instance();
    void add(CommandSpec spec);
    const CommandSpec* find(std::string_view name) const;
    std::vector<std::string> names() const;

  private:
    std::vector<CommandSpec> specs_;
};

struct CommandRegistrar {
    explicit CommandRegistrar(CommandSpec spec) {
        CommandRegistry::instance().add(std::move(spec));
    }
};

#define HALO_CONCAT_INNER(a, b) a##b
#define HALO_CONCAT(a, b) HALO_CONCAT_INNER(a, b)
#define HALO_REGISTER_COMMAND(...) \
    static ::halo::store::CommandRegistrar HALO_CONCAT(haloCommandRegistrar_, __LINE__)(__VA_ARGS__)

// Helpers for reading command fields with mongod's error codes.
namespace cmdarg {
/// The command's first field as a string (TypeMismatch, as mongod's IDL, otherwise).
std::string stringArgument(const OperationContext& op);
/// The collection named by the command's first field (string), validated.
std::string collectionName(const OperationContext& op);
bool getBool(const bson_t* cmd, std::string_view field, bool dflt);
bool getBool(const bson::Fields& cmd, std::string_view field, bool dflt);
int64_t getInt(const bson_t* cmd, std::string_view field, int64_t dflt, std::string_view cmdName);
int64_t getInt(const bson::Fields& cmd, std::string_view field, int64_t dflt,
               std::string_view cmdName);
/// Returns the sub-document at `field`, or nullptr-equivalent when absent.
bool getDoc(const bson_t* cmd, std::string_view field, bson_t* out, std::string_view cmdName);
/// Whether `field` is an argument every command accepts ($db, lsid, txnNumber,
/// readConcern, comment, ...).
bool isGenericArgument(std::string_view field);
bool getDoc(const bson::Fields& cmd, std::string_view field, bson_t* out, std::string_view cmdName);
/// Rejects fields that are neither in `known` nor generic command arguments
/// ($db, lsid, txnNumber, readConcern, ...) with IDLUnknownField (40415), as mongod does.
void checkFields(const OperationContext& op, std::initializer_list<std::string_view> known);
}  // namespace cmdarg

}  // namespace halo::store
