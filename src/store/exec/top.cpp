#include "store/exec/top.h"

#include <bit>
#include <mutex>

namespace halo::store {

void Top::classify(std::string_view name, Kind* kind, Access* access) {
    *kind = name == "find"      ? Kind::kQuery
            : name == "getMore" ? Kind::kGetMore
            : name == "insert"  ? Kind::kInsert
            : name == "update"  ? Kind::kUpdate
            : name == "delete"  ? Kind::kRemove
                                : Kind::kCommand;
    if (name == "find" || name == "getMore" || name == "aggregate" || name == "count" ||
        name == "distinct")
        *access = Access::kRead;
    else if (name == "insert" || name == "update" || name == "delete" || name == "findAndModify" ||
             name == "findandmodify")
        *access = Access::kWrite;
    else
        *access = Access::kCommand;
}

std::shared_ptr<Top::Usage> Top::usage(const std::string& ns) {
    {
        std::shared_lock lk(mu_);
        auto it = table_.find(ns);
        if (it != table_.end()) return it->second;
    }
    std::unique_lock lk(mu_);
    auto& slot = table_[ns];
    if (!slot) slot = std::make_shared<Usage>();
    return slot;
}

void Top::record(const std::string& ns, Kind kind, Access access, int64_t micros) {
    auto entry = usage(ns);
    Usage& u = *entry;
    auto add = [micros](Counter& c) {
        c.time += micros;
        ++c.count;
    };
    add(u.total);
    if (access == Access::kRead) add(u.readLock);
    if (access == Access::kWrite) add(u.writeLock);
    add(u.byKind[static_cast<size_t>(kind)]);
    Latency& l = u.latency[static_cast<size_t>(access)];
    l.micros += micros;
    ++l.ops;
    int bucket = micros < 2 ? 0 : std::bit_width(static_cast<uint64_t>(micros)) - 1;
    ++l.histogram[std::min(bucket, kBuckets - 1)];
}

void Top::collectionDropped(const std::string& ns) {
    std::unique_lock lk(mu_);
    table_.erase(ns);
}

void Top::appendTotals(bson_t* totals) const {
    std::shared_lock lk(mu_);
    auto append = [](bson_t* parent, const char* key, const Counter& c) {
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(parent, key, &d);
        BSON_APPEND_INT64(&d, "time", c.time.load());
        BSON_APPEND_INT64(&d, "count", c.count.load());
        bson_append_document_end(parent, &d);
    };
    static constexpr const char* kKinds[] = {"queries", "getmore", "insert",
                                             "update",  "remove",  "commands"};
    for (const auto& [ns, u] : table_) {
        bson_t e;
        BSON_APPEND_DOCUMENT_BEGIN(totals, ns.c_str(), &e);
        append(&e, "total", u->total);
        append(&e, "readLock", u->readLock);
        append(&e, "writeLock", u->writeLock);
        for (size_t i = 0; i < u->byKind.size(); ++i) append(&e, kKinds[i], u->byKind[i]);
        bson_append_document_end(totals, &e);
    }
}

void Top::appendLatencyStats(const std::string& ns, bool histograms, bson_t* out) const {
    std::shared_lock lk(mu_);
    auto it = table_.find(ns);
    static constexpr const char* kClasses[] = {"reads", "writes", "commands", "transactions"};
    for (size_t i = 0; i < 4; ++i) {
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(out, kClasses[i], &d);
        const Latency* l = it != table_.end() && i < 3 ? &it->second->latency[i] : nullptr;
        if (histograms) {
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(&d, "histogram", &arr);
            int n = 0;
            for (int b = 0; l && b < kBuckets; ++b) {
                int64_t count = l->histogram[b].load();
                if (count == 0) continue;
                bson_t e;
                std::string key = std::to_string(n++);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, key.c_str(), &e);
                BSON_APPEND_INT64(&e, "micros", b == 0 ? 0 : int64_t{1} << b);
                BSON_APPEND_INT64(&e, "count", count);
                bson_append_document_end(&arr, &e);
            }
            bson_append_array_end(&d, &arr);
        }
        BSON_APPEND_INT64(&d, "latency", l ? l->micros.load() : 0);
        BSON_APPEND_INT64(&d, "ops", l ? l->ops.load() : 0);
        bson_append_document_end(out, &d);
    }
}

}  // namespace halo::store
