#include "tiering/change_events.h"

#include <cstring>

namespace halo::tiering {

namespace {

int hexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string utf8Field(const bson_t* d, const char* path) {
    bson_iter_t it;
    if (bson::findDotted(d, path, &it) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

}  // namespace

std::optional<OpTime> resumeTokenTime(const bson_t* token) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, token, "_data") || !BSON_ITER_HOLDS_UTF8(&it))
        return std::nullopt;
    uint32_t len = 0;
    const char* data = bson_iter_utf8(&it, &len);
    if (len < 18 || data[0] != '8' || data[1] != '2') return std::nullopt;
    OpTime t = 0;
    for (int i = 2; i < 18; ++i) {
        int d = hexDigit(data[i]);
        if (d < 0) return std::nullopt;
        t = (t << 4) | static_cast<OpTime>(d);
    }
    return t;
}

std::optional<OpTime> timestampValue(const bson_iter_t* it) {
    if (!BSON_ITER_HOLDS_TIMESTAMP(it)) return std::nullopt;
    uint32_t secs = 0, inc = 0;
    bson_iter_timestamp(it, &secs, &inc);
    return (static_cast<OpTime>(secs) << 32) | inc;
}

std::string idKey(const Id& id) {
    return std::string(reinterpret_cast<const char*>(id.data()), id.size());
}

TouchedIds ChangeBatchClassifier::classify(const std::vector<bson::Doc>& events) {
    TouchedIds out;
    std::map<std::string, std::set<std::string>> seen;
    auto touch = [&](const std::string& ns, Id id) {
        if (seen[ns].insert(idKey(id)).second) out.byNs[ns].push_back(std::move(id));
    };
    for (const auto& ev : events) {
        ++out.events;
        const bson_t* e = ev.get();
        bson_iter_t it;
        OpTime time = 0;
        if (bson_iter_init_find(&it, e, "clusterTime"))
            if (auto t = timestampValue(&it)) time = *t;
        if (bson_iter_init_find(&it, e, "wallTime") && BSON_ITER_HOLDS_DATE_TIME(&it))
            out.lastWallMs = bson_iter_date_time(&it);
        out.lastTime = time;
        if (time != guardTime_) {
            guards_.clear();
            guardTime_ = time;
        }
        std::string op = utf8Field(e, "operationType");
        std::string ns = utf8Field(e, "ns.db") + "." + utf8Field(e, "ns.coll");
        bson_iter_t key;
        if (!bson::findDotted(e, "documentKey._id", &key)) continue;
        if (ns == stateNs_) {
            if (BSON_ITER_HOLDS_UTF8(&key) &&
                std::string_view(bson_iter_utf8(&key, nullptr)) == Metadata::kFeederDemand)
                out.demanded = true;
            continue;
        }
        if (ns == tombstonesNs_) {
            // Removing a tombstone (the feeder's own cleanup, or a promotion's
            // guard) changes no document.
            if (op != "insert" && op != "update" && op != "replace") continue;
            // A tombstone's _id is {ns, id}: it names the document it is about.
            if (!BSON_ITER_HOLDS_DOCUMENT(&key)) continue;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&key, &len, &data);
            bson::View k(data, len);
            std::string target = utf8Field(k.get(), "ns");
            bson_iter_t idIt;
            if (target.empty() || !bson_iter_init_find(&idIt, k.get(), "id")) continue;
            Id id = makeId(*bson_iter_value(&idIt));
            bson_iter_t promote;
            if (op == "insert" && bson::findDotted(e, "fullDocument.promote", &promote) &&
                bson_iter_as_bool(&promote)) {
                // A promotion guard: inserted and removed in the promotion's transaction.
                guards_.insert(target + '\0' + idKey(id));
                continue;
            }
            if (tiered_.count(target)) touch(target, std::move(id));
            continue;
        }
        if (!tiered_.count(ns)) continue;
        if (op != "insert" && op != "update" && op != "replace" && op != "delete") continue;
        Id id = makeId(*bson_iter_value(&key));
        if (op == "insert" && guards_.count(ns + '\0' + idKey(id))) {
            ++out.promotionsSkipped;
            out.promoted.emplace_back(ns, std::move(id));
            continue;
        }
        touch(ns, std::move(id));
    }
    return out;
}

std::optional<int64_t> ageMillis(const bson_value_t& v) {
    if (v.value_type == BSON_TYPE_DATE_TIME) return v.value.v_datetime;
    if (v.value_type == BSON_TYPE_OID)
        return static_cast<int64_t>(bson_oid_get_time_t(&v.value.v_oid)) * 1000;
    return std::nullopt;
}

void appendAgeBound(bson_t* out, const char* key, bool idIsAge, int64_t ms) {
    if (!idIsAge) {
        BSON_APPEND_DATE_TIME(out, key, ms);
        return;
    }
    int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    if (secs < 0) secs = 0;
    if (secs > 0xffffffffLL) secs = 0xffffffffLL;
    bson_oid_t oid;
    std::memset(oid.bytes, 0, sizeof oid.bytes);
    uint32_t s = static_cast<uint32_t>(secs);
    oid.bytes[0] = static_cast<uint8_t>(s >> 24);
    oid.bytes[1] = static_cast<uint8_t>(s >> 16);
    oid.bytes[2] = static_cast<uint8_t>(s >> 8);
    oid.bytes[3] = static_cast<uint8_t>(s);
    BSON_APPEND_OID(out, key, &oid);
}

OpTime appliedTimeOfBatch(OpTime tokenTime, bool endedOnEvent) {
    if (!endedOnEvent || tokenTime == 0) return tokenTime;
    return tokenTime - 1;
}

}  // namespace halo::tiering
