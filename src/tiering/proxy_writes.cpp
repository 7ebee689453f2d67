// Writes to tiered collections (CONSISTENCY.md, Writes, Deletes, Cold writes).
#include <fmt/format.h>

#include "common/clock.h"
#include "common/log.h"
#include "tiering/client_connection.h"
#include "tiering/cold_write.h"

namespace halo::tiering {

asio::awaitable<Status> ClientConnection::prepare(const CollectionPolicy& p, const bson_t* filter,
                                                  const bson_t* matchOptions,
                                                  std::vector<Pinned>* pins) {
    // Ids named under a collation may match others ("a" and "A"): a range.
    std::optional<std::vector<Id>> ids;
    if (!collated(matchOptions)) ids = idsNamedBy(filter);
    // (Not a conditional expression: GCC 12 miscompiles co_await inside ?:.)
    StatusWith<Pinned> r = Pinned{};
    if (ids)
        r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, *ids);
    else
        r = co_await prepareWriteMatching(p_.tiers(), p, p_.config().clockSkewGuard, filter,
                                          matchOptions);
    if (!r.isOK()) co_return r.getStatus();
    if (auto* prog = p_.state().progress(p.ns))
        prog->promoted += static_cast<int64_t>(r.getValue().ids.size());
    if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
    co_return Status::OK();
}

asio::awaitable<StatusWith<std::optional<bson::Doc>>> ClientConnection::prepareOrWriteCold(
    const CollectionPolicy& p, std::string_view kind, const bson_t* cmd, const char* arrayKey,
    const bson_t* stmt, const bson_t* filter, std::vector<Pinned>* pins) {
    using Out = std::optional<bson::Doc>;
    SharedState& s = p_.state();
    std::optional<bson::Fields> ownFields;
    const bson::Fields& f = fieldsOf(cmd, ownFields);
    const bson::Doc options = matchOptionsOf(f, stmt);
    std::optional<Id> id;
    if (p_.config().coldWrites && !p.changeStreams) id = coldTarget(kind, stmt, p);
    bson::Doc retryKey = retryKeyOf(f, 0);
    bson_t clientLsid;
    bool retryable = !retryKey.empty() && f.subDocument("lsid", &clientLsid);
    int64_t clientTxn = 0;
    bson_iter_t it;
    if (retryable && f.find("txnNumber", &it)) clientTxn = bson_iter_as_int64(&it);
    // The statement's retry record, when read after every promotion made for it.
    std::optional<std::optional<DeleteResult>> record;
    if (id) {
        std::vector<Id> ids;
        ids.push_back(id->copy());
        PrepareOptions o;
        o.coldOk = true;
        if (retryable) o.retryKey = retryKey.get();
        auto r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, ids, o);
        if (!r.isOK()) co_return r.getStatus();
        if (!r.getValue().cold) {
            if (r.getValue().retryRead) record = std::move(r.getValue().retry);
            if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
        } else {
            // The client's retryable session, or one of the proxy's: either
            // way running the command again is a retry, never a repeat.
            std::optional<SessionPool::Lease> own;
            bson::Doc ac;
            if (retryable) {
                ac = coldCommand(cmd, arrayKey, stmt, &clientLsid, clientTxn);
            } else {
                own = p_.tiers().archiveSessions->take();
                ac = coldCommand(cmd, arrayKey, stmt, own->lsid.get(), own->txnNumber);
            }
            slot_.sentTo(p_.archive().name().c_str());
            auto c = co_await runCold(p_.tiers(), p.ns, *id, ac.get(),
                                      retryable ? retryKey.get() : nullptr);
            if (own) p_.tiers().archiveSessions->give(std::move(*own));
            if (!c.isOK()) co_return c.getStatus();
            if (c.getValue()) {
                if (auto* prog = s.progress(p.ns)) ++prog->coldWrites;
                co_return std::move(c.getValue());
            }
            // Raced with a writer that copied it up: prepare as any write.
            Status st = co_await prepare(p, filter, options.get(), pins);
            if (!st.isOK()) co_return st;
        }
    } else {
        Status st = co_await prepare(p, filter, options.get(), pins);
        if (!st.isOK()) co_return st;
    }
    // A retry of a statement that ran in the archive goes there again, and
    // the archive answers it from its session record. (Checked after the
    // promotion, which waits for a cold write's guard: a cold run of this
    // statement is recorded by then.)
    if (id && retryable) {
        if (!record) {
            auto found = co_await findRetry(p_.tiers(), retryKey.get());
            if (!found.isOK()) co_return found.getStatus();
            record = std::move(found.getValue());
        }
        if (*record && (*record)->inArchive) {
            bson::Doc ac = coldCommand(cmd, arrayKey, stmt, &clientLsid, clientTxn);
            slot_.sentTo(p_.archive().name().c_str());
            auto r = co_await p_.archive().run(ac.get());
            if (!r.isOK()) co_return r.getStatus();
            co_return Out(std::move(r.getValue()));
        }
    }
    co_return Out{};
}

void ClientConnection::release(std::vector<Pinned>& pins) {
    if (pins.empty()) return;
    auto* proxy = &p_;
    asio::co_spawn(
        p_.io(),
        [proxy, pins = std::move(pins)]() -> asio::awaitable<void> {
            for (auto& pin : pins) co_await unpin(proxy->tiers(), pin);
        },
        asio::detached);
    pins.clear();
}

asio::awaitable<bson::Doc> ClientConnection::tieredWrite(const CollectionPolicy& p,
                                                         std::string_view name,
                                                         const wire::OpMsg& msg,
                                                         const bson_t* cmd) {
    if (name == "delete") co_return co_await tieredDelete(p, msg, cmd);
    // Every document the write can touch is in the fast tier, and pinned there
    // against eviction, until the write has run (CONSISTENCY.md, Writes).
    std::vector<Pinned> pins;
    Status prepared = Status::OK();
    std::optional<bson::Fields> ownFields;
    const bson::Fields& f = fieldsOf(cmd, ownFields);
    if (name == "insert") {
        std::vector<Id> ids;
        for (auto d : statements(msg, f, "documents")) {
            bson::View v(d.data(), d.size());
            Id id;
            if (idOf(v.get(), &id)) ids.push_back(std::move(id));
        }
        PrepareOptions o;
        o.keysUpFront = true;  // new ids, mostly: absent from the fast tier
        auto r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, ids, o);
        if (!r.isOK())
            prepared = r.getStatus();
        else if (!r.getValue().ids.empty())
            pins.push_back(std::move(r.getValue()));
    } else if (name == "update") {
        auto stmts = statements(msg, f, "updates");
        for (auto stmt : stmts) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q;
            if (!bson::subDocument(u.get(), "q", &q)) continue;
            if (stmts.size() == 1) {
                auto cold =
                    co_await prepareOrWriteCold(p, "update", cmd, "updates", u.get(), &q, &pins);
                if (cold.isOK() && cold.getValue())
                    co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
                prepared = cold.getStatus();
            } else {
                const bson::Doc options = matchOptionsOf(f, u.get());
                prepared = co_await prepare(p, &q, options.get(), &pins);
            }
            if (!prepared.isOK()) break;
        }
    } else {  // findAndModify
        bson_t q;
        bson_t empty = BSON_INITIALIZER;
        if (!f.subDocument("query", &q)) q = empty;
        auto cold = co_await prepareOrWriteCold(p, "findAndModify", cmd, nullptr, cmd, &q, &pins);
        if (cold.isOK() && cold.getValue()) {
            release(pins);
            co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
        }
        prepared = cold.getStatus();
        if (prepared.isOK() && truthy(f, "remove")) {
            bson::Doc out = co_await tieredRemove(p, cmd);
            release(pins);
            co_return out;
        }
    }
    if (!prepared.isOK()) {
        release(pins);
        co_return errorDoc(prepared);
    }
    bson::Doc body = forwardBody(cmd, false);
    auto r = co_await send(p_.fast(), msg, body.get());
    release(pins);
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    co_return rewriteReply(p_.fast(), r.getValue().get(), p.ns, false);
}

asio::awaitable<bson::Doc> ClientConnection::tieredDelete(const CollectionPolicy& p,
                                                          const wire::OpMsg& msg,
                                                          const bson_t* cmd) {
    std::optional<bson::Fields> ownFields;
    const bson::Fields& f = fieldsOf(cmd, ownFields);
    bson_iter_t it;
    bool ordered = !f.find("ordered", &it) || bson_iter_as_bool(&it);
    int64_t n = 0;
    bson::Doc errors;
    int nErrors = 0;
    OpTime last = 0;
    auto stmts = statements(msg, f, "deletes");
    for (size_t i = 0; i < stmts.size(); ++i) {
        bson_t q;
        bson_t empty = BSON_INITIALIZER;
        bson::View stmt(stmts[i].data(), stmts[i].size());
        if (!bson::subDocument(stmt.get(), "q", &q)) q = empty;
        const bson::Doc options = matchOptionsOf(f, stmt.get());
        int64_t limit = 0;
        if (bson_iter_init_find(&it, stmt.get(), "limit")) limit = bson_iter_as_int64(&it);
        // A retry of a retryable delete answers what the first attempt did.
        bson::Doc retryKey = retryKeyOf(f, static_cast<int>(i));
        StatusWith<DeleteResult> r = DeleteResult{};
        std::optional<DeleteResult> earlier;
        if (!retryKey.empty()) {
            auto found = co_await findRetry(p_.tiers(), retryKey.get());
            if (!found.isOK())
                r = found.getStatus();
            else
                earlier = std::move(found.getValue());
        }
        if (earlier && !earlier->inArchive) {
            r = std::move(*earlier);
        } else if (r.isOK()) {
            std::vector<Pinned> pins;
            Status s = Status::OK();
            if (stmts.size() == 1) {
                // One statement: it may run in the archive (cold_write.h).
                auto cold =
                    co_await prepareOrWriteCold(p, "delete", cmd, "deletes", stmt.get(), &q, &pins);
                if (cold.isOK() && cold.getValue()) {
                    release(pins);
                    co_return rewriteReply(p_.archive(), cold.getValue()->get(), p.ns, false);
                }
                s = cold.getStatus();
            } else {
                s = co_await prepare(p, &q, options.get(), &pins);
            }
            r = s;
            if (s.isOK())
                r = co_await deleteWithTombstones(p_.tiers(), p.ns, &q, limit == 1 ? 1 : 0, nullptr,
                                                  options.get(),
                                                  retryKey.empty() ? nullptr : retryKey.get());
            release(pins);
        }
        if (!r.isOK()) {
            bson_t e;
            std::string key = std::to_string(nErrors++);
            BSON_APPEND_DOCUMENT_BEGIN(errors.mut(), key.c_str(), &e);
            BSON_APPEND_INT32(&e, "index", static_cast<int32_t>(i));
            BSON_APPEND_INT32(&e, "code", r.getStatus().codeNumber());
            bson::appendMessage(&e, "errmsg", r.getStatus().reason());
            bson_append_document_end(errors.mut(), &e);
            if (ordered) break;
            continue;
        }
        n += r.getValue().n;
        if (r.getValue().operationTime.size() > 5) {
            bson_iter_t t;
            if (bson_iter_init_find(&t, r.getValue().operationTime.get(), "t")) {
                last = std::max(last, toOpTime(t));
            }
        }
    }
    if (last) p_.state().noteFastTime(last);
    bson::Doc out;
    BSON_APPEND_INT32(out.mut(), "n",
                      static_cast<int32_t>(n));  // int32, as mongod (libmongoc reads no other)
    if (nErrors) BSON_APPEND_ARRAY(out.mut(), "writeErrors", errors.get());
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), last ? last : p_.state().fastClusterTime.load());
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::tieredRemove(const CollectionPolicy& p,
                                                          const bson_t* cmd) {
    std::optional<bson::Fields> ownFields;
    const bson::Fields& fields = fieldsOf(cmd, ownFields);
    bson_t q, sort;
    bson_t empty = BSON_INITIALIZER;
    if (!fields.subDocument("query", &q)) q = empty;
    bool hasSort = fields.subDocument("sort", &sort);
    const bson::Doc options = matchOptionsOf(fields);
    auto projection = removeProjection(cmd);
    if (!projection.isOK()) co_return errorDoc(projection.getStatus());
    bson::Doc retryKey = retryKeyOf(fields, 0);
    StatusWith<DeleteResult> r = DeleteResult{};
    std::optional<DeleteResult> earlier;
    if (!retryKey.empty()) {
        auto f = co_await findRetry(p_.tiers(), retryKey.get());
        if (!f.isOK()) co_return errorDoc(f.getStatus());
        earlier = std::move(f.getValue());
    }
    if (earlier)
        r = std::move(*earlier);
    else
        r = co_await deleteWithTombstones(p_.tiers(), p.ns, &q, 1, hasSort ? &sort : nullptr,
                                          options.get(),
                                          retryKey.empty() ? nullptr : retryKey.get());
    if (!r.isOK()) co_return errorDoc(r.getStatus());
    co_return removeReply(r.getValue(), projection.getValue());
}

bson::Doc ClientConnection::removeReply(const DeleteResult& r, const RemoveProjection& projection) {
    OpTime t = 0;
    bson_iter_t it;
    if (bson_iter_init_find(&it, r.operationTime.get(), "t")) t = toOpTime(it);
    if (t) p_.state().noteFastTime(t);
    bson::Doc out;
    bson_t leo;
    BSON_APPEND_DOCUMENT_BEGIN(out.mut(), "lastErrorObject", &leo);
    BSON_APPEND_INT32(&leo, "n", static_cast<int32_t>(r.n));
    bson_append_document_end(out.mut(), &leo);
    if (r.deleted) {
        auto shown = projection.apply(r.deleted->get());
        if (!shown.isOK()) return errorDoc(shown.getStatus());
        BSON_APPEND_DOCUMENT(out.mut(), "value", shown.getValue().get());
    } else
        BSON_APPEND_NULL(out.mut(), "value");
    BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
    appendClock(out.mut(), t ? t : p_.state().fastClusterTime.load());
    return out;
}

}  // namespace halo::tiering
