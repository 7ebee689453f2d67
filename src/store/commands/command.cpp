#include "store/commands/command.h"

#include <fmt/format.h>

#include <unordered_set>

namespace halo::store {

CommandRegistry& CommandRegistry::instance() {
    static CommandRegistry r;
    return r;
}

void CommandRegistry::add(CommandSpec spec) {
    specs_.push_back(std::move(spec));
}

const CommandSpec* CommandRegistry::find(std::string_view name) const {
    for (const auto& s : specs_)
        for (const auto& n : s.names)
            if (n == name) return &s;
    return nullptr;
}

std::vector<std::string> CommandRegistry::names() const {
    std::vector<std::string> out;
    for (const auto& s : specs_) out.push_back(s.names.front());
    return out;
}

namespace cmdarg {

std::string stringArgument(const OperationContext& op) {
    bson_iter_t it;
    if (!bson_iter_init(&it, op.cmd) || !bson_iter_next(&it))
        uasserted(ErrorCode::BadValue, "empty command");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type 'string'",
                              op.name, op.name, bson::typeName(bson_iter_type(&it))));
    uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return std::string(s, len);
}

std::string collectionName(const OperationContext& op) {
    if (op.args.size() == 0) uasserted(ErrorCode::BadValue, "empty command");
    bson_iter_t it = op.args.at(0);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        uasserted(ErrorCode::InvalidNamespace, fmt::format("collection name has invalid type {}",
                                                           bson::typeName(bson_iter_type(&it))));
    uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    std::string name(s, len);
    if (name.empty())
        uasserted(ErrorCode::InvalidNamespace,
                  fmt::format("Invalid namespace specified '{}.'", op.db));
    if (name.find('\0') != std::string::npos || name.front() == '.' ||
        name.find('$') != std::string::npos)
        uasserted(ErrorCode::InvalidNamespace,
                  fmt::format("Invalid namespace specified '{}.{}'", op.db, name));
    return name;
}

namespace {

bool boolAt(bson_iter_t* it, bool dflt) {
    return it ? bson::isTruthy(*bson_iter_value(it)) : dflt;
}

int64_t intAt(bson_iter_t* it, std::string_view field, int64_t dflt, std::string_view cmdName) {
    if (!it) return dflt;
    const bson_value_t* v = bson_iter_value(it);
    if (v->value_type == BSON_TYPE_NULL) return dflt;
    int64_t out = 0;
    if (!bson::isNumber(v->value_type))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected types '[long, "
                              "int, decimal, double]'",
                              cmdName, field, bson::typeName(v->value_type)));
    if (!bson::toInt64Exact(*v, &out)) {
        out = static_cast<int64_t>(bson::toDouble(*v));
    }
    return out;
}

bool docAt(bson_iter_t* it, std::string_view field, bson_t* out, std::string_view cmdName) {
    if (!it) return false;
    if (BSON_ITER_HOLDS_NULL(it)) return false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        uasserted(ErrorCode::TypeMismatch,
                  fmt::format("BSON field '{}.{}' is the wrong type '{}', expected type 'object'",
                              cmdName, field, bson::typeName(bson_iter_type(it))));
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(it, &len, &data);
    return bson_init_static(out, data, len);
}

/// The field's iterator in `it`, or null when absent.
bson_iter_t* lookup(const bson_t* cmd, std::string_view field, bson_iter_t* it) {
    return bson::find(cmd, field, it) ? it : nullptr;
}
bson_iter_t* lookup(const bson::Fields& cmd, std::string_view field, bson_iter_t* it) {
    return cmd.find(field, it) ? it : nullptr;
}

}  // namespace

bool getBool(const bson_t* cmd, std::string_view field, bool dflt) {
    bson_iter_t it;
    return boolAt(lookup(cmd, field, &it), dflt);
}

bool getBool(const bson::Fields& cmd, std::string_view field, bool dflt) {
    bson_iter_t it;
    return boolAt(lookup(cmd, field, &it), dflt);
}

int64_t getInt(const bson_t* cmd, std::string_view field, int64_t dflt, std::string_view cmdName) {
    bson_iter_t it;
    return intAt(lookup(cmd, field, &it), field, dflt, cmdName);
}

int64_t getInt(const bson::Fields& cmd, std::string_view field, int64_t dflt,
               std::string_view cmdName) {
    bson_iter_t it;
    return intAt(lookup(cmd, field, &it), field, dflt, cmdName);
}

bool getDoc(const bson_t* cmd, std::string_view field, bson_t* out, std::string_view cmdName) {
    bson_iter_t it;
    return docAt(lookup(cmd, field, &it), field, out, cmdName);
}

bool getDoc(const bson::Fields& cmd, std::string_view field, bson_t* out,
            std::string_view cmdName) {
    bson_iter_t it;
    return docAt(lookup(cmd, field, &it), field, out, cmdName);
}

namespace {

/// Arguments every command accepts. Hashed once: every command checks each of
/// its fields against them.
const std::unordered_set<std::string_view>& genericArguments() {
    static const std::unordered_set<std::string_view> kGeneric = {"$db",
                                                                  "lsid",
                                                                  "txnNumber",
                                                                  "autocommit",
                                                                  "startTransaction",
                                                                  "$clusterTime",
                                                                  "$readPreference",
                                                                  "readConcern",
                                                                  "writeConcern",
                                                                  "maxTimeMS",
                                                                  "comment",
                                                                  "apiVersion",
                                                                  "apiStrict",
                                                                  "apiDeprecationErrors",
                                                                  "$audit",
                                                                  "$client",
                                                                  "mayBypassWriteBlocking",
                                                                  "$configServerState",
                                                                  "databaseVersion",
                                                                  "shardVersion",
                                                                  "clientOperationKey",
                                                                  "txnRetryCounter",
                                                                  "$queryOptions",
                                                                  "$topologyTime",
                                                                  "$oplogQueryData",
                                                                  "$replData",
                                                                  "$gleStats",
                                                                  "$query",
                                                                  "$orderby",
                                                                  "$hint",
                                                                  "$explain",
                                                                  "$snapshot",
                                                                  "$maxTimeMS"};
    return kGeneric;
}

}  // namespace

bool isGenericArgument(std::string_view field) {
    return genericArguments().contains(field);
}

void checkFields(const OperationContext& op, std::initializer_list<std::string_view> known) {
    for (size_t i = 1; i < op.args.size(); ++i) {  // after the command name
        std::string_view k = op.args.key(i);
        bool ok = false;
        for (auto f : known) {
            if (f == k) {
                ok = true;
                break;
            }
        }
        if (!ok && !isGenericArgument(k))
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '{}.{}' is an unknown field.", op.name, k));
    }
}

}  // namespace cmdarg
}  // namespace halo::store
