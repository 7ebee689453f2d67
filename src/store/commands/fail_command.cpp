#include "store/commands/fail_command.h"

#include <fmt/format.h>

#include <limits>

#include "common/log.h"
#include "store/commands/command.h"
#include "store/server/store.h"

namespace halo::store {

FailPointTarget failPointTarget(const CommandSpec* spec, std::string_view name, std::string ns,
                                const ClientState& client, const bson_t* cmd) {
    FailPointTarget t;
    if (spec)
        for (const auto& n : spec->names) t.names.push_back(n);
    t.name = name;
    t.ns = std::move(ns);
    t.client.local = client.internal;
    t.client.internalClient = client.internalClient;
    t.client.connectionId = client.connectionId;
    if (client.sawHandshake) t.client.metadata = client.clientMetadata.get();
    t.cmd = cmd;
    return t;
}

namespace {

/// configureFailPoint: <name>, mode, data. Replies {count: <times it fired before>}.
void runConfigureFailPoint(OperationContext& op, bson_t* reply) {
    std::string name = cmdarg::stringArgument(op);
    FailPoint* fp = op.store.failPoints().find(name);
    if (!fp) uasserted(ErrorCode::FailPointSetFailed, name + " not found");
    auto settings = uassertStatusOK(FailPoint::parse(op.cmd));
    int64_t before = fp->configure(std::move(settings));
    bson::Doc shown;
    fp->append(shown.mut());
    log::warning(
        "control", 23829, "Set failpoint",
        fmt::format(R"({{"failPointName":{},"failPoint":{}}})", log::quote(name), shown.toJson()));
    if (before <= std::numeric_limits<int32_t>::max())
        BSON_APPEND_INT32(reply, "count", static_cast<int32_t>(before));
    else
        BSON_APPEND_INT64(reply, "count", before);
}

}  // namespace

HALO_REGISTER_COMMAND(CommandSpec{
    {"configureFailPoint"}, runConfigureFailPoint, /*adminOnly=*/true, /*testOnly=*/true});

}  // namespace halo::store
