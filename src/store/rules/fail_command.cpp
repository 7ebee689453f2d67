#include "store/rules/fail_command.h"

#include <fmt/format.h>

#include <limits>

#include "common/log.h"

namespace halo::store {

namespace {

/// mongod's BSONObj::getBoolField: true only for a boolean true.
bool boolField(const bson_t* data, std::string_view field) {
    bson_iter_t it;
    return bson::find(data, field, &it) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

/// mongod's bsonExtractBooleanField: a boolean or a number, by truth.
bool flagField(const bson_t* data, std::string_view field) {
    bson_iter_t it;
    if (!bson::find(data, field, &it)) return false;
    const bson_value_t* v = bson_iter_value(&it);
    return (v->value_type == BSON_TYPE_BOOL || bson::isNumber(v->value_type)) && bson::isTruthy(*v);
}

/// mongod's bsonExtractIntegerField: a number holding a whole value.
std::optional<int64_t> integerField(const bson_t* data, std::string_view field) {
    bson_iter_t it;
    if (!bson::find(data, field, &it)) return std::nullopt;
    const bson_value_t* v = bson_iter_value(&it);
    int64_t n = 0;
    if (!bson::isNumber(v->value_type) || !bson::toInt64Exact(*v, &n)) return std::nullopt;
    return n;
}

/// mongod's BSONObj::getStringField: "" unless a string.
std::string_view stringField(const bson_t* data, std::string_view field) {
    bson_iter_t it;
    if (!bson::find(data, field, &it) || !BSON_ITER_HOLDS_UTF8(&it)) return {};
    uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return {s, len};
}

/// client.application.name of the connection's handshake (or of the handshake
/// hello being looked at, which has not recorded it yet).
std::string applicationName(const FailPointTarget& t) {
    const bson_t* meta = nullptr;
    bson_t fromCmd;
    if (t.client.metadata) {
        meta = t.client.metadata;
    } else if (t.cmd && (t.name == "hello" || t.name == "isMaster" || t.name == "ismaster") &&
               bson::subDocument(t.cmd, "client", &fromCmd)) {
        meta = &fromCmd;
    }
    bson_t app;
    if (!meta || !bson::subDocument(meta, "application", &app)) return {};
    return std::string(stringField(&app, "name"));
}

bool namesCommand(const FailPointTarget& t, std::string_view listed) {
    if (t.names.empty()) return listed == t.name;
    for (std::string_view n : t.names)
        if (n == listed) return true;
    return false;
}

std::optional<bson::Doc> labelsOf(const bson_t* data) {
    bson_iter_t it;
    if (!bson::find(data, "errorLabels", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) return std::nullopt;
    uint32_t len = 0;
    const uint8_t* bytes = nullptr;
    bson_iter_array(&it, &len, &bytes);
    return bson::Doc::copyOf(bytes, len);
}

}  // namespace

bool failPointAppliesTo(const bson_t* data, const FailPointTarget& t,
                        std::optional<std::string_view> onlyCommand) {
    if (t.name == "configureFailPoint") return false;  // even when listed
    const bool local = t.client.local;                 // the server's own commands
    if (local && !boolField(data, "failLocalClients")) return false;
    bson_iter_t it;
    if (bson::find(data, "threadName", &it)) {
        std::string thread = local ? std::string() : fmt::format("conn{}", t.client.connectionId);
        if (thread != stringField(data, "threadName")) return false;
    }
    if (bson::find(data, "appName", &it) && applicationName(t) != stringField(data, "appName"))
        return false;
    if (bson::find(data, "namespace", &it) && t.ns != stringField(data, "namespace")) return false;
    const bool internal = local || t.client.internalClient;
    if (internal && !boolField(data, "failInternalCommands")) return false;
    if (onlyCommand) return namesCommand(t, *onlyCommand);
    if (bson::find(data, "failAllCommands", &it)) return true;
    bson_iter_t list;
    if (!bson::find(data, "failCommands", &it) ||
        !(BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)) ||
        !bson_iter_recurse(&it, &list))
        return false;
    while (bson_iter_next(&list)) {
        if (!BSON_ITER_HOLDS_UTF8(&list)) continue;
        uint32_t len = 0;
        const char* s = bson_iter_utf8(&list, &len);
        if (namesCommand(t, std::string_view(s, len))) return true;
    }
    return false;
}

FailCommandEffect failCommandEffectOf(std::shared_ptr<const bson::Doc> data) {
    FailCommandEffect e;
    const bson_t* d = data->get();
    e.errorLabels = labelsOf(d);
    if (flagField(d, "blockConnection")) {
        auto ms = integerField(d, "blockTimeMS");
        if (!ms) {
            e.error = Status(ErrorCode::InvalidOptions,
                             "must specify 'blockTimeMS' when 'blockConnection' is true");
        } else if (*ms < 0) {
            e.error = Status(ErrorCode::InvalidOptions, "'blockTimeMS' must be non-negative");
        } else {
            e.block = std::chrono::milliseconds(*ms);
        }
    }
    if (!e.error) {
        e.closeConnection = flagField(d, "closeConnection");
        if (auto code = integerField(d, "errorCode"); code && !e.closeConnection)
            e.error = Status(static_cast<ErrorCode>(static_cast<int>(*code)),
                             "Failing command via 'failCommand' failpoint");
    }
    e.data = std::move(data);
    return e;
}

FailCommandEffect evaluateFailCommand(FailPoint& failCommand, const FailPointTarget& target) {
    auto data = failCommand.fire([&](const bson_t* d) {
        bool acts = flagField(d, "closeConnection") || flagField(d, "blockConnection") ||
                    integerField(d, "errorCode").has_value();
        return acts && failPointAppliesTo(d, target);
    });
    if (!data) return {};
    log::info(
        "command", 4898500, "Activating 'failCommand' failpoint",
        fmt::format(R"({{"data":{},"command":{}}})", data->toJson(), log::quote(target.name)));
    return failCommandEffectOf(std::move(data));
}

std::optional<FailCommandWriteConcernError> evaluateFailCommandWriteConcern(
    FailPoint& failCommand, const FailPointTarget& target) {
    auto data = failCommand.fire([&](const bson_t* d) {
        return bson_has_field(d, "writeConcernError") && failPointAppliesTo(d, target);
    });
    if (!data) return std::nullopt;
    FailCommandWriteConcernError out;
    bson_iter_t it;
    bson::find(data->get(), "writeConcernError", &it);
    bson::appendIter(out.field.mut(), "writeConcernError", it);
    out.errorLabels = labelsOf(data->get());
    return out;
}

}  // namespace halo::store
