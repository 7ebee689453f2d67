#include "store/server/service.h"

#include <fmt/format.h>

#include "common/log.h"
#include "store/exec/cursor_manager.h"
#include "store/repl/oplog.h"
#include "store/storage/engine.h"

namespace halo::store {

ServiceConnection::ServiceConnection(Store& store, const net::ConnectionInfo& info)
    : store_(store) {
    client_.connectionId = info.id;
    client_.remote = info.remote;
    client_.local = info.local;
    store_.operations().addClient(info.id, info.remote);
}

ServiceConnection::~ServiceConnection() {
    store_.operations().removeClient(client_.connectionId);
}

asio::awaitable<net::HandlerResult> ServiceConnection::onFrame(net::Frame frame) {
    // The request is an operation (currentOp, killOp) until its reply is sent.
    auto active = store_.operations().begin(client_.connectionId);
    client_.activeOp = active;
    struct EndOperation {
        ServiceConnection* self;
        ~EndOperation() {
            self->store_.operations().end(*self->client_.activeOp);
            self->client_.activeOp.reset();
        }
    } endOperation{this};
    // A command may ask to wait (awaitable hello, awaitData getMore): wait on a
    // timer, which an oplog commit or a killOp cancels early, then run it again.
    Deferral deferral;
    auto r = handle(frame, &deferral, false);
    const auto deadline = deferral.deadline;  // the first request's deadline bounds the whole wait
    while (deferral.requested) {
        auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
        if (deferral.writeConflicts > 0) {
            // A write waiting on another transaction's write (ConflictYield):
            // the thread serves the other connections, that transaction's
            // among them, meanwhile; a killOp ends the wait early.
            timer->expires_after(writeConflictDelay(deferral.writeConflicts));
            if (store_.operations().waitOn(*active, timer)) {
                asio::error_code ec;
                co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
            }
            deferral = Deferral{.writeConflicts = deferral.writeConflicts,
                                .progress = std::move(deferral.progress)};
            r = handle(frame, &deferral, false);
            continue;
        }
        timer->expires_at(deadline);
        bool wait = store_.operations().waitOn(*active, timer);
        if (deferral.cursorId) store_.cursors().wakeOnKill(deferral.cursorId, timer);
        if (deferral.wakeOnOplogCommit) {
            store_.oplog().wakeOnNextCommit(timer);
            wait = wait && store_.oplog().commitSeq() == deferral.seenCommitSeq;
        }
        if (wait) {
            asio::error_code ec;
            co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
        }
        // A killed operation stops waiting: its last attempt reports the interruption.
        bool final = active->killed() || std::chrono::steady_clock::now() >= deadline;
        deferral = Deferral{};
        r = handle(frame, &deferral, final);
    }
    co_return r;
}

net::Frame ServiceConnection::maybeCompress(net::Frame frame, std::optional<wire::Compressor> c) {
    if (!c) return frame;
    auto sw = wire::compress(frame, *c);
    if (!sw.isOK()) return frame;
    return std::move(sw.getValue());
}

net::HandlerResult ServiceConnection::handle(std::span<const uint8_t> frame, Deferral* deferral,
                                             bool finalAttempt) {
    auto hsw = wire::parseHeader(frame);
    if (!hsw.isOK() || static_cast<size_t>(hsw.getValue().messageLength) != frame.size()) {
        return {std::nullopt, true};
    }
    wire::Header h = hsw.getValue();
    std::optional<wire::Compressor> replyCompressor;
    std::vector<uint8_t> inflated;
    if (h.opCode == static_cast<int32_t>(wire::OpCode::Compressed)) {
        auto dsw = wire::decompress(h, frame.subspan(wire::kHeaderSize));
        if (!dsw.isOK()) {
            log::warning("network", 22989, "Invalid compressed message; closing connection",
                         fmt::format(R"({{"error":{}}})", log::quote(dsw.getStatus().reason())));
            return {std::nullopt, true};
        }
        inflated = std::move(dsw.getValue());
        replyCompressor = static_cast<wire::Compressor>(frame[wire::kHeaderSize + 8]);
        if (*replyCompressor == wire::Compressor::Noop) replyCompressor.reset();
        frame = inflated;
        h = wire::parseHeader(frame).getValue();
    }
    switch (static_cast<wire::OpCode>(h.opCode)) {
        case wire::OpCode::Msg:
            return handleMsg(frame, h, replyCompressor, deferral, finalAttempt);
        case wire::OpCode::Query:
            return handleQuery(frame, h, replyCompressor);
        default:
            log::warning("network", 22990, "Unsupported opcode; closing connection",
                         fmt::format(R"({{"opCode":{}}})", h.opCode));
            return {std::nullopt, true};
    }
}

net::HandlerResult ServiceConnection::handleMsg(std::span<const uint8_t> frame,
                                                const wire::Header& h,
                                                std::optional<wire::Compressor> replyCompressor,
                                                Deferral* deferral, bool finalAttempt) {
    bson::Doc reply;
    auto msw = wire::parseOpMsg(frame);
    bool moreToCome = false;
    std::optional<bson::Doc> exhaustCmd;  // the command, when it may stream
    if (!msw.isOK()) {
        appendError(reply.mut(), msw.getStatus());
    } else {
        const wire::OpMsg& msg = msw.getValue();
        moreToCome = (msg.flags & wire::kMoreToCome) != 0;
        bson::Doc cmd = wire::mergeSequences(msg);
        bson::Fields args(cmd.get());
        bson_iter_t it;
        if (!args.find("$db", &it) || !BSON_ITER_HOLDS_UTF8(&it)) {
            appendError(reply.mut(),
                        Status(ErrorCode::Location40571, "OP_MSG requests require a $db argument"));
        } else {
            std::string_view db = bson_iter_utf8(&it, nullptr);
            store_.runCommand(client_, db, args, reply.mut(), deferral, finalAttempt);
            if (deferral->requested) return {std::nullopt, false};
            if ((msg.flags & wire::kExhaustAllowed) && !moreToCome) exhaustCmd = std::move(cmd);
        }
    }
    if (client_.closeConnection) return {std::nullopt, true};  // a fail point: no reply
    if (moreToCome) return {std::nullopt, false};
    const int32_t replyId = nextResponseId_++;
    std::optional<bson::Doc> next;
    if (exhaustCmd) next = nextExhaustRequest(exhaustCmd->get(), reply.get());
    auto out = wire::buildOpMsg(replyId, h.requestId, reply.get(), next ? wire::kMoreToCome : 0);
    net::HandlerResult r{maybeCompress(std::move(out), replyCompressor), false};
    if (next) {
        // The stream's next request answers to this reply, as mongod's do.
        r.next = maybeCompress(wire::buildOpMsg(replyId, 0, next->get(), wire::kExhaustAllowed),
                               replyCompressor);
    }
    return r;
}

std::optional<bson::Doc> ServiceConnection::nextExhaustRequest(const bson_t* cmd,
                                                               const bson_t* reply) {
    // Only an awaitable hello streams (mongod's exhaust getMore is not served:
    // its reply never says moreToCome, which ends the stream at once).
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) return std::nullopt;
    std::string_view name = bson_iter_key(&it);
    if (name != "hello" && name != "isMaster" && name != "ismaster") return std::nullopt;
    bson_t tv;
    bson_iter_t ok;
    if (!bson_has_field(cmd, "maxAwaitTimeMS") || !bson_has_field(cmd, "topologyVersion") ||
        !bson::subDocument(reply, "topologyVersion", &tv) || !bson::find(reply, "ok", &ok) ||
        !bson::isTruthy(*bson_iter_value(&ok)))
        return std::nullopt;
    // The same command, waiting on the topologyVersion just sent.
    bson::Doc next;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        if (std::string_view(bson_iter_key(&it)) == "topologyVersion")
            BSON_APPEND_DOCUMENT(next.mut(), "topologyVersion", &tv);
        else
            bson_append_iter(next.mut(), bson_iter_key(&it), -1, &it);
    }
    return next;
}

net::HandlerResult ServiceConnection::handleQuery(std::span<const uint8_t> frame,
                                                  const wire::Header& h,
                                                  std::optional<wire::Compressor> replyCompressor) {
    bson::Doc reply;
    auto qsw = wire::parseOpQuery(frame);
    int32_t flags = 0;
    if (!qsw.isOK()) {
        appendError(reply.mut(), qsw.getStatus());
    } else {
        const wire::OpQuery& q = qsw.getValue();
        const std::string& ns = q.fullCollectionName;
        auto dot = ns.find('.');
        if (dot == std::string::npos || ns.substr(dot + 1) != "$cmd") {
            // Legacy OP_QUERY reads were removed in MongoDB 5.1+.
            flags = 2;  // QueryFailure
            BSON_APPEND_UTF8(
                reply.mut(), "$err",
                "OP_QUERY is no longer supported. The client driver may require an upgrade.");
            BSON_APPEND_INT32(reply.mut(), "code", 5739101);
            BSON_APPEND_UTF8(reply.mut(), "codeName", "Location5739101");
        } else {
            std::string db = ns.substr(0, dot);
            bson::View view(q.query.data(), q.query.size());
            const bson_t* cmd = view.get();
            // A wrapped query: {$query: {...}, $readPreference: ...}
            bson_iter_t it;
            bson_t inner;
            if ((bson::find(cmd, "$query", &it) || bson::find(cmd, "query", &it)) &&
                BSON_ITER_HOLDS_DOCUMENT(&it)) {
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&it, &len, &data);
                if (bson_init_static(&inner, data, len)) cmd = &inner;
            }
            bson_iter_t first;
            std::string_view name;
            if (bson_iter_init(&first, cmd) && bson_iter_next(&first)) name = bson_iter_key(&first);
            Status allowed = wire::checkOpQueryCommand(name);
            if (allowed.isOK())
                store_.runCommand(client_, db, cmd, reply.mut());
            else
                appendError(reply.mut(), allowed);
        }
    }
    if (client_.closeConnection) return {std::nullopt, true};  // a fail point: no reply
    auto out = wire::buildOpReply(nextResponseId_++, h.requestId, reply.get(), flags);
    return {maybeCompress(std::move(out), replyCompressor), false};
}

}  // namespace halo::store
