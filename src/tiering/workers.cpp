#include "tiering/workers.h"

namespace halo::tiering {

asio::awaitable<Status> ensureSetup(const ProxyConfig& cfg, Tiers& t) {
    auto create = [&](const std::string& db, const std::string& coll) -> asio::awaitable<Status> {
        bson::Doc c;
        BSON_APPEND_UTF8(c.mut(), "create", coll.c_str());
        BSON_APPEND_UTF8(c.mut(), "$db", db.c_str());
        auto r = co_await t.fast.runOk(c.get());
        if (!r.isOK() && r.getStatus().code() != ErrorCode::NamespaceExists)
            co_return r.getStatus();
        co_return Status::OK();
    };
    for (const char* m : {Metadata::kTombstones, Metadata::kState}) {
        Status s = co_await create(t.meta.db, m);
        if (!s.isOK()) co_return s;
    }
    for (const auto& p : cfg.collections) {
        auto [db, coll] = splitNs(p.ns);
        Status s = co_await create(db, coll);
        if (!s.isOK()) co_return s;
    }
    co_return Status::OK();
}

}  // namespace halo::tiering
