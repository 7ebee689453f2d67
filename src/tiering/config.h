#pragma once
// Halocline's proxy configuration: a mongod.conf-style YAML file. Every key is
// checked at start; an invalid file is refused with a message naming the key.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "net/tls_options.h"

namespace halo::tiering {

using Millis = std::chrono::milliseconds;

/// The tiering policy of one collection.
struct CollectionPolicy {
    std::string ns;        // "db.coll"
    std::string ageField;  // a date field, or "_id" for ObjectId creation times
    Millis horizon{0};     // documents younger than this belong in the fast tier
    bool promoteOnRead = true;
    // Change streams on the collection are served from the fast tier
    // (CONSISTENCY.md, Change streams); its writes then never run in the
    // archive (no cold writes), where the fast tier's stream would miss them.
    bool changeStreams = false;
};

struct ProxyConfig {
    // net
    std::string bindIp = "127.0.0.1";
    int port = 27017;
    int64_t maxIncomingConnections = 1'000'000;  // net.maxIncomingConnections, as mongod
    // setParameter.enableTestCommands: configureFailPoint (failCommand), as on
    // mongos. Never in production.
    bool enableTestCommands = false;
    net::TlsServerOptions tls;  // net.tls: TLS for the proxy's clients
    // tiers
    std::string fastUri;
    std::string archiveUri;
    // tiering
    std::string metadataDb = "halocline";
    Millis clockSkewGuard{60'000};
    Millis causalWaitTimeout{10'000};
    bool causalReads = true;
    // Finds with skip + limit up to this many documents are merged reads
    // (CONSISTENCY.md, Merged reads) instead of waiting for the feeder; 0: never.
    int64_t mergedReadLimit = 1000;
    // Writes of one archive-only document that leave its age alone run in the
    // archive (CONSISTENCY.md, Cold writes) instead of promoting it.
    bool coldWrites = true;
    // A statement of a transaction on a tiered collection copies up what it
    // matches in the archive first (CONSISTENCY.md, Transactions); more than
    // this many such documents fail the statement (TransactionTooLarge).
    int64_t transactionPromotionLimit = 10'000;
    Millis cursorTimeout{600'000};
    size_t maxCursors = 100'000;
    std::vector<CollectionPolicy> collections;
    // workers
    bool workersEnabled = true;
    Millis lease{10'000};
    int feederBatchSize = 1000;
    // eager: the archive receives every write within a batch (direct archive
    // readers see it at once); lazy: the feeder gathers the documents it must
    // write and writes each once per lazyDelay, or sooner when a read needs it
    // (CONSISTENCY.md, The feeder, Lazy mode).
    bool feederLazy = false;
    Millis feederLazyDelay{300'000};
    Millis evictorInterval{1000};
    int evictorMaxDocsPerSecond = 10'000;
    int warmerBatchSize = 500;
    int warmerMaxDocsPerSecond = 20'000;
    Millis warmerInterval{1000};
    // security
    /// Whether clients must authenticate (security.authorization). Unset in the
    /// file: enabled exactly when a tier URI carries credentials.
    bool authorization = false;
    bool authorizationExplicit = false;  // the file said so (a `disabled` is warned about)
    /// How long the proxy trusts a user's credentials and privileges read from
    /// the archive (security.userCacheInvalidationIntervalSecs, as mongos).
    Millis userCacheInvalidation{30'000};
    // systemLog
    std::string logPath;
    bool verbose = false;

    const CollectionPolicy* policyFor(std::string_view ns) const;
};

/// Whether a connection string carries a user (mongodb://user[:pwd]@host...).
bool hasCredentials(std::string_view uri);

/// The longest duration a setting takes: 100 years, which every clock the
/// proxy adds it to (nanosecond steady and system clocks) can still hold.
inline constexpr Millis kMaxDuration{100LL * 365 * 86'400'000};

/// Parses "30d", "12h", "5m", "90s", "250ms" or a plain number of seconds, at
/// most kMaxDuration (BadValue beyond).
StatusWith<Millis> parseDuration(std::string_view text);

/// Loads and validates a YAML file. Errors name the key: "tiering.collections[0].horizon:
/// must be a positive duration such as 30d".
StatusWith<ProxyConfig> loadProxyConfig(const std::string& path);
StatusWith<ProxyConfig> parseProxyConfig(const std::string& yamlText);

}  // namespace halo::tiering
