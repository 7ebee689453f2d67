#include "store/rules/kill_sessions.h"

#include <fmt/format.h>

#include <string_view>

#include "common/error_codes.h"

namespace halo::store {

StatusWith<KillSessionsArgs> parseKillSessions(const bson_t* cmd) {
    bson_iter_t it, a;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return Status(ErrorCode::FailedToParse, "empty command");
    const std::string_view name = bson_iter_key(&it);
    const bool all = name == "killAllSessions";
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return Status(ErrorCode::TypeMismatch,
                      fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type "
                                  "'array'",
                                  name, name, bson::typeName(bson_iter_type(&it))));
    KillSessionsArgs out;
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        out.empty = false;
        bson_t d;
        if (!bson::subDocumentAt(a, &d))
            return Status(ErrorCode::TypeMismatch,
                          fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type "
                                      "'object'",
                                      name, name, bson::typeName(bson_iter_type(&a))));
        if (all) {
            out.users.insert(bson::stringField(&d, "user") + "@" + bson::stringField(&d, "db"));
            continue;
        }
        bson_iter_t id;
        if (!bson::find(&d, "id", &id))
            return Status(ErrorCode::Location40414,
                          "BSON field 'KillSessionsCmdFromClient.killSessions.id' is missing but "
                          "a required field");
        if (!BSON_ITER_HOLDS_BINARY(&id))
            return Status(ErrorCode::TypeMismatch,
                          "BSON field 'KillSessionsCmdFromClient.killSessions.id' is the wrong "
                          "type, expected type 'binData'");
        out.ids.insert(bson::binaryBytes(id));
    }
    return out;
}

}  // namespace halo::store
