// Authentication and user management: saslStart, saslContinue, createUser,
// updateUser, grantRolesToUser, revokeRolesFromUser, dropUser,
// dropAllUsersFromDatabase, usersInfo,
// connectionStatus, logout; hello's saslSupportedMechs and speculative
// authentication. Replies and error codes follow mongod's.
#include "store/commands/auth_commands.h"

#include <fmt/format.h>

#include <algorithm>

#include "auth/scram.h"
#include "common/log.h"
#include "store/commands/command.h"
#include "store/server/store.h"
#include "store/storage/catalog.h"

namespace halo::store {

namespace {

using halo::auth::ScramMechanism;

constexpr const char* kUsers = "system.users";
constexpr ScramMechanism kAllMechanisms[] = {ScramMechanism::Sha1, ScramMechanism::Sha256};

std::string userAtDb(std::string_view user, std::string_view db) {
    return fmt::format("{}@{}", user, db);
}

std::string stringField(const bson_t* d, const char* k) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

/// The first batch of an internal find (user documents are few: one batch).
std::vector<bson::Doc> findUsers(Store& store, const bson_t* filter) {
    bson::Doc cmd;
    BSON_APPEND_UTF8(cmd.mut(), "find", kUsers);
    BSON_APPEND_DOCUMENT(cmd.mut(), "filter", filter);
    bson_t sort;
    BSON_APPEND_DOCUMENT_BEGIN(cmd.mut(), "sort", &sort);
    BSON_APPEND_INT32(&sort, "_id", 1);
    bson_append_document_end(cmd.mut(), &sort);
    BSON_APPEND_INT64(cmd.mut(), "batchSize", 1'000'000);
    BSON_APPEND_BOOL(cmd.mut(), "singleBatch", true);
    bson::Doc reply = store.runInternal("admin", cmd.get());
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply.get(), "ok") && !bson_iter_as_bool(&it)) {
        int code = 8;
        if (bson_iter_init_find(&it, reply.get(), "code")) code = bson_iter_as_int64(&it);
        uasserted(static_cast<ErrorCode>(code),
                  "reading admin.system.users: " + stringField(reply.get(), "errmsg"));
    }
    std::vector<bson::Doc> out;
    bson_t cursor, batch;
    if (!bson::subDocument(reply.get(), "cursor", &cursor) ||
        !bson::subDocument(&cursor, "firstBatch", &batch))
        return out;
    bson_iter_init(&it, &batch);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        out.push_back(bson::Doc::copyOf(data, len));
    }
    return out;
}

std::optional<halo::auth::ScramCredentials> credentialsOf(const bson_t* userDoc, ScramMechanism m) {
    bson_t creds, c;
    std::string name(halo::auth::mechanismName(m));
    if (!bson::subDocument(userDoc, "credentials", &creds) || !bson::subDocument(&creds, name, &c))
        return std::nullopt;
    halo::auth::ScramCredentials out;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, &c, "iterationCount") || !BSON_ITER_HOLDS_NUMBER(&it))
        return std::nullopt;
    out.iterationCount = static_cast<int>(bson_iter_as_int64(&it));
    auto salt = halo::auth::base64Decode(stringField(&c, "salt"));
    auto stored = halo::auth::base64Decode(stringField(&c, "storedKey"));
    auto server = halo::auth::base64Decode(stringField(&c, "serverKey"));
    if (!salt || !stored || !server || stored->empty() || server->empty()) return std::nullopt;
    out.salt = std::move(*salt);
    out.storedKey = std::move(*stored);
    out.serverKey = std::move(*server);
    return out;
}

std::vector<ScramMechanism> mechanismsOf(const bson_t* userDoc) {
    std::vector<ScramMechanism> out;
    for (auto m : kAllMechanisms)
        if (credentialsOf(userDoc, m)) out.push_back(m);
    return out;
}

void appendMechanismNames(bson_t* reply, const char* field,
                          const std::vector<ScramMechanism>& mechs) {
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(reply, field, &arr);
    for (size_t i = 0; i < mechs.size(); ++i) {
        std::string k = std::to_string(i);
        std::string_view n = halo::auth::mechanismName(mechs[i]);
        bson_append_utf8(&arr, k.c_str(), -1, n.data(), static_cast<int>(n.size()));
    }
    bson_append_array_end(reply, &arr);
}

// --- SASL ---------------------------------------------------------------------

/// Logs the detailed reason (never the password) and returns what the client
/// sees, as mongod: AuthenticationFailed, "Authentication failed.".
Status authenticationFailed(const ClientState& client, std::string_view mechanism,
                            std::string_view user, std::string_view db, std::string_view reason) {
    log::info("access", 20249, "Authentication failed",
              fmt::format(R"({{"mechanism":{},"user":{},"db":{},"remote":{},"error":{}}})",
                          log::quote(mechanism), log::quote(user), log::quote(db),
                          log::quote(client.remote), log::quote(reason)));
    return Status(ErrorCode::AuthenticationFailed, "Authentication failed.");
}

std::string payloadOf(const bson_t* cmd, const char* field) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, cmd, field)) return {};
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t* data;
        bson_iter_binary(&it, &st, &len, &data);
        return std::string(reinterpret_cast<const char*>(data), len);
    }
    if (BSON_ITER_HOLDS_UTF8(&it)) return bson_iter_utf8(&it, nullptr);
    uasserted(ErrorCode::TypeMismatch, "SASL payload must be BinData or a string");
}

void appendPayload(bson_t* reply, std::string_view payload) {
    bson_append_binary(reply, "payload", 7, BSON_SUBTYPE_BINARY,
                       reinterpret_cast<const uint8_t*>(payload.data()),
                       static_cast<uint32_t>(payload.size()));
}

/// saslStart (also inside hello's speculativeAuthenticate): returns server-first.
StatusWith<std::string> startConversation(Store& store, ClientState& client, std::string db,
                                          std::string_view mechanism, std::string_view payload,
                                          bool skipEmptyExchange) {
    client.sasl.reset();
    auto mech = halo::auth::mechanismFromName(mechanism);
    if (!mech)
        return Status(ErrorCode::MechanismUnavailable,
                      fmt::format("Received authentication for mechanism {} which is unknown or "
                                  "not enabled",
                                  mechanism));
    SaslConversation conv;
    conv.db = std::move(db);
    conv.skipEmptyExchange = skipEmptyExchange;
    conv.scram = std::make_unique<halo::auth::ScramServer>(*mech);
    auto user = conv.scram->start(payload);
    if (!user.isOK())
        return authenticationFailed(client, mechanism, "", conv.db, user.getStatus().reason());
    conv.user = user.getValue();
    auto doc = findUserDoc(store, conv.db, conv.user);
    if (!doc)
        return authenticationFailed(client, mechanism, conv.user, conv.db,
                                    fmt::format("UserNotFound: Could not find user \"{}\" for db "
                                                "\"{}\"",
                                                conv.user, conv.db));
    auto creds = credentialsOf(doc->get(), *mech);
    if (!creds)
        return authenticationFailed(
            client, mechanism, conv.user, conv.db,
            fmt::format("the user has no {} credentials", halo::auth::mechanismName(*mech)));
    std::string serverFirst = conv.scram->serverFirst(*creds);
    client.sasl = std::move(conv);
    return serverFirst;
}

void completeAuthentication(Store& store, ClientState& client) {
    SaslConversation& conv = *client.sasl;
    uint64_t gen = store.userGeneration();
    auto doc = findUserDoc(store, conv.db, conv.user);
    std::string mech(halo::auth::mechanismName(conv.scram->mechanism()));
    if (!doc) {
        Status s = authenticationFailed(client, mech, conv.user, conv.db,
                                        "the user was dropped during authentication");
        client.sasl.reset();
        throw DBException(s);
    }
    client.user = AuthenticatedUser{conv.user, conv.db, rolesOf(doc->get()), gen};
    log::info("access", 5286306, "Successfully authenticated",
              fmt::format(R"({{"mechanism":{},"user":{},"db":{},"remote":{}}})", log::quote(mech),
                          log::quote(conv.user), log::quote(conv.db), log::quote(client.remote)));
    client.sasl.reset();
}

void runSaslStart(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {"mechanism", "payload", "autoAuthorize", "options"});
    bson_iter_t it;
    if (!bson::find(op.cmd, "mechanism", &it))
        uasserted(ErrorCode::Location40414,
                  "BSON field 'saslStart.mechanism' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch, "BSON field 'saslStart.mechanism' must be a string");
    std::string mechanism = bson_iter_utf8(&it, nullptr);
    bson_t options;
    bool skip = false;
    if (cmdarg::getDoc(op.cmd, "options", &options, "saslStart"))
        skip = cmdarg::getBool(&options, "skipEmptyExchange", false);
    auto first = startConversation(op.store, op.client, op.db, mechanism,
                                   payloadOf(op.cmd, "payload"), skip);
    if (!first.isOK()) throw DBException(first.getStatus());
    BSON_APPEND_INT32(reply, "conversationId", op.client.sasl->id);
    BSON_APPEND_BOOL(reply, "done", false);
    appendPayload(reply, first.getValue());
}

void runSaslContinue(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {"conversationId", "payload"});
    int64_t id = cmdarg::getInt(op.cmd, "conversationId", -1, "saslContinue");
    ClientState& client = op.client;
    if (!client.sasl) uasserted(ErrorCode::ProtocolError, "No SASL session state found");
    if (id != client.sasl->id) {
        client.sasl.reset();
        uasserted(ErrorCode::ProtocolError, "sasl: Mismatched conversation id");
    }
    if (op.db != client.sasl->db) {
        client.sasl.reset();
        uasserted(ErrorCode::ProtocolError,
                  "Attempt to switch database target during SASL authentication.");
    }
    int32_t convId = client.sasl->id;
    if (client.sasl->awaitingEmptyStep) {
        completeAuthentication(op.store, client);
        BSON_APPEND_INT32(reply, "conversationId", convId);
        BSON_APPEND_BOOL(reply, "done", true);
        appendPayload(reply, "");
        return;
    }
    auto final = client.sasl->scram->finish(payloadOf(op.cmd, "payload"));
    if (!final.isOK()) {
        std::string mech(halo::auth::mechanismName(client.sasl->scram->mechanism()));
        Status s = authenticationFailed(client, mech, client.sasl->user, client.sasl->db,
                                        final.getStatus().reason());
        client.sasl.reset();
        throw DBException(s);
    }
    BSON_APPEND_INT32(reply, "conversationId", convId);
    if (client.sasl->skipEmptyExchange) {
        completeAuthentication(op.store, client);
        BSON_APPEND_BOOL(reply, "done", true);
    } else {
        client.sasl->awaitingEmptyStep = true;
        BSON_APPEND_BOOL(reply, "done", false);
    }
    appendPayload(reply, final.getValue());
}

HALO_REGISTER_COMMAND(CommandSpec{{"saslStart"}, runSaslStart});
HALO_REGISTER_COMMAND(CommandSpec{{"saslContinue"}, runSaslContinue});

HALO_REGISTER_COMMAND(CommandSpec{{"logout"}, [](OperationContext& op, bson_t*) {
                                      op.client.user.reset();
                                      op.client.sasl.reset();
                                  }});

HALO_REGISTER_COMMAND(CommandSpec{
    {"connectionStatus"}, [](OperationContext& op, bson_t* r) {
        cmdarg::checkFields(op, {"showPrivileges"});
        bson_t info, users, roles;
        BSON_APPEND_DOCUMENT_BEGIN(r, "authInfo", &info);
        BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUsers", &users);
        if (op.client.user) {
            bson_t u;
            BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
            BSON_APPEND_UTF8(&u, "user", op.client.user->user.c_str());
            BSON_APPEND_UTF8(&u, "db", op.client.user->db.c_str());
            bson_append_document_end(&users, &u);
        }
        bson_append_array_end(&info, &users);
        BSON_APPEND_ARRAY_BEGIN(&info, "authenticatedUserRoles", &roles);
        if (op.client.user) {
            int i = 0;
            for (const auto& role : op.client.user->roles) {
                std::string k = std::to_string(i++);
                bson_t d;
                BSON_APPEND_DOCUMENT_BEGIN(&roles, k.c_str(), &d);
                BSON_APPEND_UTF8(&d, "role", role.role.c_str());
                BSON_APPEND_UTF8(&d, "db", role.db.c_str());
                bson_append_document_end(&roles, &d);
            }
        }
        bson_append_array_end(&info, &roles);
        bson_append_document_end(r, &info);
    }});

// --- User management ------------------------------------------------------------

std::string userNameArg(const OperationContext& op) {
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type 'string'",
                              op.name, op.name, bson::typeName(bson_iter_type(&it))));
    std::string name = bson_iter_utf8(&it, nullptr);
    if (name.empty())
        uasserted(ErrorCode::BadValue, "User document needs 'user' field to be non-empty");
    return name;
}

void checkUserDb(std::string_view db) {
    if (db == "local") uasserted(ErrorCode::BadValue, "Cannot create users in the local database");
    if (db == "$external")
        uasserted(ErrorCode::BadValue,
                  "Users on $external (LDAP, x.509, Kerberos) are not supported by this store");
}

std::vector<authz::RoleName> parseRoles(const OperationContext& op) {
    bson_iter_t it, a;
    if (!bson::find(op.cmd, "roles", &it))
        uasserted(ErrorCode::Location40414,
                  fmt::format("BSON field '{}.roles' is missing but a required field", op.name));
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.roles' is the wrong type '{}', expected type 'array'",
                              op.name, bson::typeName(bson_iter_type(&it))));
    std::vector<authz::RoleName> out;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        authz::RoleName r;
        if (BSON_ITER_HOLDS_UTF8(&a)) {
            r = {bson_iter_utf8(&a, nullptr), op.db};
        } else if (BSON_ITER_HOLDS_DOCUMENT(&a)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&a, &len, &data);
            bson::View v(data, len);
            r = {stringField(v.get(), "role"), stringField(v.get(), "db")};
            if (r.role.empty() || r.db.empty())
                uasserted(ErrorCode::BadValue,
                          "A role document needs string 'role' and 'db' fields");
        } else {
            uasserted(ErrorCode::BadValue, "Role names must be either strings or objects");
        }
        if (!authz::isBuiltinRole(r))
            uasserted(ErrorCode::RoleNotFound,
                      fmt::format("Could not find role: {}", userAtDb(r.role, r.db)));
        bool dup = false;
        for (const auto& o : out) dup = dup || o == r;
        if (!dup) out.push_back(std::move(r));
    }
    return out;
}

/// The mechanisms named by the command (nullopt when absent).
std::optional<std::vector<ScramMechanism>> parseMechanisms(const OperationContext& op) {
    bson_iter_t it, a;
    if (!bson::find(op.cmd, "mechanisms", &it)) return std::nullopt;
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        uasserted(ErrorCode::TypeMismatch, "mechanisms field must be an array");
    std::vector<ScramMechanism> out;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        std::string name = BSON_ITER_HOLDS_UTF8(&a) ? bson_iter_utf8(&a, nullptr) : "";
        auto m = halo::auth::mechanismFromName(name);
        if (!m) uasserted(ErrorCode::BadValue, fmt::format("Unknown auth mechanism '{}'", name));
        bool dup = false;
        for (auto o : out) dup = dup || o == *m;
        if (!dup) out.push_back(*m);
    }
    if (out.empty()) uasserted(ErrorCode::BadValue, "mechanisms field must not be empty");
    return out;
}

/// {"SCRAM-SHA-1": {...}, "SCRAM-SHA-256": {...}} for `pwd`.
bson::Doc buildCredentials(const OperationContext& op, std::string_view user, std::string_view pwd,
                           const std::vector<ScramMechanism>& mechs) {
    if (pwd.empty()) uasserted(ErrorCode::BadValue, "User passwords must not be empty");
    bool digest = cmdarg::getBool(op.cmd, "digestPassword", true);
    bson::Doc out;
    for (auto m : kAllMechanisms) {
        bool wanted = false;
        for (auto w : mechs) wanted = wanted || w == m;
        if (!wanted) continue;
        std::string password;
        if (m == ScramMechanism::Sha256 && !digest)
            uasserted(ErrorCode::BadValue, "Use of SCRAM-SHA-256 requires undigested passwords");
        if (m == ScramMechanism::Sha1 && !digest)
            password = std::string(pwd);  // already hex(MD5(user:mongo:pwd))
        else
            password = uassertStatusOK(halo::auth::scramPassword(m, user, pwd));
        auto creds = halo::auth::makeCredentials(m, password);
        std::string name(halo::auth::mechanismName(m));
        bson_t c;
        BSON_APPEND_DOCUMENT_BEGIN(out.mut(), name.c_str(), &c);
        BSON_APPEND_INT32(&c, "iterationCount", creds.iterationCount);
        BSON_APPEND_UTF8(&c, "salt", halo::auth::base64Encode(creds.salt).c_str());
        BSON_APPEND_UTF8(&c, "storedKey", halo::auth::base64Encode(creds.storedKey).c_str());
        BSON_APPEND_UTF8(&c, "serverKey", halo::auth::base64Encode(creds.serverKey).c_str());
        bson_append_document_end(out.mut(), &c);
    }
    return out;
}

void appendRoles(bson_t* doc, const std::vector<authz::RoleName>& roles) {
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "roles", &arr);
    for (size_t i = 0; i < roles.size(); ++i) {
        std::string k = std::to_string(i);
        bson_t r;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k.c_str(), &r);
        BSON_APPEND_UTF8(&r, "role", roles[i].role.c_str());
        BSON_APPEND_UTF8(&r, "db", roles[i].db.c_str());
        bson_append_document_end(&arr, &r);
    }
    bson_append_array_end(doc, &arr);
}

std::string passwordArg(const OperationContext& op, bool required) {
    bson_iter_t it;
    if (!bson::find(op.cmd, "pwd", &it)) {
        if (required)
            uasserted(ErrorCode::BadValue,
                      "Must provide a 'pwd' field for all user documents, except those with "
                      "'$external' as the user's source db");
        return {};
    }
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.pwd' must be a string", op.name));
    uint32_t len;
    const char* s = bson_iter_utf8(&it, &len);
    if (len == 0) uasserted(ErrorCode::BadValue, "User passwords must not be empty");
    return std::string(s, len);
}

/// Throws the error of an internal write's reply (ok:0 or the first writeError).
void checkWriteReply(const bson_t* reply, const std::string& user) {
    bson_iter_t it;
    auto fail = [&](const bson_t* d) {
        int64_t code = 8;
        bson_iter_t c;
        if (bson_iter_init_find(&c, d, "code")) code = bson_iter_as_int64(&c);
        if (code == static_cast<int>(ErrorCode::DuplicateKey))
            uasserted(ErrorCode::Location51003, fmt::format("User \"{}\" already exists", user));
        uasserted(static_cast<ErrorCode>(code), stringField(d, "errmsg"));
    };
    if (bson_iter_init_find(&it, reply, "ok") && !bson_iter_as_bool(&it)) fail(reply);
    bson_t errs;
    if (bson::subDocument(reply, "writeErrors", &errs) && bson_iter_init(&it, &errs) &&
        bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson::View v(data, len);
        fail(v.get());
    }
}

int64_t nFrom(const bson_t* reply) {
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, "n") ? bson_iter_as_int64(&it) : 0;
}

/// authenticationRestrictions are accepted only when empty: silently ignoring
/// them would leave a user less restricted than its creator asked.
void refuseRestrictions(const OperationContext& op) {
    bson_iter_t it;
    if (!bson::find(op.cmd, "authenticationRestrictions", &it)) return;
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_t arr;
        bson::subDocument(op.cmd, "authenticationRestrictions", &arr);
        if (bson_count_keys(&arr) == 0) return;
    }
    uasserted(ErrorCode::BadValue,
              "authenticationRestrictions (clientSource, serverAddress) are not supported by this "
              "store");
}

/// Replaces the document of user `user` of op.db (UserNotFound when it is gone).
void replaceUserDoc(OperationContext& op, const std::string& user, const bson_t* doc) {
    bson::Doc update;
    BSON_APPEND_UTF8(update.mut(), "update", kUsers);
    bson_t ups, u0, q;
    BSON_APPEND_ARRAY_BEGIN(update.mut(), "updates", &ups);
    BSON_APPEND_DOCUMENT_BEGIN(&ups, "0", &u0);
    BSON_APPEND_DOCUMENT_BEGIN(&u0, "q", &q);
    BSON_APPEND_UTF8(&q, "user", user.c_str());
    BSON_APPEND_UTF8(&q, "db", op.db.c_str());
    bson_append_document_end(&u0, &q);
    BSON_APPEND_DOCUMENT(&u0, "u", doc);
    bson_append_document_end(&ups, &u0);
    bson_append_array_end(update.mut(), &ups);
    bson::Doc reply = op.store.runInternal("admin", update.get());
    op.store.bumpUserGeneration();
    checkWriteReply(reply.get(), userAtDb(user, op.db));
    if (nFrom(reply.get()) == 0)
        uasserted(ErrorCode::UserNotFound, fmt::format("User {} not found", userAtDb(user, op.db)));
}

void runCreateUser(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {"pwd", "roles", "mechanisms", "customData", "digestPassword",
                             "authenticationRestrictions"});
    std::string user = userNameArg(op);
    checkUserDb(op.db);
    refuseRestrictions(op);
    std::string pwd = passwordArg(op, true);
    auto roles = parseRoles(op);
    auto mechs = parseMechanisms(op).value_or(
        std::vector<ScramMechanism>(std::begin(kAllMechanisms), std::end(kAllMechanisms)));
    bson_t customData;
    bool hasCustom = cmdarg::getDoc(op.cmd, "customData", &customData, op.name);
    bson::Doc creds = buildCredentials(op, user, pwd, mechs);

    bson::Doc doc;
    std::string id = fmt::format("{}.{}", op.db, user);
    BSON_APPEND_UTF8(doc.mut(), "_id", id.c_str());
    auto uuid = halo::auth::randomBytes(16);
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    bson_append_binary(doc.mut(), "userId", 6, BSON_SUBTYPE_UUID, uuid.data(), 16);
    BSON_APPEND_UTF8(doc.mut(), "user", user.c_str());
    BSON_APPEND_UTF8(doc.mut(), "db", op.db.c_str());
    BSON_APPEND_DOCUMENT(doc.mut(), "credentials", creds.get());
    appendRoles(doc.mut(), roles);
    if (hasCustom) BSON_APPEND_DOCUMENT(doc.mut(), "customData", &customData);

    bson::Doc insert;
    BSON_APPEND_UTF8(insert.mut(), "insert", kUsers);
    bson_t docs;
    BSON_APPEND_ARRAY_BEGIN(insert.mut(), "documents", &docs);
    BSON_APPEND_DOCUMENT(&docs, "0", doc.get());
    bson_append_array_end(insert.mut(), &docs);
    bson::Doc reply = op.store.runInternal("admin", insert.get());
    op.store.bumpUserGeneration();
    checkWriteReply(reply.get(), userAtDb(user, op.db));
    log::info("access", 20258, "Created user",
              fmt::format(R"({{"user":{},"db":{}}})", log::quote(user), log::quote(op.db)));
}

void runUpdateUser(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {"pwd", "roles", "mechanisms", "customData", "digestPassword",
                             "authenticationRestrictions"});
    std::string user = userNameArg(op);
    refuseRestrictions(op);
    auto existing = findUserDoc(op.store, op.db, user);
    if (!existing)
        uasserted(ErrorCode::UserNotFound, fmt::format("User {} not found", userAtDb(user, op.db)));
    bool hasPwd = bson_has_field(op.cmd, "pwd");
    bool hasRoles = bson_has_field(op.cmd, "roles");
    bool hasMechs = bson_has_field(op.cmd, "mechanisms");
    bool hasCustom = bson_has_field(op.cmd, "customData");
    if (!hasPwd && !hasRoles && !hasMechs && !hasCustom)
        uasserted(ErrorCode::BadValue, "Must specify at least one field to update in updateUser");
    std::vector<ScramMechanism> current = mechanismsOf(existing->get());
    auto mechs = parseMechanisms(op);

    bson::Doc doc;
    bson_iter_t it;
    for (const char* k : {"_id", "userId", "user", "db"})
        if (bson_iter_init_find(&it, existing->get(), k)) bson::appendIter(doc.mut(), k, it);
    if (hasPwd) {
        bson::Doc creds =
            buildCredentials(op, user, passwordArg(op, true), mechs.value_or(current));
        BSON_APPEND_DOCUMENT(doc.mut(), "credentials", creds.get());
    } else {
        bson_t oldCreds;
        bson::subDocument(existing->get(), "credentials", &oldCreds);
        bson::Doc creds;
        for (auto m : current) {
            bool keep = !mechs;
            if (mechs)
                for (auto w : *mechs) keep = keep || w == m;
            std::string name(halo::auth::mechanismName(m));
            if (keep && bson_iter_init_find(&it, &oldCreds, name.c_str()))
                bson::appendIter(creds.mut(), name, it);
        }
        if (mechs)
            for (auto w : *mechs) {
                bool had = false;
                for (auto m : current) had = had || m == w;
                if (!had)
                    uasserted(ErrorCode::BadValue,
                              "mechanisms field must be a subset of previously set mechanisms");
            }
        BSON_APPEND_DOCUMENT(doc.mut(), "credentials", creds.get());
    }
    if (hasRoles)
        appendRoles(doc.mut(), parseRoles(op));
    else if (bson_iter_init_find(&it, existing->get(), "roles"))
        bson::appendIter(doc.mut(), "roles", it);
    bson_t customData;
    if (hasCustom) {
        if (cmdarg::getDoc(op.cmd, "customData", &customData, op.name))
            BSON_APPEND_DOCUMENT(doc.mut(), "customData", &customData);
    } else if (bson_iter_init_find(&it, existing->get(), "customData")) {
        bson::appendIter(doc.mut(), "customData", it);
    }

    replaceUserDoc(op, user, doc.get());
}

/// grantRolesToUser / revokeRolesFromUser: the user's roles plus or minus `roles`.
void changeRoles(OperationContext& op, bool grant) {
    cmdarg::checkFields(op, {"roles"});
    std::string user = userNameArg(op);
    auto changes = parseRoles(op);
    auto existing = findUserDoc(op.store, op.db, user);
    if (!existing)
        uasserted(ErrorCode::UserNotFound, fmt::format("User {} not found", userAtDb(user, op.db)));
    auto roles = rolesOf(existing->get());
    for (const auto& c : changes) {
        auto at = std::find(roles.begin(), roles.end(), c);
        if (grant && at == roles.end()) roles.push_back(c);
        if (!grant && at != roles.end()) roles.erase(at);
    }
    bson::Doc doc;
    bson_iter_t it;
    bson_iter_init(&it, existing->get());
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "roles") continue;
        bson::appendIter(doc.mut(), k, it);
    }
    appendRoles(doc.mut(), roles);
    replaceUserDoc(op, user, doc.get());
}

/// Deletes the users matching {user?, db}; returns how many.
int64_t deleteUsers(OperationContext& op, const std::string* user) {
    bson::Doc del;
    BSON_APPEND_UTF8(del.mut(), "delete", kUsers);
    bson_t dels, d0, q;
    BSON_APPEND_ARRAY_BEGIN(del.mut(), "deletes", &dels);
    BSON_APPEND_DOCUMENT_BEGIN(&dels, "0", &d0);
    BSON_APPEND_DOCUMENT_BEGIN(&d0, "q", &q);
    if (user) BSON_APPEND_UTF8(&q, "user", user->c_str());
    BSON_APPEND_UTF8(&q, "db", op.db.c_str());
    bson_append_document_end(&d0, &q);
    BSON_APPEND_INT32(&d0, "limit", user ? 1 : 0);
    bson_append_document_end(&dels, &d0);
    bson_append_array_end(del.mut(), &dels);
    bson::Doc reply = op.store.runInternal("admin", del.get());
    op.store.bumpUserGeneration();
    checkWriteReply(reply.get(), user ? userAtDb(*user, op.db) : op.db);
    return nFrom(reply.get());
}

void runDropUser(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {});
    std::string user = userNameArg(op);
    if (deleteUsers(op, &user) == 0)
        uasserted(ErrorCode::UserNotFound,
                  fmt::format("User '{}' not found", userAtDb(user, op.db)));
}

void runDropAllUsers(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {});
    BSON_APPEND_INT64(reply, "n", deleteUsers(op, nullptr));
}

/// One usersInfo selector ("name" or {user, db}) as a filter.
void appendSelector(bson_t* out, const char* key, bson_iter_t* v, const std::string& db) {
    bson_t f;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &f);
    if (BSON_ITER_HOLDS_UTF8(v)) {
        BSON_APPEND_UTF8(&f, "user", bson_iter_utf8(v, nullptr));
        BSON_APPEND_UTF8(&f, "db", db.c_str());
    } else if (BSON_ITER_HOLDS_DOCUMENT(v)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(v, &len, &data);
        bson::View d(data, len);
        std::string u = stringField(d.get(), "user"), udb = stringField(d.get(), "db");
        if (u.empty() || udb.empty())
            uasserted(ErrorCode::BadValue, "User name must contain 'user' and 'db' fields");
        BSON_APPEND_UTF8(&f, "user", u.c_str());
        BSON_APPEND_UTF8(&f, "db", udb.c_str());
    } else {
        uasserted(ErrorCode::BadValue,
                  "usersInfo takes 1, a user name, a {user, db} document, or an array of them");
    }
    bson_append_document_end(out, &f);
}

void runUsersInfo(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {"showCredentials", "showPrivileges", "showAuthenticationRestrictions",
                             "showCustomData", "filter"});
    bool showCredentials = cmdarg::getBool(op.cmd, "showCredentials", false);
    bool showCustomData = cmdarg::getBool(op.cmd, "showCustomData", true);
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    bson::Doc filter;
    bool none = false;
    bool forAllDBs = false;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t f;
        forAllDBs =
            bson_iter_recurse(&it, &f) && bson_iter_find(&f, "forAllDBs") && bson_iter_as_bool(&f);
    }
    if (forAllDBs) {
        // every user of every database
    } else if (BSON_ITER_HOLDS_NUMBER(&it)) {
        BSON_APPEND_UTF8(filter.mut(), "db", op.db.c_str());
    } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_t ors;
        BSON_APPEND_ARRAY_BEGIN(filter.mut(), "$or", &ors);
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        int i = 0;
        while (bson_iter_next(&a)) {
            std::string k = std::to_string(i++);
            appendSelector(&ors, k.c_str(), &a, op.db);
        }
        bson_append_array_end(filter.mut(), &ors);
        none = i == 0;
    } else {
        bson::Doc one;
        appendSelector(one.mut(), "s", &it, op.db);
        bson_t sel;
        bson::subDocument(one.get(), "s", &sel);
        filter = bson::Doc::copyOf(&sel);
    }
    bson_t extra;
    if (cmdarg::getDoc(op.cmd, "filter", &extra, "usersInfo")) {
        bson::Doc both;
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(both.mut(), "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", filter.get());
        BSON_APPEND_DOCUMENT(&arr, "1", &extra);
        bson_append_array_end(both.mut(), &arr);
        filter = std::move(both);
    }
    bson_t users;
    BSON_APPEND_ARRAY_BEGIN(reply, "users", &users);
    int i = 0;
    if (!none) {
        for (const auto& u : findUsers(op.store, filter.get())) {
            std::string k = std::to_string(i++);
            bson_t d;
            BSON_APPEND_DOCUMENT_BEGIN(&users, k.c_str(), &d);
            bson_iter_t f;
            for (const char* key : {"_id", "userId", "user", "db"})
                if (bson_iter_init_find(&f, u.get(), key)) bson::appendIter(&d, key, f);
            if (showCredentials && bson_iter_init_find(&f, u.get(), "credentials"))
                bson::appendIter(&d, "credentials", f);
            if (bson_iter_init_find(&f, u.get(), "roles")) bson::appendIter(&d, "roles", f);
            if (showCustomData && bson_iter_init_find(&f, u.get(), "customData"))
                bson::appendIter(&d, "customData", f);
            appendMechanismNames(&d, "mechanisms", mechanismsOf(u.get()));
            bson_append_document_end(&users, &d);
        }
    }
    bson_append_array_end(reply, &users);
}

HALO_REGISTER_COMMAND(CommandSpec{{"createUser"}, runCreateUser});
HALO_REGISTER_COMMAND(CommandSpec{{"updateUser"}, runUpdateUser});
HALO_REGISTER_COMMAND(CommandSpec{{"grantRolesToUser"},
                                  [](OperationContext& op, bson_t*) { changeRoles(op, true); }});
HALO_REGISTER_COMMAND(CommandSpec{{"revokeRolesFromUser"},
                                  [](OperationContext& op, bson_t*) { changeRoles(op, false); }});
HALO_REGISTER_COMMAND(CommandSpec{{"dropUser"}, runDropUser});
HALO_REGISTER_COMMAND(CommandSpec{{"dropAllUsersFromDatabase"}, runDropAllUsers});
HALO_REGISTER_COMMAND(CommandSpec{{"usersInfo"}, runUsersInfo});

}  // namespace

std::optional<bson::Doc> findUserDoc(Store& store, std::string_view db, std::string_view user) {
    bson::Doc filter;
    bson_append_utf8(filter.mut(), "user", 4, user.data(), static_cast<int>(user.size()));
    bson_append_utf8(filter.mut(), "db", 2, db.data(), static_cast<int>(db.size()));
    auto found = findUsers(store, filter.get());
    if (found.empty()) return std::nullopt;
    return std::move(found.front());
}

std::vector<authz::RoleName> rolesOf(const bson_t* userDoc) {
    std::vector<authz::RoleName> out;
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, userDoc, "roles") || !BSON_ITER_HOLDS_ARRAY(&it)) return out;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&a)) continue;
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&a, &len, &data);
        bson::View v(data, len);
        out.push_back({stringField(v.get(), "role"), stringField(v.get(), "db")});
    }
    return out;
}

bool anyUserExists(Store& store) {
    auto c = store.catalog().lookup("admin.system.users");
    return c && c->numRecords.load() > 0;
}

void appendHelloAuth(OperationContext& op, bson_t* reply) {
    bson_iter_t it;
    if (bson::find(op.cmd, "saslSupportedMechs", &it) && BSON_ITER_HOLDS_UTF8(&it)) {
        std::string_view spec = bson_iter_utf8(&it, nullptr);
        auto dot = spec.find('.');
        if (dot != std::string_view::npos) {
            try {
                if (auto doc = findUserDoc(op.store, spec.substr(0, dot), spec.substr(dot + 1)))
                    appendMechanismNames(reply, "saslSupportedMechs", mechanismsOf(doc->get()));
            } catch (const DBException&) {
                // hello never fails over this: the client negotiates without it.
            }
        }
    }
    bson_t spec;
    if (!bson::subDocument(op.cmd, "speculativeAuthenticate", &spec)) return;
    try {
        std::string mechanism = stringField(&spec, "mechanism");
        std::string db = stringField(&spec, "db");
        if (!bson_has_field(&spec, "saslStart") || db.empty()) return;
        bson_t options;
        bool skip = false;
        if (bson::subDocument(&spec, "options", &options))
            skip = cmdarg::getBool(&options, "skipEmptyExchange", false);
        auto first = startConversation(op.store, op.client, db, mechanism,
                                       payloadOf(&spec, "payload"), skip);
        if (!first.isOK()) return;  // logged; the client authenticates with saslStart
        bson_t sa;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "speculativeAuthenticate", &sa);
        BSON_APPEND_INT32(&sa, "conversationId", op.client.sasl->id);
        BSON_APPEND_BOOL(&sa, "done", false);
        appendPayload(&sa, first.getValue());
        bson_append_document_end(reply, &sa);
    } catch (const DBException&) {
        op.client.sasl.reset();
    }
}

bool mayListDatabase(const OperationContext& op, std::string_view db) {
    if (!op.store.authEnabled() || op.client.internal || !op.client.user) return true;
    const auto& roles = op.client.user->roles;
    using Scope = authz::Need::Scope;
    if (authz::satisfies(roles, {Scope::Cluster, "", authz::kClusterMonitor}) ||
        authz::satisfies(roles,
                         {Scope::AnyDatabase, "",
                          authz::kRead | authz::kWrite | authz::kDbAdmin | authz::kUserAdmin}))
        return true;
    return authz::anyAccessTo(roles, db);
}

}  // namespace halo::store
