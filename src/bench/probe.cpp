#include "bench/probe.h"

#include <fmt/format.h>
#include <mongoc/mongoc.h>

#include <memory>

namespace halo::bench {
namespace {

struct Client {
    mongoc_client_t* c = nullptr;
    explicit Client(const std::string& uri, bson_error_t* err) {
        mongoc_init();
        mongoc_uri_t* u = mongoc_uri_new_with_error(uri.c_str(), err);
        if (!u) return;
        c = mongoc_client_new_from_uri(u);
        if (c) mongoc_client_set_error_api(c, MONGOC_ERROR_API_VERSION_2);
        mongoc_uri_destroy(u);
    }
    ~Client() {
        if (c) mongoc_client_destroy(c);
    }
};

StatusWith<int64_t> int64Field(const bson_t* reply, const char* field) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply, field) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return Status(ErrorCode::OperationFailed, fmt::format("reply has no numeric '{}'", field));
}

/// Runs `cmd` (consumed) into `reply` (always initialised; the caller destroys it).
Status runCommand(const std::string& uri, const std::string& db, bson_t* cmd, bson_t* reply) {
    bson_init(reply);
    bson_error_t err;
    Client client(uri, &err);
    if (!client.c) {
        bson_destroy(cmd);
        return Status(ErrorCode::BadValue, fmt::format("bad uri {}: {}", uri, err.message));
    }
    bson_destroy(reply);
    bool ok = mongoc_client_command_simple(client.c, db.c_str(), cmd, nullptr, reply, &err);
    bson_destroy(cmd);
    if (!ok) return Status(ErrorCode::OperationFailed, fmt::format("{}: {}", uri, err.message));
    return Status::OK();
}

}  // namespace

StatusWith<int64_t> countDocuments(const std::string& uri, const std::string& db,
                                   const std::string& coll, const std::string& filterJson) {
    bson_error_t err;
    bson_t* filter = bson_new_from_json(reinterpret_cast<const uint8_t*>(filterJson.data()),
                                        static_cast<ssize_t>(filterJson.size()), &err);
    if (!filter) return Status(ErrorCode::BadValue, fmt::format("bad filter: {}", err.message));
    bson_t* cmd = BCON_NEW("count", BCON_UTF8(coll.c_str()), "query", BCON_DOCUMENT(filter));
    bson_destroy(filter);
    bson_t reply;
    Status s = runCommand(uri, db, cmd, &reply);
    auto n = s.isOK() ? int64Field(&reply, "n") : StatusWith<int64_t>(s);
    bson_destroy(&reply);
    return n;
}

StatusWith<CollectionSize> collectionSize(const std::string& uri, const std::string& db,
                                          const std::string& coll) {
    bson_t reply;
    Status s = runCommand(uri, db, BCON_NEW("collStats", BCON_UTF8(coll.c_str())), &reply);
    if (!s.isOK()) {
        bson_destroy(&reply);
        return s;
    }
    auto count = int64Field(&reply, "count");
    auto size = int64Field(&reply, "size");
    bson_destroy(&reply);
    if (!count.isOK()) return count.getStatus();
    if (!size.isOK()) return size.getStatus();
    return CollectionSize{count.getValue(), size.getValue()};
}

StatusWith<ProxyStatus> parseProxyStatus(const uint8_t* data, size_t len) {
    bson_t reply;
    if (!bson_init_static(&reply, data, len))
        return Status(ErrorCode::BadValue, "haloclineStatus reply is not a BSON document");
    auto number = [&](const char* dotted) -> std::optional<int64_t> {
        bson_iter_t it, field;
        if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, dotted, &field) &&
            BSON_ITER_HOLDS_NUMBER(&field))
            return bson_iter_as_int64(&field);
        return std::nullopt;
    };
    ProxyStatus out;
    auto fast = number("routing.fast"), archive = number("routing.archive");
    if (fast && archive) out.routing = ProxyRouting{*fast, *archive};
    out.fastRoundTrips = number("tiers.fast.roundTrips");
    out.archiveRoundTrips = number("tiers.archive.roundTrips");
    return out;
}

StatusWith<ProxyStatus> proxyStatus(const std::string& proxyUri) {
    bson_t reply;
    Status s = runCommand(proxyUri, "admin", BCON_NEW("haloclineStatus", BCON_INT32(1)), &reply);
    StatusWith<ProxyStatus> out =
        s.isOK() ? parseProxyStatus(bson_get_data(&reply), reply.len) : StatusWith<ProxyStatus>(s);
    bson_destroy(&reply);
    return out;
}

Status pauseFeeder(const std::string& proxyUri, int64_t millis) {
    bson_t reply;
    Status s =
        runCommand(proxyUri, "admin", BCON_NEW("haloclinePauseFeeder", BCON_INT64(millis)), &reply);
    bson_destroy(&reply);
    return s;
}

Status flushFeeder(const std::string& proxyUri, int64_t maxTimeMs) {
    bson_t reply;
    Status s = runCommand(
        proxyUri, "admin",
        BCON_NEW("haloclineFlushFeeder", BCON_INT32(1), "maxTimeMS", BCON_INT64(maxTimeMs)),
        &reply);
    bson_destroy(&reply);
    return s;
}

}  // namespace halo::bench
