#pragma once
// A client for one tier (a MongoDB replica set or standalone), over the wire
// protocol on standalone Asio coroutines. It finds the primary from the
// connection string's hosts with `hello`, keeps a pool of connections to it,
// and moves raw OP_MSG frames. Only standard MongoDB commands pass through it.
// With tls=true (or ssl=true) in the URI every connection, primary discovery
// included, runs over TLS and checks the server's certificate (tlsCAFile or
// the system store) and host name, as drivers do.
// With credentials in the URI, every new connection authenticates (SCRAM-SHA-256
// or SCRAM-SHA-1, negotiated through hello's saslSupportedMechs as drivers do)
// before any command runs on it.
#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bson/doc.h"
#include "common/status.h"

namespace asio::ssl {
class context;
}

namespace halo::tiering {

using Frame = std::vector<uint8_t>;

/// What a tier's hello told us.
struct TierInfo {
    int32_t minWireVersion = 0;
    int32_t maxWireVersion = 0;
    int32_t maxBsonObjectSize = 16 * 1024 * 1024;
    int32_t maxMessageSizeBytes = 48'000'000;
    int32_t maxWriteBatchSize = 100'000;
    int64_t logicalSessionTimeoutMinutes = 30;
    std::string setName;
    std::string primary;  // "host:port"
};

/// Sessions the proxy makes: a driver's kind, or marked (kInternalSessionPrefix,
/// kAppSessionPrefix) so change streams can tell their writes apart.
enum class SessionKind { Random, Internal, App };

class Tier {
  public:
    /// Connections are made on the executor of the coroutine that needs one.
    Tier(std::string name, std::string uri);
    ~Tier();
    Tier(const Tier&) = delete;
    Tier& operator=(const Tier&) = delete;

    /// Parses the connection string and loads its TLS files. Refuses options
    /// this client cannot honour (mechanisms other than SCRAM) with a message
    /// naming them.
    Status init();

    const std::string& name() const { return name_; }
    const std::string& uri() const { return uri_; }
    bool reachable() const { return reachable_.load(); }
    TierInfo info() const;

    /// Sends one whole request frame (its requestId is replaced) and returns the
    /// whole reply frame. Network failures come back as HostUnreachable.
    asio::awaitable<StatusWith<Frame>> roundTrip(Frame request);
    /// Sends several request frames on one connection at once and returns
    /// their reply frames in order: the server runs them one after another, as
    /// if each had waited for the one before, but we wait once (one round trip;
    /// plain TCP pipelining, which mongod serves like any client's requests).
    /// A network failure fails them all.
    asio::awaitable<StatusWith<std::vector<Frame>>> roundTrips(std::vector<Frame> requests);

    /// Runs a command (the document must carry $db). The reply as the server
    /// sent it, ok:0 included; only transport failures are errors.
    asio::awaitable<StatusWith<bson::Doc>> run(const bson_t* cmd);
    /// Like run(), but a reply with ok:0, writeErrors or writeConcernError
    /// becomes an error Status with the server's code and message.
    asio::awaitable<StatusWith<bson::Doc>> runOk(const bson_t* cmd);
    /// Runs a find or aggregate and follows the cursor to the end.
    asio::awaitable<StatusWith<std::vector<bson::Doc>>> collect(const bson_t* cmd);
    /// Runs commands in one round trip (roundTrips): their replies in order, ok:0
    /// included. Use it only where sending a command before the one ahead of it
    /// answered is as safe as after: a later command must not depend on an earlier
    /// one's outcome except through what the server itself does in order.
    asio::awaitable<StatusWith<std::vector<bson::Doc>>> runAll(
        const std::vector<const bson_t*>& cmds);

    /// A fresh logical session id ({id: UUID}) for this tier's transactions,
    /// marked by the prefix of its kind.
    static bson::Doc newSessionId(SessionKind kind = SessionKind::Random);

    /// The connection pool, as connPoolStats reports it.
    struct PoolStats {
        int64_t inUse = 0;       // round trips in flight
        int64_t available = 0;   // idle connections
        int64_t created = 0;     // connections opened since start
        int64_t roundTrips = 0;  // requests sent since start
    };
    PoolStats poolStats() const;

    /// Closes and forgets every idle connection (they belong to execution
    /// contexts that may go away: call it before destroying one).
    void closeIdle();

  private:
    struct Conn;
    /// A connection to the primary: an idle one, else a new one (discovering the
    /// primary first if needed) that answered its hello and authentication
    /// within `limit` (0: none).
    asio::awaitable<StatusWith<std::unique_ptr<Conn>>> acquire(std::chrono::milliseconds limit);
    std::unique_ptr<Conn> takeIdle(asio::execution_context* context);
    void release(std::unique_ptr<Conn> c);
    /// A new connection, its limit armed (the caller disarms it once the
    /// connection has answered its hello and authentication).
    asio::awaitable<StatusWith<std::unique_ptr<Conn>>> connect(const std::string& host,
                                                               uint16_t port,
                                                               std::chrono::milliseconds limit);
    asio::awaitable<Status> open(Conn& c, const std::string& host, uint16_t port);
    Status noAnswer(const std::string& host, uint16_t port, std::chrono::milliseconds limit) const;
    asio::awaitable<Status> discoverPrimary(std::chrono::milliseconds limit);
    /// Authenticates a freshly connected connection with the URI's credentials
    /// (no-op without them). `hello` is the reply of a hello sent on it with
    /// saslSupportedMechs, or null (then the mechanism found at discovery is used).
    asio::awaitable<Status> authenticate(Conn& c, const bson_t* hello);
    /// Writes `n` requests at once and reads their replies into `replies`.
    asio::awaitable<Status> exchange(Conn& c, Frame* requests, Frame* replies, size_t n);
    /// roundTrip() for `n` requests (replies: room for `n`).
    asio::awaitable<Status> roundTripsInto(Frame* requests, Frame* replies, size_t n);

    std::string name_;
    std::string uri_;
    std::vector<std::pair<std::string, uint16_t>> seeds_;
    std::string replicaSet_;
    std::unique_ptr<asio::ssl::context> tls_;  // set when the URI asks for TLS
    bool tlsCheckHostname_ = true;
    // Credentials from the URI (empty user: none). The password never leaves this object.
    std::string user_;
    std::string password_;
    std::string authSource_;
    std::string mechanism_;   // as configured: "", "SCRAM-SHA-1" or "SCRAM-SHA-256"
    std::string negotiated_;  // from saslSupportedMechs at discovery (under mu_)
    std::chrono::milliseconds connectTimeout_{10'000};  // the URI's connectTimeoutMS
    std::chrono::milliseconds socketTimeout_{0};        // the URI's socketTimeoutMS (0: none)

    mutable std::mutex mu_;
    std::optional<std::pair<std::string, uint16_t>> primary_;
    // Idle connections per execution context (an io_context per proxy thread):
    // a coroutine takes one of its own context's, so its I/O stays on its thread.
    std::unordered_map<asio::execution_context*, std::vector<std::unique_ptr<Conn>>> idle_;
    TierInfo info_;
    std::atomic<bool> reachable_{false};
    std::atomic<int64_t> inUse_{0};
    std::atomic<int64_t> created_{0};
    std::atomic<int64_t> roundTrips_{0};
    std::atomic<int32_t> nextRequestId_{1};
};

/// Error Status from a reply: ok:0, the first writeError, or writeConcernError.
/// OK when the reply reports success.
Status replyStatus(const bson_t* reply);

/// A multi-document transaction on one tier under its own session. run() adds
/// lsid, txnNumber, autocommit and (first time) startTransaction; commit() and
/// abort() end it. Destroying an unfinished transaction does not abort it: call
/// abort() (the server also aborts it when the session times out).
class Transaction {
  public:
    Transaction(Tier& tier, const bson_t* lsid, int64_t txnNumber);
    asio::awaitable<StatusWith<bson::Doc>> run(const bson_t* cmd);
    /// Runs statements in one round trip (Tier::runAll), each as run() would;
    /// a statement's error (ok:0, writeErrors) is its own entry. After a failed
    /// statement the server has aborted the transaction, so the ones after it
    /// fail too (NoSuchTransaction): the first error is the one that counts.
    asio::awaitable<std::vector<StatusWith<bson::Doc>>> runAll(
        const std::vector<const bson_t*>& cmds);
    /// The commit's reply (its operationTime is the transaction's time).
    /// When the connection fails before the reply, the commit is retried (as
    /// drivers do; the tier answers a committed transaction's retry with ok,
    /// also after a restart) until the tier answers or kCommitRetryWindow ends.
    asio::awaitable<StatusWith<bson::Doc>> commit();
    asio::awaitable<void> abort();
    /// After a failed commit(): the tier never answered, so the transaction
    /// may have committed. Its work must not be redone as if it had not.
    bool commitUnknown() const { return commitUnknown_; }

    static constexpr std::chrono::seconds kCommitRetryWindow{10};

  private:
    /// `cmd` with the session's fields (and startTransaction the first time).
    bson::Doc statement(const bson_t* cmd);

    Tier& tier_;
    bson::Doc lsid_;
    int64_t txnNumber_;
    bool started_ = false;
    bool commitUnknown_ = false;
};

/// The lsid ids of the protocol's own sessions (promotion, warm-up, eviction)
/// start with these bytes (a version-4 UUID still), so a change stream can
/// leave out the writes of their transactions: every change event of a
/// transaction carries its lsid (CONSISTENCY.md, Change streams).
inline constexpr uint8_t kInternalSessionPrefix[8] = {0x68, 0x61, 0x6c, 0x6f,
                                                      0x63, 0x6c, 0x49, 0x6e};
/// The lsid ids of the sessions the proxy runs the application's deletes in
/// (with their tombstones): a change event shows no session for them, as
/// mongod shows none for a write outside a transaction.
inline constexpr uint8_t kAppSessionPrefix[8] = {0x68, 0x61, 0x6c, 0x6f, 0x63, 0x6c, 0x41, 0x70};
/// Whether a document's `lsid.id` is a UUID starting with `prefix`.
bool sessionHasPrefix(const bson_t* doc, const uint8_t (&prefix)[8]);
/// Whether lsid id bytes start with `prefix`.
bool sessionIdHasPrefix(std::string_view id, const uint8_t (&prefix)[8]);
/// A $match stage (appended to `pipeline` under `key`) that passes every
/// change event except those of transactions on internal sessions.
void appendUserEventsOnly(bson_t* pipeline, const char* key);

/// A pool of sessions for the proxy's transactions: each transaction takes a
/// session no other running transaction uses, with the next txnNumber.
/// Internal sessions' writes are the protocol's own, which change streams do
/// not show; App sessions' (deletes with tombstones) are the application's.
class SessionPool {
  public:
    explicit SessionPool(SessionKind kind) : kind_(kind) {}
    struct Lease {
        bson::Doc lsid;
        int64_t txnNumber;
    };
    Lease take();
    void give(Lease l);

  private:
    SessionKind kind_;
    std::mutex mu_;
    std::vector<Lease> free_;
};

/// Runs a find or aggregate with `run` and follows the cursor to the end.
using CommandRunner = std::function<asio::awaitable<StatusWith<bson::Doc>>(const bson_t*)>;
asio::awaitable<StatusWith<std::vector<bson::Doc>>> collectWith(CommandRunner run,
                                                                const bson_t* cmd);

/// Runs finds or aggregates on `tier` in one round trip (Tier::runAll) and
/// follows each cursor to the end: each command's documents, in order. The
/// first command that failed fails them all.
asio::awaitable<StatusWith<std::vector<std::vector<bson::Doc>>>> collectAll(
    Tier& tier, const std::vector<const bson_t*>& cmds);

/// The documents of a cursor reply's firstBatch or nextBatch (not following the cursor).
std::vector<bson::Doc> batchOf(const bson_t* reply);

/// Errors that say nothing about whether a command ran: the connection
/// failed, or the server went away (a refusal, such as NoSuchTransaction, is
/// an answer).
bool unanswered(const Status& s);

/// Whether a transaction error is worth retrying (WriteConflict, the
/// TransientTransactionError label, NoSuchTransaction after a conflict).
bool isTransient(const Status& s);

}  // namespace halo::tiering
