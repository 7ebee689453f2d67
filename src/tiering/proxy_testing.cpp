// Test-only commands, with setParameter.enableTestCommands as on mongos:
// configureFailPoint, and the failCommand fail point evaluated by the proxy
// itself on its clients' commands (the rules are the store's, store/rules/).
// The official transactions and retryable-writes suites drive the proxy's own
// retry paths with it.
#include <fmt/format.h>

#include "common/log.h"
#include "store/rules/error_labels.h"
#include "store/rules/fail_command.h"
#include "tiering/client_connection.h"

namespace halo::tiering {

namespace {

/// The labels' context of a command the proxy fails itself.
store::LabelContext labelContext(std::string_view name, const bson_t* cmd, bool changeStream) {
    store::LabelContext ctx;
    ctx.command = name;
    ctx.hasTxnNumber = bson_has_field(cmd, "txnNumber");
    ctx.hasAutocommit = bson_has_field(cmd, "autocommit");
    ctx.changeStream = changeStream;
    return ctx;
}

}  // namespace

store::FailPointTarget ClientConnection::failPointTarget(std::string_view name,
                                                         const std::string& db,
                                                         const bson_t* cmd) const {
    store::FailPointTarget t;
    t.name = name;
    const std::string key = name == "getMore" ? "collection" : std::string(name);
    std::string coll = str(cmd, key.c_str());
    t.ns = db + "." + (coll.empty() ? std::string("$cmd") : coll);
    t.client.local = false;
    t.client.connectionId = info_.id;
    if (!clientMetadata_.empty()) t.client.metadata = clientMetadata_.get();
    t.cmd = cmd;
    return t;
}

bson::Doc ClientConnection::configureFailPoint(const bson_t* cmd) {
    std::string name = str(cmd, "configureFailPoint");
    store::FailPoint* fp = nullptr;
    if (name == "failCommand") fp = &p_.failCommand();
    if (name == "failGetMoreAfterCursorCheckout") fp = &p_.failGetMoreAfterCursorCheckout();
    if (!fp)
        return errorDoc(Status(ErrorCode::FailPointSetFailed,
                               fmt::format("{} not found (the proxy has failCommand and "
                                           "failGetMoreAfterCursorCheckout)",
                                           name)));
    auto settings = store::FailPoint::parse(cmd);
    if (!settings.isOK()) return errorDoc(settings.getStatus());
    int64_t before = fp->configure(std::move(settings.getValue()));
    log::warning("control", 23829, "Set failpoint",
                 fmt::format(R"({{"failPointName":{}}})", log::quote(name)));
    bson::Doc d;
    BSON_APPEND_INT64(d.mut(), "count", before);
    BSON_APPEND_DOUBLE(d.mut(), "ok", 1.0);
    return d;
}

asio::awaitable<std::optional<bson::Doc>> ClientConnection::failCommandBefore(std::string_view name,
                                                                              const std::string& db,
                                                                              const bson_t* cmd) {
    store::FailPointTarget target = failPointTarget(name, db, cmd);
    store::FailCommandEffect effect = store::evaluateFailCommand(p_.failCommand(), target);
    if (!effect.fired()) co_return std::nullopt;
    if (effect.block && effect.block->count() > 0) {
        asio::steady_timer timer(co_await asio::this_coro::executor);
        timer.expires_after(*effect.block);
        co_await timer.async_wait(asio::use_awaitable);
    }
    if (effect.closeConnection) {
        closeAfterReply_ = true;
        co_return errorDoc(Status(ErrorCode::HostUnreachable, "connection closed by failCommand"));
    }
    if (!effect.error) co_return std::nullopt;  // only blocked: the command runs
    bson::Doc reply = errorDoc(*effect.error);
    // An aggregate opening a change stream is labelled as one; a getMore failed
    // here has not reached its cursor, and mongod does not label it either.
    const bool opensChangeStream = name == "aggregate" && firstStageIs(cmd, "$changeStream");
    store::appendErrorLabels(reply.mut(), labelContext(name, cmd, opensChangeStream),
                             static_cast<int>(effect.error->code()), std::nullopt,
                             effect.errorLabels);
    co_return reply;
}

std::optional<bson::Doc> ClientConnection::failGetMoreAfterCheckout(const bson_t* cmd,
                                                                    const CursorEntry& e,
                                                                    int64_t id) {
    store::FailPoint& fp = p_.failGetMoreAfterCursorCheckout();
    if (!fp.maybeOn()) return std::nullopt;
    store::FailPointTarget target = failPointTarget("getMore", str(cmd, "$db"), cmd);
    auto data =
        fp.fire([&](const bson_t* d) { return store::failPointAppliesTo(d, target, "getMore"); });
    if (!data) return std::nullopt;
    bson_iter_t it;
    int code = static_cast<int>(ErrorCode::InternalError);
    if (bson_iter_init_find(&it, data->get(), "errorCode") && BSON_ITER_HOLDS_NUMBER(&it))
        code = static_cast<int>(bson_iter_as_int64(&it));
    p_.cursors().erase(id);
    p_.killRemote({e});
    bson::Doc reply = errorDoc(
        Status(static_cast<ErrorCode>(code), "Hit the 'failGetMoreAfterCursorCheckout' failpoint"));
    store::appendErrorLabels(reply.mut(), labelContext("getMore", cmd, e.changeStream), code,
                             std::nullopt, std::nullopt);
    return reply;
}

void ClientConnection::failCommandAfter(std::string_view name, const std::string& db,
                                        const bson_t* cmd, bson::Doc& reply) {
    if (!store::takesWriteConcern(name) || bson_has_field(reply.get(), "writeConcernError")) return;
    auto wce =
        store::evaluateFailCommandWriteConcern(p_.failCommand(), failPointTarget(name, db, cmd));
    if (!wce) return;
    bson_concat(reply.mut(), wce->field.get());
    bson_iter_t it;
    std::optional<int> wcCode;
    bson_t wc;
    if (bson::subDocument(wce->field.get(), "writeConcernError", &wc) &&
        bson_iter_init_find(&it, &wc, "code"))
        wcCode = static_cast<int>(bson_iter_as_int64(&it));
    if (!bson_has_field(reply.get(), "errorLabels")) {
        // The command's own failure, if any: the write concern error is wcCode
        // (a statement that succeeded inside a transaction is no transient error).
        std::optional<int> code;
        if (bson_iter_init_find(&it, reply.get(), "ok") && !bson::isTruthy(*bson_iter_value(&it)) &&
            bson_iter_init_find(&it, reply.get(), "code"))
            code = static_cast<int>(bson_iter_as_int64(&it));
        store::appendErrorLabels(reply.mut(), labelContext(name, cmd, false), code, wcCode,
                                 wce->errorLabels);
    }
}

}  // namespace halo::tiering
