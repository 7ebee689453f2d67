#include "tiering/client_auth.h"

#include <fmt/format.h>

#include "common/log.h"

namespace halo::tiering {

namespace {

/// A SASL payload (BinData or string); a wrong type reads as empty, which the
/// SCRAM exchange then refuses.
std::string payloadOf(const bson_t* cmd, const char* field) {
    std::string out;
    (void)bson::bytesField(cmd, field, &out);
    return out;
}

std::string utf8(const bson_t* d, const char* k) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

bool skipEmptyExchangeOf(const bson_t* cmd) {
    bson_t options;
    bson_iter_t it;
    return bson::subDocument(cmd, "options", &options) &&
           bson_iter_init_find(&it, &options, "skipEmptyExchange") && bson_iter_as_bool(&it);
}

}  // namespace

Status ClientAuth::failed(std::string_view mechanism, const std::string& user,
                          const std::string& db, std::string_view reason, bool speculative) {
    ++counters_.failed;
    log::info(
        "access", 20249, "Authentication failed",
        fmt::format(R"({{"mechanism":{},"speculative":{},"principalName":{},)"
                    R"("authenticationDatabase":{},"remote":{},"extraInfo":{{}},"error":{}}})",
                    log::quote(mechanism), speculative ? "true" : "false", log::quote(user),
                    log::quote(db), log::quote(remote_), log::quote(reason)));
    sasl_.reset();
    saslUser_.reset();
    return Status(ErrorCode::AuthenticationFailed, "Authentication failed.");
}

asio::awaitable<StatusWith<std::string>> ClientAuth::start(std::string_view mechanism,
                                                           std::string_view payload,
                                                           const std::string& db,
                                                           bool skipEmptyExchange,
                                                           bool speculative) {
    sasl_ = std::make_unique<auth::SaslConversation>();
    saslUser_.reset();
    auto user = sasl_->start(mechanism, payload, db, skipEmptyExchange);
    if (!user.isOK()) {
        if (user.getStatus().code() == ErrorCode::MechanismUnavailable) {
            sasl_.reset();
            co_return user.getStatus();
        }
        co_return failed(mechanism, "", db, user.getStatus().reason(), speculative);
    }
    auto rec = co_await users_.get(db, user.getValue());
    if (!rec.isOK())
        co_return failed(mechanism, user.getValue(), db, rec.getStatus().reason(), speculative);
    if (!rec.getValue())
        co_return failed(mechanism, user.getValue(), db,
                         fmt::format("UserNotFound: Could not find user \"{}\" for db \"{}\"",
                                     user.getValue(), db),
                         speculative);
    auto creds = rec.getValue()->credentials.find(sasl_->mechanism());
    if (creds == rec.getValue()->credentials.end())
        co_return failed(mechanism, user.getValue(), db,
                         fmt::format("the user has no {} credentials", mechanism), speculative);
    saslUser_ = rec.getValue();
    co_return sasl_->serverFirst(creds->second);
}

asio::awaitable<StatusWith<bson::Doc>> ClientAuth::saslStart(const bson_t* cmd,
                                                             const std::string& db) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "mechanism"))
        co_return Status(ErrorCode::Location40414,
                         "BSON field 'saslStart.mechanism' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        co_return Status(ErrorCode::TypeMismatch,
                         "BSON field 'saslStart.mechanism' must be a string");
    std::string mechanism = bson_iter_utf8(&it, nullptr);
    auto first =
        co_await start(mechanism, payloadOf(cmd, "payload"), db, skipEmptyExchangeOf(cmd), false);
    if (!first.isOK()) co_return first.getStatus();
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "conversationId", sasl_->id());
    BSON_APPEND_BOOL(out.mut(), "done", false);
    bson::appendBinary(out.mut(), "payload", first.getValue());
    co_return out;
}

asio::awaitable<StatusWith<bson::Doc>> ClientAuth::saslContinue(const bson_t* cmd,
                                                                const std::string& db) {
    if (!sasl_) co_return Status(ErrorCode::ProtocolError, "No SASL session state found");
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, "conversationId") || !BSON_ITER_HOLDS_NUMBER(&it) ||
        bson_iter_as_int64(&it) != sasl_->id()) {
        sasl_.reset();
        co_return Status(ErrorCode::ProtocolError, "sasl: Mismatched conversation id");
    }
    if (db != sasl_->db()) {
        sasl_.reset();
        co_return Status(ErrorCode::ProtocolError,
                         "Attempt to switch database target during SASL authentication.");
    }
    int32_t id = sasl_->id();
    std::string mechanism(auth::mechanismName(sasl_->mechanism()));
    auto step = sasl_->step(payloadOf(cmd, "payload"));
    if (!step.isOK()) {
        std::string user = sasl_->user();
        // The password may have changed in the archive: the next attempt reads it again.
        (void)co_await users_.get(db, user, true);
        co_return failed(mechanism, user, db, step.getStatus().reason(), false);
    }
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "conversationId", id);
    BSON_APPEND_BOOL(out.mut(), "done", step.getValue().done);
    bson::appendBinary(out.mut(), "payload", step.getValue().payload);
    if (step.getValue().done) {
        user_ = saslUser_;
        ++counters_.succeeded;
        log::info("access", 20250, "Authentication succeeded",
                  fmt::format(R"({{"mechanism":{},"speculative":false,"principalName":{},)"
                              R"("authenticationDatabase":{},"remote":{},"extraInfo":{{}}}})",
                              log::quote(mechanism), log::quote(user_->user), log::quote(db),
                              log::quote(remote_)));
        sasl_.reset();
        saslUser_.reset();
    }
    co_return out;
}

asio::awaitable<Status> ClientAuth::authenticate(const bson_t* cmd, const std::string& db,
                                                 bool speculative) {
    std::string mechanism = utf8(cmd, "mechanism");
    if (mechanism != "MONGODB-X509")
        co_return Status(ErrorCode::MechanismUnavailable,
                         fmt::format("Received authentication for mechanism {} which is unknown or "
                                     "not enabled",
                                     mechanism));
    std::string user = utf8(cmd, "user");
    if (db != "$external")
        co_return failed(mechanism, user, db,
                         "X.509 authentication must use the $external database", speculative);
    if (peerSubject_.empty())
        co_return failed(mechanism, user, db,
                         "No verified subject name available from client (no client certificate)",
                         speculative);
    if (!user.empty() && user != peerSubject_)
        co_return failed(mechanism, user, db,
                         "There is no x.509 client certificate matching the user.", speculative);
    auto rec = co_await users_.get("$external", peerSubject_);
    if (!rec.isOK())
        co_return failed(mechanism, peerSubject_, db, rec.getStatus().reason(), speculative);
    if (!rec.getValue())
        co_return failed(
            mechanism, peerSubject_, db,
            fmt::format("UserNotFound: Could not find user \"{}\" for db \"$external\"",
                        peerSubject_),
            speculative);
    user_ = rec.getValue();
    ++counters_.succeeded;
    log::info(
        "access", 20250, "Authentication succeeded",
        fmt::format(R"({{"mechanism":"MONGODB-X509","speculative":{},"principalName":{},)"
                    R"("authenticationDatabase":"$external","remote":{},"extraInfo":{{}}}})",
                    speculative ? "true" : "false", log::quote(peerSubject_), log::quote(remote_)));
    co_return Status::OK();
}

asio::awaitable<void> ClientAuth::appendToHello(const bson_t* cmd, bson_t* reply) {
    if (!enabled_) co_return;
    std::string mechsOf = utf8(cmd, "saslSupportedMechs");
    auto dot = mechsOf.find('.');
    if (dot != std::string::npos) {
        auto rec = co_await users_.get(mechsOf.substr(0, dot), mechsOf.substr(dot + 1));
        if (rec.isOK() && rec.getValue()) {
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(reply, "saslSupportedMechs", &arr);
            int i = 0;
            for (auto& [m, c] : rec.getValue()->credentials) {
                std::string k = std::to_string(i++);
                std::string n(auth::mechanismName(m));
                BSON_APPEND_UTF8(&arr, k.c_str(), n.c_str());
            }
            bson_append_array_end(reply, &arr);
        }
    }
    bson_t spec;
    if (!bson::subDocument(cmd, "speculativeAuthenticate", &spec)) co_return;
    if (bson_has_field(&spec, "authenticate")) {
        // x.509 folded into the handshake: the reply names the user on success.
        std::string db = utf8(&spec, "db");
        if (db.empty()) db = "$external";
        if ((co_await authenticate(&spec, db, true)).isOK()) {
            bson_t sa;
            BSON_APPEND_DOCUMENT_BEGIN(reply, "speculativeAuthenticate", &sa);
            BSON_APPEND_UTF8(&sa, "dbname", "$external");
            BSON_APPEND_UTF8(&sa, "user", peerSubject_.c_str());
            bson_append_document_end(reply, &sa);
        }
        co_return;
    }
    if (!bson_has_field(&spec, "saslStart")) co_return;
    std::string db = utf8(&spec, "db");
    std::string mechanism = utf8(&spec, "mechanism");
    if (db.empty() || mechanism.empty()) co_return;
    auto first = co_await start(mechanism, payloadOf(&spec, "payload"), db,
                                skipEmptyExchangeOf(&spec), true);
    if (!first.isOK()) co_return;  // logged; the driver authenticates with saslStart instead
    bson_t sa;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "speculativeAuthenticate", &sa);
    BSON_APPEND_INT32(&sa, "conversationId", sasl_->id());
    BSON_APPEND_BOOL(&sa, "done", false);
    bson::appendBinary(&sa, "payload", first.getValue());
    bson_append_document_end(reply, &sa);
}

void ClientAuth::appendConnectionStatus(const bson_t* cmd, bson_t* reply) const {
    bson_t info, users, roles;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "authInfo", &info);
    BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUsers", &users);
    if (user_) {
        bson_t u;
        BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
        BSON_APPEND_UTF8(&u, "user", user_->user.c_str());
        BSON_APPEND_UTF8(&u, "db", user_->db.c_str());
        bson_append_document_end(&users, &u);
    }
    bson_append_array_end(&info, &users);
    bson_t r;
    if (user_ && bson::subDocument(user_->roles.get(), "roles", &r))
        BSON_APPEND_ARRAY(&info, "authenticatedUserRoles", &r);
    else {
        BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserRoles", &roles);
        bson_append_array_end(&info, &roles);
    }
    bson_iter_t it;
    bson_t privs;
    if (bson_iter_init_find(&it, cmd, "showPrivileges") && bson_iter_as_bool(&it)) {
        if (user_ && bson::subDocument(user_->inheritedPrivileges.get(), "privileges", &privs))
            BSON_APPEND_ARRAY(&info, "authenticatedUserPrivileges", &privs);
        else {
            bson_t empty;
            BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserPrivileges", &empty);
            bson_append_array_end(&info, &empty);
        }
    }
    bson_append_document_end(reply, &info);
}

asio::awaitable<Status> ClientAuth::check(std::string_view name, const std::string& db,
                                          const bson_t* cmd,
                                          std::span<const wire::DocumentSequence> sequences) {
    if (!enabled_ || !access::requiresAuthentication(name)) co_return Status::OK();
    if (user_ && users_.stale(*user_)) {
        auto rec = co_await users_.get(user_->db, user_->user);
        if (!rec.isOK()) co_return rec.getStatus();
        user_ = rec.getValue();  // null: the user was dropped
    }
    co_return access::authorize(name, db, cmd, privileges(), principal(), sequences);
}

}  // namespace halo::tiering
