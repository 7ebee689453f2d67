#include "store/rules/kill_sessions.h"

#include <fmt/format.h>

#include <string_view>

#include "common/error_codes.h"

namespace halo::store {

namespace {

/// {id: UUID}'s bytes, with mongod's errors for its absence and type.
StatusWith<std::string> sessionId(const bson_t* lsid) {
    bson_iter_t id;
    if (!bson::find(lsid, "id", &id))
        return Status(ErrorCode::Location40414,
                      "BSON field 'KillSessionsCmdFromClient.killSessions.id' is missing but a "
                      "required field");
    if (!BSON_ITER_HOLDS_BINARY(&id))
        return Status(ErrorCode::TypeMismatch,
                      "BSON field 'KillSessionsCmdFromClient.killSessions.id' is the wrong type, "
                      "expected type 'binData'");
    return bson::binaryBytes(id);
}

std::string userOf(const bson_t* u) {
    return bson::stringField(u, "user") + "@" + bson::stringField(u, "db");
}

/// One {lsid} / {users} / {} pattern of killAllSessionsByPattern.
Status addPattern(const bson_t* pattern, KillSessionsArgs* out) {
    bson_iter_t it;
    bool any = false;
    bson_iter_init(&it, pattern);
    while (bson_iter_next(&it)) {
        any = true;
        std::string_view k = bson_iter_key(&it);
        bson_t sub;
        if (k == "lsid") {
            if (!bson::subDocumentAt(it, &sub))
                return Status(ErrorCode::TypeMismatch,
                              "BSON field 'KillAllSessionsByPattern.lsid' is the wrong type, "
                              "expected type 'object'");
            auto id = sessionId(&sub);
            if (!id.isOK()) return id.getStatus();
            out->ids.insert(std::move(id.getValue()));
        } else if (k == "users") {
            bson_iter_t u;
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &u))
                return Status(ErrorCode::TypeMismatch,
                              "BSON field 'KillAllSessionsByPattern.users' is the wrong type, "
                              "expected type 'array'");
            while (bson_iter_next(&u))
                if (bson::subDocumentAt(u, &sub)) out->users.insert(userOf(&sub));
        } else if (k == "uid" || k == "roles") {
            return Status(ErrorCode::CommandNotSupported,
                          fmt::format("killAllSessionsByPattern by '{}' is not supported: name "
                                      "the sessions by lsid or their users",
                                      k));
        } else {
            return Status(
                ErrorCode::Location40415,
                fmt::format("BSON field 'KillAllSessionsByPattern.{}' is an unknown field.", k));
        }
    }
    if (!any) out->every = true;  // {} matches every session
    return Status::OK();
}

}  // namespace

StatusWith<KillSessionsArgs> parseKillSessions(const bson_t* cmd) {
    bson_iter_t it, a;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return Status(ErrorCode::FailedToParse, "empty command");
    const std::string_view name = bson_iter_key(&it);
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return Status(ErrorCode::TypeMismatch,
                      fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type "
                                  "'array'",
                                  name, name, bson::typeName(bson_iter_type(&it))));
    KillSessionsArgs out;
    bool empty = true;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        empty = false;
        bson_t d;
        if (!bson::subDocumentAt(a, &d))
            return Status(ErrorCode::TypeMismatch,
                          fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type "
                                      "'object'",
                                      name, name, bson::typeName(bson_iter_type(&a))));
        if (name == "killAllSessions") {
            out.users.insert(userOf(&d));
        } else if (name == "killAllSessionsByPattern") {
            if (Status st = addPattern(&d, &out); !st.isOK()) return st;
        } else {
            auto id = sessionId(&d);
            if (!id.isOK()) return id.getStatus();
            out.ids.insert(std::move(id.getValue()));
        }
    }
    if (empty) (name == "killSessions" ? out.mine : out.every) = true;
    return out;
}

}  // namespace halo::store
