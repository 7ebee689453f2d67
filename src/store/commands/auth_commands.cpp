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
#include "store/commands/authz_documents.h"
#include "store/commands/command.h"
#include "store/server/store.h"
#include "store/storage/catalog.h"

namespace halo::store {

namespace {

using halo::auth::ScramMechanism;

constexpr const char* kUsers = kUsersCollection;
constexpr ScramMechanism kAllMechanisms[] = {ScramMechanism::Sha1, ScramMechanism::Sha256};

std::string userAtDb(std::string_view user, std::string_view db) {
    return fmt::format("{}@{}", user, db);
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
    auto salt = halo::auth::base64Decode(bson::stringField(&c, "salt"));
    auto stored = halo::auth::base64Decode(bson::stringField(&c, "storedKey"));
    auto server = halo::auth::base64Decode(bson::stringField(&c, "serverKey"));
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
    std::string out;
    if (!bson::bytesField(cmd, field, &out))
        uasserted(ErrorCode::TypeMismatch, "SASL payload must be BinData or a string");
    return out;
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
    uint64_t gen = store.authzGeneration();
    auto doc = findUserDoc(store, conv.db, conv.user);
    std::string mech(halo::auth::mechanismName(conv.scram->mechanism()));
    if (!doc) {
        Status s = authenticationFailed(client, mech, conv.user, conv.db,
                                        "the user was dropped during authentication");
        client.sasl.reset();
        throw DBException(s);
    }
    auto roles = rolesOf(doc->get());
    auto privileges = privilegesOf(store, roles);
    client.user =
        AuthenticatedUser{conv.user, conv.db, std::move(roles), std::move(privileges), gen};
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
    bson::appendBinary(reply, "payload", first.getValue());
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
        bson::appendBinary(reply, "payload", "");
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
    bson::appendBinary(reply, "payload", final.getValue());
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
        bson_t info, users;
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
        authz::appendRoleNames(
            &info, "authenticatedUserRoles",
            op.client.user ? op.client.user->roles : std::vector<authz::RoleName>{});
        if (op.client.user && cmdarg::getBool(op.cmd, "showPrivileges", false))
            authz::appendPrivileges(&info, "authenticatedUserPrivileges",
                                    op.client.user->privileges->privileges());
        bson_append_document_end(r, &info);
    }});

// --- User management ------------------------------------------------------------

std::string userNameArg(const OperationContext& op) {
    std::string name = cmdarg::stringArgument(op);
    if (name.empty())
        uasserted(ErrorCode::BadValue, "User document needs 'user' field to be non-empty");
    return name;
}

void checkUserDb(std::string_view db) {
    if (db == "local") uasserted(ErrorCode::BadValue, "Cannot create users in the local database");
}

/// Users on $external (x.509 subjects, as mongod keeps them) have no password:
/// their credentials are {external: true}. The store itself logs in only with
/// SCRAM; a proxy in front of it authenticates them by certificate.
constexpr std::string_view kExternalDb = "$external";

void refuseExternalSecrets(const OperationContext& op) {
    if (bson_has_field(op.cmd, "pwd"))
        uasserted(ErrorCode::BadValue,
                  "Cannot set the password for users defined on the '$external' database");
    if (bson_has_field(op.cmd, "mechanisms"))
        uasserted(ErrorCode::BadValue,
                  "mechanisms field must not be set for users on the '$external' database");
}

bson::Doc externalCredentials() {
    bson::Doc creds;
    BSON_APPEND_BOOL(creds.mut(), "external", true);
    return creds;
}

bool isExternalUser(const bson_t* userDoc) {
    bson_t creds;
    bson_iter_t it;
    return bson::subDocument(userDoc, "credentials", &creds) &&
           bson_iter_init_find(&it, &creds, "external") && bson_iter_as_bool(&it);
}

/// The command's `roles`, every one of which must exist (RoleNotFound 31).
std::vector<authz::RoleName> parseRoles(const OperationContext& op) {
    auto roles = parseRoleNames(op.cmd, op.name, op.db);
    if (auto missing = missingRoles(op.store, roles); !missing.empty()) throwRoleNotFound(missing);
    return roles;
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
    op.store.bumpAuthzGeneration();
    checkWriteReply(reply.get());
    if (writeCount(reply.get()) == 0)
        uasserted(ErrorCode::UserNotFound, fmt::format("User {} not found", userAtDb(user, op.db)));
}

void runCreateUser(OperationContext& op, bson_t*) {
    cmdarg::checkFields(op, {"pwd", "roles", "mechanisms", "customData", "digestPassword",
                             "authenticationRestrictions"});
    std::string user = userNameArg(op);
    checkUserDb(op.db);
    refuseRestrictions(op);
    const bool external = op.db == kExternalDb;
    if (external) refuseExternalSecrets(op);
    std::string pwd = external ? std::string() : passwordArg(op, true);
    auto roles = parseRoles(op);
    bson_t customData;
    bool hasCustom = cmdarg::getDoc(op.cmd, "customData", &customData, op.name);
    bson::Doc creds;
    if (external) {
        creds = externalCredentials();
    } else {
        auto mechs = parseMechanisms(op).value_or(
            std::vector<ScramMechanism>(std::begin(kAllMechanisms), std::end(kAllMechanisms)));
        creds = buildCredentials(op, user, pwd, mechs);
    }

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
    if (hasCustom) BSON_APPEND_DOCUMENT(doc.mut(), "customData", &customData);
    authz::appendRoleNames(doc.mut(), "roles", roles);

    insertAuthzDocument(op.store, kUsers, doc.get(),
                        Status(ErrorCode::Location51003,
                               fmt::format("User \"{}\" already exists", userAtDb(user, op.db))));
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
    if (op.db == kExternalDb) refuseExternalSecrets(op);
    std::vector<ScramMechanism> current = mechanismsOf(existing->get());
    auto mechs = parseMechanisms(op);

    bson::Doc doc;
    bson_iter_t it;
    for (const char* k : {"_id", "userId", "user", "db"})
        if (bson_iter_init_find(&it, existing->get(), k)) bson::appendIter(doc.mut(), k, it);
    if (isExternalUser(existing->get())) {
        BSON_APPEND_DOCUMENT(doc.mut(), "credentials", externalCredentials().get());
    } else if (hasPwd) {
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
    bson_t customData;
    if (hasCustom) {
        if (cmdarg::getDoc(op.cmd, "customData", &customData, op.name))
            BSON_APPEND_DOCUMENT(doc.mut(), "customData", &customData);
    } else if (bson_iter_init_find(&it, existing->get(), "customData")) {
        bson::appendIter(doc.mut(), "customData", it);
    }
    if (hasRoles)
        authz::appendRoleNames(doc.mut(), "roles", parseRoles(op));
    else if (bson_iter_init_find(&it, existing->get(), "roles"))
        bson::appendIter(doc.mut(), "roles", it);

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
    authz::appendRoleNames(doc.mut(), "roles", roles);
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
    op.store.bumpAuthzGeneration();
    checkWriteReply(reply.get());
    return writeCount(reply.get());
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

/// One usersInfo selector ("name" or {user, db}): {user, db}.
std::pair<std::string, std::string> selectedUser(bson_iter_t* v, const std::string& db) {
    if (BSON_ITER_HOLDS_UTF8(v)) return {bson_iter_utf8(v, nullptr), db};
    if (BSON_ITER_HOLDS_DOCUMENT(v)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(v, &len, &data);
        bson::View d(data, len);
        std::string u = bson::stringField(d.get(), "user"), udb = bson::stringField(d.get(), "db");
        if (u.empty() || udb.empty())
            uasserted(ErrorCode::BadValue, "User name must contain 'user' and 'db' fields");
        return {u, udb};
    }
    uasserted(ErrorCode::BadValue,
              "usersInfo takes 1, a user name, a {user, db} document, or an array of them");
}

struct UsersInfoOptions {
    bool credentials = false;
    bool customData = true;
    bool privileges = false;
    bool restrictions = false;
};

/// A user as usersInfo shows it: the stored fields with `mechanisms` (the
/// credentials' names) where the credentials are, the credentials and
/// customData only when asked for.
void appendUserFields(bson_t* d, const bson_t* stored, const UsersInfoOptions& show,
                      bool mechanismsLast) {
    auto appendMechanisms = [&] {
        if (!isExternalUser(stored)) {
            appendMechanismNames(d, "mechanisms", mechanismsOf(stored));
            return;
        }
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(d, "mechanisms", &arr);
        BSON_APPEND_UTF8(&arr, "0", "external");
        bson_append_array_end(d, &arr);
    };
    bson_iter_t f;
    bson_iter_init(&f, stored);
    while (bson_iter_next(&f)) {
        std::string_view k = bson_iter_key(&f);
        if (k == "credentials") {
            if (!mechanismsLast) appendMechanisms();
            if (!show.credentials) continue;
        }
        if (k == "customData" && !show.customData) continue;
        if (k == "authenticationRestrictions") continue;
        bson::appendIter(d, k, f);
    }
    if (mechanismsLast) appendMechanisms();
}

/// usersInfo with showPrivileges (or showAuthenticationRestrictions): each
/// named user, in the order asked, with the roles and privileges it resolves to.
void appendResolvedUsers(OperationContext& op, bson_t* users, bson_iter_t* arg,
                         const UsersInfoOptions& show) {
    std::vector<std::pair<std::string, std::string>> names;
    if (BSON_ITER_HOLDS_ARRAY(arg)) {
        bson_iter_t a;
        bson_iter_recurse(arg, &a);
        while (bson_iter_next(&a)) names.push_back(selectedUser(&a, op.db));
    } else {
        names.push_back(selectedUser(arg, op.db));
    }
    int i = 0;
    for (const auto& [user, db] : names) {
        auto doc = findUserDoc(op.store, db, user);
        if (!doc) continue;
        std::string k = std::to_string(i++);
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(users, k.c_str(), &d);
        appendUserFields(&d, doc->get(), show, false);
        if (show.restrictions) {
            bson_t empty;
            BSON_APPEND_ARRAY_BEGIN(&d, "authenticationRestrictions", &empty);
            bson_append_array_end(&d, &empty);
        }
        auto resolved = resolveRoles(op.store, rolesOf(doc->get()));
        authz::appendRoleNames(&d, "inheritedRoles", resolved.roles);
        authz::appendPrivileges(&d, "inheritedPrivileges", resolved.privileges);
        bson_t restrictions;
        BSON_APPEND_ARRAY_BEGIN(&d, "inheritedAuthenticationRestrictions", &restrictions);
        bson_append_array_end(&d, &restrictions);
        bson_append_document_end(users, &d);
    }
}

void runUsersInfo(OperationContext& op, bson_t* reply) {
    cmdarg::checkFields(op, {"showCredentials", "showPrivileges", "showAuthenticationRestrictions",
                             "showCustomData", "filter"});
    UsersInfoOptions show;
    show.credentials = cmdarg::getBool(op.cmd, "showCredentials", false);
    show.customData = cmdarg::getBool(op.cmd, "showCustomData", true);
    show.privileges = cmdarg::getBool(op.cmd, "showPrivileges", false);
    show.restrictions = cmdarg::getBool(op.cmd, "showAuthenticationRestrictions", false);
    bson_iter_t it;
    bson_iter_init(&it, op.cmd);
    bson_iter_next(&it);
    bool forAllDBs = false;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t f;
        forAllDBs =
            bson_iter_recurse(&it, &f) && bson_iter_find(&f, "forAllDBs") && bson_iter_as_bool(&f);
    }
    bool exact = !forAllDBs && !BSON_ITER_HOLDS_NUMBER(&it);
    bson_t extra;
    bool hasFilter = cmdarg::getDoc(op.cmd, "filter", &extra, "usersInfo");
    bson_t users;
    if (show.privileges || show.restrictions) {
        if (hasFilter || !exact)
            uasserted(ErrorCode::IllegalOperation,
                      "Privilege or restriction details require exact-match usersInfo queries");
        BSON_APPEND_ARRAY_BEGIN(reply, "users", &users);
        appendResolvedUsers(op, &users, &it, show);
        bson_append_array_end(reply, &users);
        return;
    }
    bson::Doc filter;
    bool none = false;
    if (forAllDBs) {
        // every user of every database
    } else if (BSON_ITER_HOLDS_NUMBER(&it)) {
        BSON_APPEND_UTF8(filter.mut(), "db", op.db.c_str());
    } else {
        std::vector<std::pair<std::string, std::string>> names;
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t a;
            bson_iter_recurse(&it, &a);
            while (bson_iter_next(&a)) names.push_back(selectedUser(&a, op.db));
        } else {
            names.push_back(selectedUser(&it, op.db));
        }
        none = names.empty();
        bson_t ors;
        BSON_APPEND_ARRAY_BEGIN(filter.mut(), "$or", &ors);
        for (size_t i = 0; i < names.size(); ++i) {
            std::string k = std::to_string(i);
            bson_t one;
            BSON_APPEND_DOCUMENT_BEGIN(&ors, k.c_str(), &one);
            BSON_APPEND_UTF8(&one, "user", names[i].first.c_str());
            BSON_APPEND_UTF8(&one, "db", names[i].second.c_str());
            bson_append_document_end(&ors, &one);
        }
        bson_append_array_end(filter.mut(), &ors);
    }
    if (hasFilter) {
        bson::Doc both;
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(both.mut(), "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", filter.get());
        BSON_APPEND_DOCUMENT(&arr, "1", &extra);
        bson_append_array_end(both.mut(), &arr);
        filter = std::move(both);
    }
    BSON_APPEND_ARRAY_BEGIN(reply, "users", &users);
    if (!none) {
        // Ordered as mongod orders user names: by user, then database.
        bson::Doc sort;
        BSON_APPEND_INT32(sort.mut(), "user", 1);
        BSON_APPEND_INT32(sort.mut(), "db", 1);
        int i = 0;
        for (const auto& u : findAuthzDocuments(op.store, kUsers, filter.get(), sort.get())) {
            std::string k = std::to_string(i++);
            bson_t d;
            BSON_APPEND_DOCUMENT_BEGIN(&users, k.c_str(), &d);
            appendUserFields(&d, u.get(), show, true);
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
        std::string mechanism = bson::stringField(&spec, "mechanism");
        std::string db = bson::stringField(&spec, "db");
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
        bson::appendBinary(&sa, "payload", first.getValue());
        bson_append_document_end(reply, &sa);
    } catch (const DBException&) {
        op.client.sasl.reset();
    }
}

bool mayListDatabase(const OperationContext& op, std::string_view db) {
    if (!op.store.authEnabled() || op.client.internal || !op.client.user) return true;
    const authz::PrivilegeSet& held = *op.client.user->privileges;
    return held.isAuthorized(authz::ResourcePattern::cluster(), authz::ActionType::listDatabases) ||
           held.anyOnDatabase(db);
}

}  // namespace halo::store
