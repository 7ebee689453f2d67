#include "tiering/transactions.h"

#include <fmt/format.h>

#include <unordered_set>

namespace halo::tiering {

namespace {

constexpr std::chrono::minutes kIdleTxnLifetime{30};

Status arrivedSince(const std::string& ns, const std::string& what) {
    return Status(ErrorCode::WriteConflict,
                  fmt::format("halocline: {} of {} changed tier after this transaction's "
                              "snapshot was taken; retry the transaction",
                              what, ns));
}

}  // namespace

std::optional<TxnKey> txnKeyOf(const bson_t* cmd) {
    return txnKeyOf(bson::Fields(cmd));
}

std::optional<TxnKey> txnKeyOf(const bson::Fields& cmd) {
    bson_t lsid;
    bson_iter_t it, id;
    if (!cmd.has("autocommit") || !cmd.subDocument("lsid", &lsid) ||
        !bson_iter_init_find(&id, &lsid, "id") || !BSON_ITER_HOLDS_BINARY(&id) ||
        !cmd.find("txnNumber", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return std::nullopt;
    return TxnKey{bson::binaryBytes(id), bson_iter_as_int64(&it)};
}

std::optional<TxnTable::Entry> TxnTable::find(const TxnKey& k) {
    std::lock_guard lk(mu_);
    auto it = slots_.find(k.lsid);
    if (it == slots_.end() || it->second.txnNumber != k.txnNumber) return std::nullopt;
    return it->second.entry;
}

void TxnTable::put(const TxnKey& k, const Entry& e) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(mu_);
    slots_[k.lsid] = Slot{k.txnNumber, e, now};
    if (++puts_ % 1024 != 0) return;
    for (auto it = slots_.begin(); it != slots_.end();)
        it = now - it->second.used > kIdleTxnLifetime ? slots_.erase(it) : std::next(it);
}

ClientTxn::ClientTxn(Tier& fast, const bson_t* clientCmd) : fast_(fast) {
    bson_t lsid, rc;
    bson_iter_t it;
    if (bson::subDocument(clientCmd, "lsid", &lsid)) lsid_ = bson::Doc::copyOf(&lsid);
    if (bson_iter_init_find(&it, clientCmd, "txnNumber")) txnNumber_ = bson_iter_as_int64(&it);
    startPending_ = truthy(clientCmd, "startTransaction");
    if (startPending_ && bson::subDocument(clientCmd, "readConcern", &rc))
        readConcern_ = bson::Doc::copyOf(&rc);
}

asio::awaitable<StatusWith<bson::Doc>> ClientTxn::run(const bson_t* cmd) {
    bson::Doc c = bson::Doc::copyOf(cmd);
    BSON_APPEND_DOCUMENT(c.mut(), "lsid", lsid_.get());
    BSON_APPEND_INT64(c.mut(), "txnNumber", txnNumber_);
    BSON_APPEND_BOOL(c.mut(), "autocommit", false);
    if (startPending_) {
        BSON_APPEND_BOOL(c.mut(), "startTransaction", true);
        if (readConcern_) BSON_APPEND_DOCUMENT(c.mut(), "readConcern", readConcern_->get());
        startPending_ = false;
        started_ = true;
    }
    co_return co_await fast_.runOk(c.get());
}

CommandRunner ClientTxn::runner() {
    return [this](const bson_t* c) { return run(c); };
}

asio::awaitable<void> ClientTxn::abort() {
    bson::Doc c;
    BSON_APPEND_INT32(c.mut(), "abortTransaction", 1);
    BSON_APPEND_DOCUMENT(c.mut(), "lsid", lsid_.get());
    BSON_APPEND_INT64(c.mut(), "txnNumber", txnNumber_);
    BSON_APPEND_BOOL(c.mut(), "autocommit", false);
    BSON_APPEND_UTF8(c.mut(), "$db", "admin");
    (void)co_await fast_.runOk(c.get());
}

asio::awaitable<Status> snapshotHolds(Tiers& t, const CommandRunner& atSnapshot,
                                      const std::string& ns, const std::vector<Id>& candidates,
                                      bool range) {
    bool coldCheck = range;
    if (!candidates.empty()) {
        // At the snapshot: present, or tombstoned (a guard or a mark means
        // the archive held the document then).
        auto present = co_await presentInWith(atSnapshot, ns, candidates);
        if (!present.isOK()) co_return present.getStatus();
        auto keys = co_await keyStatesWith(atSnapshot, t.meta, ns, candidates);
        if (!keys.isOK()) co_return keys.getStatus();
        std::vector<Id> missing;
        for (size_t i = 0; i < candidates.size(); ++i)
            if (!present.getValue()[i] && !keys.getValue().dead[i])
                missing.push_back(candidates[i].copy());
        if (!missing.empty()) {
            auto now = co_await presentIn(t, ns, missing);
            if (!now.isOK()) co_return now.getStatus();
            for (size_t i = 0; i < missing.size(); ++i)
                if (now.getValue()[i]) co_return arrivedSince(ns, "a document it reads");
            // Nowhere now: new, unless a cold write deleted it since.
            coldCheck = true;
        }
    }
    if (coldCheck) {
        auto then = co_await readEpochWith(atSnapshot, t.meta, ns);
        if (!then.isOK()) co_return then.getStatus();
        auto now = co_await readEpoch(t, ns);
        if (!now.isOK()) co_return now.getStatus();
        if (now.getValue().cold != then.getValue().cold)
            co_return arrivedSince(ns, "a document written in the archive");
    }
    co_return Status::OK();
}

bool transientInTransaction(const Status& s) {
    return s.code() == ErrorCode::WriteConflict || s.code() == ErrorCode::NoSuchTransaction ||
           unanswered(s);
}

}  // namespace halo::tiering
