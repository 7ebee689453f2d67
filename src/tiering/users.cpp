#include "tiering/users.h"

#include <fmt/format.h>

namespace halo::tiering {

namespace {

std::string stringField(const bson_t* d, const char* k) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

/// A base64 field (mongod stores salt, storedKey and serverKey as base64 text).
bool base64Field(const bson_t* d, const char* k, auth::Bytes* out) {
    auto v = auth::base64Decode(stringField(d, k));
    if (!v) return false;
    *out = std::move(*v);
    return true;
}

bson::Doc wrapped(const bson_t* user, const char* field, const char* as) {
    bson::Doc d;
    bson_iter_t it;
    if (bson_iter_init_find(&it, user, field) && BSON_ITER_HOLDS_ARRAY(&it))
        bson_append_iter(d.mut(), as, -1, &it);
    else {
        bson_t empty;
        bson_append_array_begin(d.mut(), as, -1, &empty);
        bson_append_array_end(d.mut(), &empty);
    }
    return d;
}

}  // namespace

StatusWith<UserRecord> parseUserDocument(const bson_t* user) {
    UserRecord r;
    r.user = stringField(user, "user");
    r.db = stringField(user, "db");
    if (r.user.empty() || r.db.empty())
        return Status(ErrorCode::ProtocolError, "usersInfo returned a user without user/db");
    bson_t creds;
    if (bson::subDocument(user, "credentials", &creds)) {
        for (auto m : {auth::ScramMechanism::Sha1, auth::ScramMechanism::Sha256}) {
            std::string name(auth::mechanismName(m));
            bson_t c;
            if (!bson::subDocument(&creds, name, &c)) continue;
            auth::ScramCredentials sc;
            bson_iter_t it;
            if (bson_iter_init_find(&it, &c, "iterationCount") && BSON_ITER_HOLDS_NUMBER(&it))
                sc.iterationCount = static_cast<int>(bson_iter_as_int64(&it));
            if (sc.iterationCount <= 0 || !base64Field(&c, "salt", &sc.salt) ||
                !base64Field(&c, "storedKey", &sc.storedKey) ||
                !base64Field(&c, "serverKey", &sc.serverKey))
                return Status(ErrorCode::ProtocolError,
                              fmt::format("usersInfo: malformed {} credentials for {}@{}", name,
                                          r.user, r.db));
            r.credentials.emplace(m, std::move(sc));
        }
    }
    r.roles = wrapped(user, "roles", "roles");
    r.inheritedPrivileges = wrapped(user, "inheritedPrivileges", "privileges");
    bson_t privs;
    if (bson::subDocument(r.inheritedPrivileges.get(), "privileges", &privs)) {
        auto parsed = access::parsePrivileges(&privs);
        if (!parsed.isOK())
            return Status(parsed.getStatus().code(),
                          fmt::format("usersInfo: privileges of {}@{}: {}", r.user, r.db,
                                      parsed.getStatus().reason()));
        r.privileges = std::move(parsed.getValue());
    }
    r.fetched = std::chrono::steady_clock::now();
    return r;
}

asio::awaitable<StatusWith<std::shared_ptr<const UserRecord>>> UserCache::get(
    const std::string& db, const std::string& user, bool fresh) {
    std::string key = db + '\0' + user;
    if (!fresh) {
        std::lock_guard lk(mu_);
        auto it = cache_.find(key);
        if (it != cache_.end() && !stale(*it->second)) co_return it->second;
    }
    bson::Doc c;
    bson_t u;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "usersInfo", &u);
    BSON_APPEND_UTF8(&u, "user", user.c_str());
    BSON_APPEND_UTF8(&u, "db", db.c_str());
    bson_append_document_end(c.mut(), &u);
    BSON_APPEND_BOOL(c.mut(), "showCredentials", true);
    BSON_APPEND_BOOL(c.mut(), "showPrivileges", true);
    BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
    auto r = co_await archive_.runOk(c.get());
    if (!r.isOK())
        co_return Status(r.getStatus().code(),
                         fmt::format("reading user {}@{} from the archive (usersInfo): {}", user,
                                     db, r.getStatus().reason()));
    std::shared_ptr<const UserRecord> rec;
    bson_t users;
    bson_iter_t it;
    if (bson::subDocument(r.getValue().get(), "users", &users) && bson_iter_init(&it, &users) &&
        bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson::View v(data, len);
        auto parsed = parseUserDocument(v.get());
        if (!parsed.isOK()) co_return parsed.getStatus();
        rec = std::make_shared<const UserRecord>(std::move(parsed.getValue()));
    }
    std::lock_guard lk(mu_);
    if (rec)
        cache_[key] = rec;
    else
        cache_.erase(key);
    co_return rec;
}

}  // namespace halo::tiering
