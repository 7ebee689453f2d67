#include "tiering/router.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <ctime>
#include <limits>

#include "common/clock.h"

namespace halo::tiering {

std::string_view routeName(Route r) {
    switch (r) {
        case Route::Fast:
            return "fast";
        case Route::Archive:
            return "archive";
        case Route::FastThenArchive:
            return "fast-then-archive";
        case Route::Refuse:
            return "refused";
    }
    return "archive";
}

int64_t nowMillis() {
    return wallMillis();
}

std::string isoDate(int64_t ms) {
    int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
    int64_t milli = ms - secs * 1000;
    std::time_t t = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z", tm, milli);
}

namespace {

/// The age in ms a value stands for, if it can be an age of this policy.
std::optional<int64_t> ageOf(const bson_value_t& v, const CollectionPolicy& p) {
    if (p.ageField == "_id") {
        if (v.value_type != BSON_TYPE_OID) return std::nullopt;
        return static_cast<int64_t>(bson_oid_get_time_t(&v.value.v_oid)) * 1000;
    }
    if (v.value_type != BSON_TYPE_DATE_TIME) return std::nullopt;
    return v.value.v_datetime;
}

bool isOperatorDoc(const bson_iter_t& it) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return false;
    bson_iter_t sub;
    bson_iter_recurse(&it, &sub);
    return bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$';
}

void better(std::optional<AgeBound>& best, AgeBound b) {
    if (!best || b.ms > best->ms || (b.ms == best->ms && b.strict && !best->strict)) best = b;
}

}  // namespace

std::optional<AgeBound> ageLowerBound(const bson_t* filter, const CollectionPolicy& p) {
    std::optional<AgeBound> best;
    bson_iter_t it;
    if (!filter || !bson_iter_init(&it, filter)) return best;
    while (bson_iter_next(&it)) {
        std::string_view key = bson_iter_key(&it);
        if (key == "$and" && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t arr;
            bson_iter_recurse(&it, &arr);
            while (bson_iter_next(&arr)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&arr)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_document(&arr, &len, &data);
                bson::View v(data, len);
                if (auto b = ageLowerBound(v.get(), p)) better(best, *b);
            }
            continue;
        }
        if (key != p.ageField) continue;
        if (!isOperatorDoc(it)) {
            if (auto ms = ageOf(*bson_iter_value(&it), p)) better(best, {*ms, false});
            continue;
        }
        bson_iter_t ops;
        bson_iter_recurse(&it, &ops);
        while (bson_iter_next(&ops)) {
            std::string_view op = bson_iter_key(&ops);
            if (op == "$gt" || op == "$gte" || op == "$eq") {
                if (auto ms = ageOf(*bson_iter_value(&ops), p)) better(best, {*ms, op == "$gt"});
            } else if (op == "$in" && BSON_ITER_HOLDS_ARRAY(&ops)) {
                bson_iter_t vals;
                bson_iter_recurse(&ops, &vals);
                std::optional<int64_t> lo;
                bool all = true, any = false;
                while (bson_iter_next(&vals)) {
                    any = true;
                    auto ms = ageOf(*bson_iter_value(&vals), p);
                    if (!ms) {
                        all = false;
                        break;
                    }
                    lo = lo ? std::min(*lo, *ms) : *ms;
                }
                if (all && any) better(best, {*lo, false});
            }
        }
    }
    return best;
}

std::optional<Id> exactId(const bson_t* filter) {
    bson_iter_t it;
    if (!filter || !bson_iter_init_find(&it, filter, "_id")) return std::nullopt;
    if (BSON_ITER_HOLDS_REGEX(&it) || BSON_ITER_HOLDS_ARRAY(&it)) return std::nullopt;
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t sub;
        bson_iter_recurse(&it, &sub);
        if (bson_iter_next(&sub) && bson_iter_key(&sub)[0] == '$') {
            if (std::string_view(bson_iter_key(&sub)) == "$eq" && !bson_iter_next(&sub)) {
                bson_iter_recurse(&it, &sub);
                bson_iter_next(&sub);
                if (BSON_ITER_HOLDS_REGEX(&sub) || BSON_ITER_HOLDS_ARRAY(&sub)) return std::nullopt;
                return makeId(*bson_iter_value(&sub));
            }
            return std::nullopt;
        }
    }
    return makeId(*bson_iter_value(&it));
}

int64_t Router::fastLowMs(const CollectionPolicy& p) const {
    auto* prog = state_.progress(p.ns);
    if (!prog) return std::numeric_limits<int64_t>::max();
    int64_t warm = prog->warmLowMs.load();
    int64_t evict = nowMillis() - p.horizon.count() + cfg_.clockSkewGuard.count();
    return std::max(warm, evict);
}

namespace {

bool stageReadsOtherCollection(std::string_view stage) {
    return stage == "$lookup" || stage == "$graphLookup" || stage == "$unionWith" ||
           stage == "$out" || stage == "$merge";
}

}  // namespace

std::string otherCollectionStage(const bson_t* cmd) {
    bson_t pipeline;
    bson_iter_t it, st;
    if (!bson::subDocument(cmd, "pipeline", &pipeline) || !bson_iter_init(&it, &pipeline))
        return {};
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &st) && bson_iter_next(&st) &&
            stageReadsOtherCollection(bson_iter_key(&st)))
            return bson_iter_key(&st);
    return {};
}

std::string writeStageTarget(const bson_t* cmd, const std::string& db) {
    bson_t pipeline;
    bson_iter_t it, st;
    if (!bson::subDocument(cmd, "pipeline", &pipeline) || !bson_iter_init(&it, &pipeline))
        return {};
    // {$out: "c"} or {$out: {db, coll}}; {$merge: "c"} or {$merge: {into: "c" | {db, coll}}}.
    auto named = [&](const bson_iter_t& v) -> std::string {
        if (BSON_ITER_HOLDS_UTF8(&v)) return db + "." + bson_iter_utf8(&v, nullptr);
        bson_t spec;
        if (!bson::subDocumentAt(v, &spec)) return {};
        std::string d = bson::stringField(&spec, "db");
        return (d.empty() ? db : d) + "." + bson::stringField(&spec, "coll");
    };
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            continue;
        std::string_view stage = bson_iter_key(&st);
        if (stage == "$out") return named(st);
        if (stage != "$merge") continue;
        bson_t spec;
        bson_iter_t into;
        if (!bson::subDocumentAt(st, &spec)) return named(st);
        if (bson_iter_init_find(&into, &spec, "into")) return named(into);
    }
    return {};
}

bool readFilter(std::string_view cmdName, const bson_t* cmd, bson_t* filter) {
    if (cmdName == "find") return bson::subDocument(cmd, "filter", filter);
    if (cmdName == "count" || cmdName == "distinct") return bson::subDocument(cmd, "query", filter);
    if (cmdName != "aggregate") return false;
    bson_t pipeline;
    bson_iter_t it, st;
    if (!bson::subDocument(cmd, "pipeline", &pipeline) || !bson_iter_init(&it, &pipeline) ||
        !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) ||
        !bson_iter_next(&st) || std::string_view(bson_iter_key(&st)) != "$match" ||
        !BSON_ITER_HOLDS_DOCUMENT(&st))
        return false;
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&st, &len, &data);
    return bson_init_static(filter, data, len);
}

Decision Router::routeRead(const CollectionPolicy& p, std::string_view cmdName,
                           const bson_t* cmd) const {
    Decision d;
    bson_t filter;
    bool haveFilter = false;
    if (cmdName == "find") {
        haveFilter = bson::subDocument(cmd, "filter", &filter);
    } else if (cmdName == "count" || cmdName == "distinct") {
        haveFilter = bson::subDocument(cmd, "query", &filter);
    } else if (cmdName == "aggregate") {
        bson_t pipeline;
        if (bson::subDocument(cmd, "pipeline", &pipeline)) {
            bson_iter_t it;
            bson_iter_init(&it, &pipeline);
            bool first = true;
            while (bson_iter_next(&it)) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
                bson_iter_t st;
                bson_iter_recurse(&it, &st);
                if (!bson_iter_next(&st)) continue;
                std::string_view stage = bson_iter_key(&st);
                if (stage == "$changeStream" && p.changeStreams) {
                    d.route = Route::Fast;
                    d.reason = "change stream: the fast tier's, without the protocol's own writes";
                    return d;
                }
                if (stage == "$changeStream") {
                    d.route = Route::Refuse;
                    d.refusal = Status(ErrorCode::CommandNotSupported,
                                       fmt::format("halocline: change streams on the tiered "
                                                   "collection {} are not enabled: set "
                                                   "changeStreams: true in its "
                                                   "tiering.collections entry (its writes then "
                                                   "never run in the archive, so the fast "
                                                   "tier's stream sees them all; "
                                                   "docs/OPERATIONS.md)",
                                                   p.ns));
                    d.reason = "change stream on a tiered collection";
                    return d;
                }
                if (stage == "$out" || stage == "$merge") {
                    // Into an untiered collection (the proxy refuses a tiered
                    // target): the archive holds the whole source once the
                    // feeder applied every write acknowledged before it.
                    d.route = Route::Archive;
                    d.reason = fmt::format(
                        "{} runs in the archive, which holds the whole "
                        "collection once the feeder caught up",
                        stage);
                    return d;
                }
                if (stageReadsOtherCollection(stage)) {
                    d.route = Route::Archive;
                    d.reason = fmt::format("{} reads another collection", stage);
                    return d;
                }
                if (first && stage == "$match" && BSON_ITER_HOLDS_DOCUMENT(&st)) {
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&st, &len, &data);
                    bson_init_static(&filter, data, len);
                    haveFilter = true;
                }
                first = false;
            }
        }
    }
    // A policy that cannot work on this data says so in every reason it causes.
    auto withProblem = [&](std::string reason) {
        if (const auto* pr = state_.progress(p.ns)) {
            std::string problem = pr->policyProblem();
            if (!problem.empty()) reason += "; the policy cannot work as configured: " + problem;
        }
        return reason;
    };
    if (!haveFilter) {
        d.route = Route::Archive;
        d.reason = withProblem("no filter on the age field");
        return d;
    }
    if (cmdName == "find") {
        if (auto id = exactId(&filter)) {
            d.route = Route::FastThenArchive;
            d.reason = "exact _id lookup: the fast tier answers when it holds the document";
            d.lookupId = std::move(id);
            return d;
        }
    }
    auto bound = ageLowerBound(&filter, p);
    if (!bound) {
        d.route = Route::Archive;
        d.reason = withProblem(fmt::format("the filter does not bound {} from below", p.ageField));
        return d;
    }
    int64_t low = fastLowMs(p);
    bool proven = bound->strict ? bound->ms >= low : bound->ms > low;
    if (low == std::numeric_limits<int64_t>::max()) proven = false;
    if (proven) {
        d.route = Route::Fast;
        d.reason = fmt::format(
            "the filter bounds {} from below by {}; the fast tier holds every document above {}",
            p.ageField, isoDate(bound->ms), isoDate(low));
    } else {
        d.route = Route::Archive;
        d.reason = low == std::numeric_limits<int64_t>::max()
                       ? withProblem("the fast tier has not proven any range yet (warming)")
                       : fmt::format(
                             "the bound on {} ({}) reaches below what the fast tier "
                             "provably holds (above {})",
                             p.ageField, isoDate(bound->ms), isoDate(low));
    }
    return d;
}

}  // namespace halo::tiering
