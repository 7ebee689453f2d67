// Client transactions (CONSISTENCY.md, Transactions).
#include <fmt/format.h>

#include "tiering/client_connection.h"

namespace halo::tiering {

asio::awaitable<std::optional<bson::Doc>> ClientConnection::transactionStatement(
    const TxnKey& k, const wire::OpMsg& msg, const bson_t* cmd, std::string_view name,
    const std::string& ns, const CollectionPolicy* policy) {
    const bool starts = truthy(cmd, "startTransaction");
    auto entry = p_.transactions().find(k);
    // A statement of a transaction this proxy did not see start (it started
    // before a restart) goes where its collection lives; that tier answers
    // NoSuchTransaction if it has none.
    if (starts || !entry) entry = TxnTable::Entry{policy ? TxnSide::Fast : TxnSide::Archive, 0};
    const bool fast = entry->side == TxnSide::Fast;
    if (!ns.empty() && (policy != nullptr) != fast) {
        ClientTxn txn(fast ? p_.fast() : p_.archive(), cmd);
        co_await txn.abort();
        co_return errorDoc(Status(
            ErrorCode::OperationNotSupportedInTransaction,
            fmt::format("halocline: this transaction runs in the {} tier, where {} collections "
                        "live, and {} is {}: one transaction cannot commit atomically in two "
                        "replica sets, so it was aborted. Keep tiered and untiered collections "
                        "in separate transactions (docs/CONSISTENCY.md, Transactions)",
                        fast ? "fast" : "archive", fast ? "tiered" : "untiered", ns,
                        policy ? "tiered" : "untiered")));
    }
    entry->statements++;
    p_.transactions().put(k, *entry);
    if (!fast) co_return std::nullopt;
    if (!policy) {
        bson::Doc body = forwardBody(cmd, false);
        co_return co_await forward(p_.fast(), msg, body.get(), ns, false);
    }
    GateHold writing = co_await p_.beginWrite(policy->ns);
    co_return co_await tieredTxnStatement(*policy, name, msg, cmd);
}

asio::awaitable<Status> ClientConnection::prepareInTxn(
    const CollectionPolicy& p, const bson_t* filter, const bson_t* matchOptions,
    std::optional<std::vector<Id>> ids, std::vector<Pinned>* pins, std::vector<TxnNeed>* needs) {
    // Ids named under a collation may match others ("a" and "A"): a range.
    if (!ids && !collated(matchOptions)) ids = idsNamedBy(filter);
    TxnNeed need;
    StatusWith<Pinned> r = Pinned{};
    if (ids) {
        r = co_await prepareWrite(p_.tiers(), p, p_.config().clockSkewGuard, *ids);
        for (auto& id : *ids) need.ids.push_back(id.copy());
    } else {
        r = co_await prepareWriteMatching(p_.tiers(), p, p_.config().clockSkewGuard, filter,
                                          matchOptions, p_.config().transactionPromotionLimit);
        need.range = true;
    }
    if (!r.isOK()) co_return r.getStatus();
    if (auto* prog = p_.state().progress(p.ns))
        prog->promoted += static_cast<int64_t>(r.getValue().ids.size());
    if (need.range)
        for (auto& id : r.getValue().ids) need.ids.push_back(id.copy());
    if (!r.getValue().ids.empty()) pins->push_back(std::move(r.getValue()));
    needs->push_back(std::move(need));
    co_return Status::OK();
}

asio::awaitable<Status> ClientConnection::prepareRead(const CollectionPolicy& p,
                                                      std::string_view name, const bson_t* cmd,
                                                      std::vector<Pinned>* pins,
                                                      std::vector<TxnNeed>* needs) {
    Decision d = p_.router().routeRead(p, name, cmd);
    const auto* prog = p_.state().progress(p.ns);
    if (d.route == Route::Refuse) co_return d.refusal;
    // A read the fast tier provably answers whole, with the warm-up done,
    // needs nothing: it held that range at the snapshot too.
    if (d.route == Route::Fast && prog && prog->warmDone) co_return Status::OK();
    bson_t filter;
    bson_t empty = BSON_INITIALIZER;
    if (!readFilter(name, cmd, &filter)) filter = empty;
    std::optional<bson::Fields> ownFields;
    const bson::Doc options = matchOptionsOf(fieldsOf(cmd, ownFields));
    std::optional<std::vector<Id>> ids;
    if (d.lookupId) {
        ids.emplace();
        ids->push_back(d.lookupId->copy());
    }
    co_return co_await prepareInTxn(p, &filter, options.get(), std::move(ids), pins, needs);
}

asio::awaitable<bson::Doc> ClientConnection::snapshotRead(const CollectionPolicy& p,
                                                          std::string_view name,
                                                          const wire::OpMsg& msg,
                                                          const bson_t* cmd) {
    // As a transaction's reads (CONSISTENCY.md, Snapshot reads): what the read
    // may see that lives only in the archive is copied up and pinned, then the
    // fast tier reads at the snapshot. The first read of a snapshot session
    // takes its time after that; a later one (atClusterTime) reads at an
    // earlier time, when the fast tier must already have held all of it.
    std::string other = name == "aggregate" ? otherCollectionStage(cmd) : "";
    if (!other.empty())
        co_return errorDoc(Status(ErrorCode::InvalidOptions,
                                  fmt::format("halocline: {} with readConcern snapshot on the "
                                              "tiered collection {} is not supported",
                                              other, p.ns)));
    std::vector<Pinned> pins;
    std::vector<TxnNeed> needs;
    Status st = co_await prepareRead(p, name, cmd, &pins, &needs);
    bson_t rc;
    bson_iter_t at;
    if (st.isOK() && bson::subDocument(cmd, "readConcern", &rc) &&
        bson_iter_init_find(&at, &rc, "atClusterTime")) {
        const bson::Doc readConcern = bson::Doc::copyOf(&rc);
        Tier& fast = p_.fast();
        CommandRunner atSnapshot = [&](const bson_t* c) -> asio::awaitable<StatusWith<bson::Doc>> {
            bson::Doc withTime = bson::Doc::copyOf(c);
            bson_iter_t first;
            if (bson_iter_init(&first, c) && bson_iter_next(&first) &&
                std::string_view(bson_iter_key(&first)) != "getMore")
                BSON_APPEND_DOCUMENT(withTime.mut(), "readConcern", readConcern.get());
            co_return co_await fast.runOk(withTime.get());
        };
        for (auto& n : needs) {
            st = co_await snapshotHolds(p_.tiers(), atSnapshot, p.ns, n.ids, n.range);
            if (!st.isOK()) break;
        }
        if (!st.isOK() && st.code() == ErrorCode::WriteConflict)
            st = Status(ErrorCode::SnapshotUnavailable,
                        fmt::format("{} (a snapshot read of the tiered collection {} can see only "
                                    "what the fast tier held at its atClusterTime; start a new "
                                    "snapshot session)",
                                    st.reason(), p.ns));
    }
    if (!st.isOK()) {
        release(pins);
        co_return errorDoc(st);
    }
    if (auto* prog = p_.state().progress(p.ns)) prog->routedFast++;
    slot_.sentTo(p_.fast().name().c_str());
    bson::Doc body = forwardBody(cmd, false);
    bson::Doc out = co_await forward(p_.fast(), msg, body.get(), p.ns, false);
    release(pins);
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::tieredTxnStatement(const CollectionPolicy& p,
                                                                std::string_view name,
                                                                const wire::OpMsg& msg,
                                                                const bson_t* cmd) {
    std::optional<bson::Fields> ownFields;
    const bson::Fields& f = fieldsOf(cmd, ownFields);
    const bool first = truthy(f, "startTransaction");
    ClientTxn txn(p_.fast(), cmd);
    std::vector<Pinned> pins;
    std::vector<TxnNeed> needs;
    Status st = Status::OK();
    bson_t empty = BSON_INITIALIZER;
    // Promote (and pin) what the statement may read or write that lives
    // only in the archive: its named ids, or the archive's matches.
    if (isReadCommand(name)) {
        std::string other = name == "aggregate" ? otherCollectionStage(cmd) : "";
        if (!other.empty())
            st = Status(ErrorCode::OperationNotSupportedInTransaction,
                        fmt::format("halocline: {} in a transaction on the tiered collection {} "
                                    "is not supported",
                                    other, p.ns));
        else
            st = co_await prepareRead(p, name, cmd, &pins, &needs);
    } else if (name == "insert") {
        std::vector<Id> ids;
        for (auto d : statements(msg, f, "documents")) {
            bson::View v(d.data(), d.size());
            Id id;
            if (idOf(v.get(), &id)) ids.push_back(std::move(id));
        }
        st = co_await prepareInTxn(p, nullptr, nullptr, std::move(ids), &pins, &needs);
    } else if (name == "update" || name == "delete") {
        for (auto stmt : statements(msg, f, name == "update" ? "updates" : "deletes")) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q;
            if (!bson::subDocument(u.get(), "q", &q)) q = empty;
            const bson::Doc options = matchOptionsOf(f, u.get());
            st = co_await prepareInTxn(p, &q, options.get(), std::nullopt, &pins, &needs);
            if (!st.isOK()) break;
        }
    } else if (isWriteCommand(name)) {  // findAndModify
        bson_t q;
        if (!f.subDocument("query", &q)) q = empty;
        const bson::Doc options = matchOptionsOf(f);
        if (truthy(f, "remove")) st = removeProjection(cmd).getStatus();
        if (st.isOK())
            st = co_await prepareInTxn(p, &q, options.get(), std::nullopt, &pins, &needs);
    }
    // After the first statement the snapshot is taken: what was promoted
    // since is not in it (CONSISTENCY.md, Transactions).
    if (st.isOK() && !first)
        for (auto& n : needs) {
            st = co_await snapshotHolds(p_.tiers(), txn.runner(), p.ns, n.ids, n.range);
            if (!st.isOK()) break;
        }
    bson::Doc out;
    if (!st.isOK()) {
        out = txnErrorDoc(st);
    } else if (name == "delete") {
        // Deletes leave their tombstones in the same transaction.
        int64_t n = 0;
        for (auto stmt : statements(msg, f, "deletes")) {
            bson::View u(stmt.data(), stmt.size());
            bson_t q;
            if (!bson::subDocument(u.get(), "q", &q)) q = empty;
            const bson::Doc options = matchOptionsOf(f, u.get());
            bson_iter_t it;
            int64_t limit = 0;
            if (bson_iter_init_find(&it, u.get(), "limit")) limit = bson_iter_as_int64(&it);
            auto r = co_await deleteAndTombstone(txn.runner(), p_.tiers().meta, p.ns, &q,
                                                 limit == 1 ? 1 : 0, nullptr, options.get());
            if (!r.isOK()) {
                st = r.getStatus();
                break;
            }
            n += r.getValue().n;
        }
        if (st.isOK()) {
            BSON_APPEND_INT32(out.mut(), "n", static_cast<int32_t>(n));
            BSON_APPEND_DOUBLE(out.mut(), "ok", 1.0);
            appendClock(out.mut(), p_.state().fastClusterTime.load());
        } else {
            out = txnErrorDoc(st);
        }
    } else if ((name == "findAndModify" || name == "findandmodify") && truthy(f, "remove")) {
        bson_t q, sort;
        if (!f.subDocument("query", &q)) q = empty;
        bool sorted = f.subDocument("sort", &sort);
        const bson::Doc options = matchOptionsOf(f);
        auto r = co_await deleteAndTombstone(txn.runner(), p_.tiers().meta, p.ns, &q, 1,
                                             sorted ? &sort : nullptr, options.get());
        st = r.getStatus();
        auto projection = removeProjection(cmd);  // checked before the statement ran
        out = r.isOK() ? removeReply(r.getValue(), projection.getValue()) : txnErrorDoc(st);
    } else {
        bson::Doc body = forwardBody(cmd, false);
        out = co_await forward(p_.fast(), msg, body.get(), p.ns, false);
    }
    release(pins);
    // A statement that fails ends the transaction, as on mongod.
    if (!st.isOK() && (!first || txn.started())) co_await txn.abort();
    co_return out;
}

asio::awaitable<bson::Doc> ClientConnection::endTransaction(const wire::OpMsg& msg,
                                                            const bson_t* cmd) {
    // The tier that runs it: as this proxy saw it start, else as the token
    // the driver kept from another proxy (or this one before a restart) says.
    std::optional<TxnTable::Entry> e;
    if (auto k = txnKeyOf(cmd)) e = p_.transactions().find(*k);
    bool fast = e && e->side == TxnSide::Fast;
    bson_t token;
    if (!e && bson::subDocument(cmd, "recoveryToken", &token))
        fast = str(&token, "recoveryShardId") == p_.fast().name();
    Tier& tier = fast ? p_.fast() : p_.archive();
    bson::Doc body = forwardBody(cmd, !fast);
    co_return co_await forward(tier, msg, body.get(), std::string(), false);
}

}  // namespace halo::tiering
