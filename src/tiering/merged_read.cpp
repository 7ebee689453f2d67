#include "tiering/merged_read.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "bson/compare.h"
#include "bson/doc.h"

namespace halo::tiering {

namespace {

/// A reply larger than this is not assembled in the proxy (mongod's limit for
/// one document is the same order; a cursor batch holds at most 16 MB).
constexpr size_t kMaxMergedBytes = 16 * 1024 * 1024;
/// Departures during the read start it again at most this often.
constexpr int kEpochAttempts = 4;
/// Rounds of reading further into the archive when the fast tier holds newer
/// versions of most of the archive's first matches.
constexpr int kArchiveRounds = 4;

bool positiveInteger(const bson_iter_t& it, int64_t* out, bool allowZero) {
    if (!BSON_ITER_HOLDS_NUMBER(&it)) return false;
    double d = bson_iter_as_double(&it);
    int64_t v = bson_iter_as_int64(&it);
    if (static_cast<double>(v) != d) return false;
    if (v < 0 || (v == 0 && !allowZero)) return false;
    *out = v;
    return true;
}

/// True for a {$natural: ...} sort or hint: the tiers' storage orders differ.
bool namesNatural(const bson_iter_t& it) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return false;
    uint32_t len;
    const uint8_t* data;
    bson_iter_document(&it, &len, &data);
    bson::View v(data, len);
    return bson_has_field(v.get(), "$natural");
}

/// {find, filter, sort, limit: n, batchSize: n, hint/comment/maxTimeMS, readConcern, $db}.
bson::Doc findCommand(const MergedFind& q, int64_t n, bool forFast) {
    bson::Doc c;
    BSON_APPEND_UTF8(c.mut(), "find", q.coll.c_str());
    BSON_APPEND_DOCUMENT(c.mut(), "filter", q.filter.get());
    if (!bson_empty(q.sortSpec.get())) BSON_APPEND_DOCUMENT(c.mut(), "sort", q.sortSpec.get());
    BSON_APPEND_INT64(c.mut(), "limit", n);
    BSON_APPEND_INT64(c.mut(), "batchSize", n);
    bson_iter_t it;
    bson_iter_init(&it, q.passThrough.get());
    while (bson_iter_next(&it)) bson_append_iter(c.mut(), nullptr, 0, &it);
    if (!bson_empty(q.readConcern.get())) {
        bson_t rc;
        BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "readConcern", &rc);
        bson_iter_init(&it, q.readConcern.get());
        while (bson_iter_next(&it)) {
            // The archive has its own clock; the fast tier's reads carry the
            // client's causal wait (its writes all landed there).
            if (!forFast && std::string_view(bson_iter_key(&it)) == "afterClusterTime") continue;
            bson_append_iter(&rc, nullptr, 0, &it);
        }
        bson_append_document_end(c.mut(), &rc);
    }
    BSON_APPEND_UTF8(c.mut(), "$db", q.db.c_str());
    return c;
}

Status fallback() {
    return Status(ErrorCode::OperationFailed, kMergedFallback);
}

}  // namespace

std::optional<MergedFind> planMergedFind(const bson_t* cmd, const std::string& db,
                                         int64_t maxDocs) {
    if (maxDocs <= 0) return std::nullopt;
    MergedFind q;
    q.db = db;
    bool hasLimit = false;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "find") {
            if (!BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;
            q.coll = bson_iter_utf8(&it, nullptr);
        } else if (k == "filter" || k == "sort" || k == "projection") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
            if (k == "sort" && namesNatural(it)) return std::nullopt;
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&it, &len, &data);
            bson::Doc d = bson::Doc::copyOf(data, len);
            if (k == "filter") {
                q.filter = std::move(d);
            } else if (k == "sort") {
                q.sortSpec = std::move(d);
            } else {
                q.projectionSpec = std::move(d);
            }
        } else if (k == "limit") {
            if (!positiveInteger(it, &q.limit, false)) return std::nullopt;
            hasLimit = true;
        } else if (k == "skip") {
            if (!positiveInteger(it, &q.skip, true)) return std::nullopt;
        } else if (k == "hint") {
            if (namesNatural(it)) return std::nullopt;
            bson_append_iter(q.passThrough.mut(), nullptr, 0, &it);
        } else if (k == "comment" || k == "maxTimeMS") {
            bson_append_iter(q.passThrough.mut(), nullptr, 0, &it);
        } else if (k == "readConcern") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
            bson_iter_t rc;
            bson_iter_recurse(&it, &rc);
            while (bson_iter_next(&rc)) {
                std::string_view rk = bson_iter_key(&rc);
                if (rk == "level") {
                    std::string_view level =
                        BSON_ITER_HOLDS_UTF8(&rc) ? bson_iter_utf8(&rc, nullptr) : "";
                    if (level != "local" && level != "majority" && level != "available")
                        return std::nullopt;
                } else if (rk != "afterClusterTime") {
                    return std::nullopt;
                }
                bson_append_iter(q.readConcern.mut(), nullptr, 0, &rc);
            }
        } else if (k == "batchSize" || k == "singleBatch" || k == "$db" || k == "lsid" ||
                   k == "$clusterTime" || k == "$readPreference" || k == "apiVersion" ||
                   k == "apiStrict" || k == "apiDeprecationErrors" || k == "allowDiskUse") {
            continue;
        } else {
            return std::nullopt;  // collation, let, min, max, a transaction, ...
        }
    }
    if (!hasLimit || q.coll.empty() || q.skip > maxDocs - q.limit) return std::nullopt;
    auto m = query::Matcher::parse(q.filter.get());
    if (!m.isOK()) return std::nullopt;
    q.matcher = std::move(m.getValue());
    if (!bson_empty(q.sortSpec.get())) {
        auto s = query::SortPattern::parse(q.sortSpec.get());
        if (!s.isOK()) return std::nullopt;
        q.sort.emplace(std::move(s.getValue()));
    }
    if (!bson_empty(q.projectionSpec.get())) {
        auto p = query::Projection::parse(q.projectionSpec.get(), q.matcher.get());
        if (!p.isOK()) return std::nullopt;
        q.projection.emplace(std::move(p.getValue()));
    }
    return q;
}

namespace {

/// The options of a read command a merged find passes through to both tiers.
bool passThroughOption(std::string_view k) {
    return k == "hint" || k == "comment" || k == "maxTimeMS" || k == "readConcern" || k == "$db" ||
           k == "lsid" || k == "$clusterTime" || k == "$readPreference" || k == "apiVersion" ||
           k == "apiStrict" || k == "apiDeprecationErrors";
}

void appendProjection(bson_t* find, const char* field) {
    bson_t proj;
    BSON_APPEND_DOCUMENT_BEGIN(find, "projection", &proj);
    BSON_APPEND_INT32(&proj, field, 1);
    bson_append_document_end(find, &proj);
}

/// A count as mongod appends one: int32 when it fits.
void appendCount(bson_t* out, const char* key, int64_t n) {
    if (n <= std::numeric_limits<int32_t>::max())
        BSON_APPEND_INT32(out, key, static_cast<int32_t>(n));
    else
        BSON_APPEND_INT64(out, key, n);
}

/// A field name an aggregate stage outputs: non-empty, no '$' prefix, no dot.
bool plainFieldName(std::string_view f) {
    return !f.empty() && f[0] != '$' && f.find('.') == std::string_view::npos;
}

/// A distinct key the merged read collects like the store does: dotted field
/// names, none empty or all digits (a projection and distinct treat array
/// positions differently), no '$' prefix.
bool plainDistinctKey(std::string_view key) {
    if (key.empty() || key[0] == '$') return false;
    size_t start = 0;
    for (;;) {
        size_t dot = key.find('.', start);
        std::string_view part =
            key.substr(start, dot == std::string_view::npos ? dot : dot - start);
        if (part.empty() || std::all_of(part.begin(), part.end(), ::isdigit)) return false;
        if (dot == std::string_view::npos) return true;
        start = dot + 1;
    }
}

/// The find of a count's or distinct's matches (at most maxDocs + 1): `count`
/// or `distinct` names the collection, `query` is the filter.
std::optional<MergedShape> countOrDistinct(std::string_view name, const bson_t* cmd,
                                           int64_t maxDocs) {
    MergedShape s;
    s.answer = name == "count" ? MergedShape::Answer::Count : MergedShape::Answer::Distinct;
    s.bound = maxDocs + 1;
    bool keyed = false;
    bson_t* f = s.find.emplace().mut();
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == name) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;
            BSON_APPEND_UTF8(f, "find", bson_iter_utf8(&it, nullptr));
        } else if (k == "query") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
            bson_append_iter(f, "filter", 6, &it);
        } else if (name == "count" && (k == "skip" || k == "limit")) {
            if (!BSON_ITER_HOLDS_NUMBER(&it)) return std::nullopt;
            double v = bson_iter_as_double(&it);
            if (v != std::floor(v) || (k == "skip" && v < 0)) return std::nullopt;
            (k == "skip" ? s.window.skip : s.window.limit) = static_cast<int64_t>(std::fabs(v));
        } else if (name == "distinct" && k == "key") {
            if (!BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;
            s.field = bson_iter_utf8(&it, nullptr);
            keyed = true;
        } else if (passThroughOption(k)) {
            bson_append_iter(f, nullptr, 0, &it);
        } else {
            return std::nullopt;  // collation, a transaction, ...
        }
    }
    if (name == "distinct" && (!keyed || !plainDistinctKey(s.field))) return std::nullopt;
    appendProjection(f, name == "count" ? "_id" : s.field.c_str());
    BSON_APPEND_INT64(f, "limit", s.bound);
    return s;
}

/// {$group: {_id: <constant>, <field>: {$sum: 1}}}: a count (the drivers'
/// countDocuments ends in one).
bool countGroup(const bson_iter_t& stage, MergedShape* s) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&stage)) return false;
    bson_iter_t g;
    bson_iter_recurse(&stage, &g);
    bool haveId = false;
    while (bson_iter_next(&g)) {
        std::string_view k = bson_iter_key(&g);
        if (k == "_id") {
            if (BSON_ITER_HOLDS_DOCUMENT(&g) || BSON_ITER_HOLDS_ARRAY(&g)) return false;
            if (BSON_ITER_HOLDS_UTF8(&g) && bson_iter_utf8(&g, nullptr)[0] == '$') return false;
            bson_append_iter(s->groupId.emplace().mut(), "_id", 3, &g);
            haveId = true;
        } else {
            if (!s->field.empty() || !plainFieldName(k) || !BSON_ITER_HOLDS_DOCUMENT(&g))
                return false;
            bson_iter_t acc;
            bson_iter_recurse(&g, &acc);
            if (!bson_iter_next(&acc) || std::string_view(bson_iter_key(&acc)) != "$sum" ||
                !BSON_ITER_HOLDS_NUMBER(&acc) || bson_iter_as_double(&acc) != 1.0 ||
                bson_iter_next(&acc))
                return false;
            s->field = k;
        }
    }
    return haveId && !s->field.empty();
}

/// An aggregate of [$match][$sort][$skip][$limit][$project] in this order
/// (the stages a find has), or [$match][$skip][$limit] then $count or a count
/// $group: the find of its matches.
std::optional<MergedShape> aggregateShape(const bson_t* cmd, int64_t maxDocs) {
    MergedShape s;
    s.cursor = true;
    bson::Doc stages;  // the find's filter, sort, skip, limit, projection
    bson_t* f = s.find.emplace().mut();
    bool havePipeline = false;
    bson_iter_t it, pipeline;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "aggregate") {
            if (!BSON_ITER_HOLDS_UTF8(&it)) return std::nullopt;  // {aggregate: 1}
            BSON_APPEND_UTF8(f, "find", bson_iter_utf8(&it, nullptr));
        } else if (k == "pipeline") {
            if (!BSON_ITER_HOLDS_ARRAY(&it)) return std::nullopt;
            pipeline = it;
            havePipeline = true;
        } else if (k == "cursor") {
            // The merged answer is one batch, whatever its batchSize.
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
        } else if (k == "allowDiskUse") {
            continue;
        } else if (passThroughOption(k)) {
            bson_append_iter(f, nullptr, 0, &it);
        } else {
            return std::nullopt;  // explain, collation, let, a transaction, ...
        }
    }
    if (!havePipeline) return std::nullopt;
    enum Order { kMatch, kSort, kSkip, kLimit, kProject, kCount };
    int last = -1;
    bool hasLimit = false;
    bson_iter_t st;
    bson_iter_recurse(&pipeline, &st);
    while (bson_iter_next(&st)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&st)) return std::nullopt;
        bson_iter_t stage;
        bson_iter_recurse(&st, &stage);
        if (!bson_iter_next(&stage)) return std::nullopt;
        std::string_view name = bson_iter_key(&stage);
        int order = name == "$match"                       ? kMatch
                    : name == "$sort"                      ? kSort
                    : name == "$skip"                      ? kSkip
                    : name == "$limit"                     ? kLimit
                    : name == "$project"                   ? kProject
                    : name == "$count" || name == "$group" ? kCount
                                                           : -1;
        if (order <= last || (last < 0 && order != kMatch)) return std::nullopt;
        last = order;
        bson_iter_t value = stage;
        if (bson_iter_next(&stage)) return std::nullopt;  // two fields: not a stage
        int64_t n = 0;
        bson_t doc;
        switch (order) {
            case kMatch:
            case kSort:
            case kProject:
                if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return std::nullopt;
                if (order == kProject && bson::subDocumentAt(value, &doc) && bson_empty(&doc))
                    return std::nullopt;  // {$project: {}} is an error in mongod
                bson_append_iter(stages.mut(),
                                 order == kMatch  ? "filter"
                                 : order == kSort ? "sort"
                                                  : "projection",
                                 -1, &value);
                break;
            case kSkip:
            case kLimit:
                if (!positiveInteger(value, &n, order == kSkip)) return std::nullopt;
                (order == kSkip ? s.window.skip : s.window.limit) = n;
                hasLimit = hasLimit || order == kLimit;
                break;
            case kCount:
                s.answer = MergedShape::Answer::Count;
                if (name == "$count") {
                    if (!BSON_ITER_HOLDS_UTF8(&value) ||
                        !plainFieldName(bson_iter_utf8(&value, nullptr)))
                        return std::nullopt;
                    s.field = bson_iter_utf8(&value, nullptr);
                } else if (!countGroup(value, &s)) {
                    return std::nullopt;
                }
                break;
        }
    }
    if (last < 0) return std::nullopt;
    bson_iter_t sf;
    bson_iter_init(&sf, stages.get());
    const bool counting = s.answer == MergedShape::Answer::Count;
    while (bson_iter_next(&sf)) {
        std::string_view k = bson_iter_key(&sf);
        if (counting && k != "filter") continue;  // a count's order and shape do not matter
        bson_append_iter(f, nullptr, 0, &sf);
    }
    if (counting) {
        appendProjection(f, "_id");
        s.bound = maxDocs + 1;
    } else {
        if (s.window.skip) BSON_APPEND_INT64(f, "skip", s.window.skip);
        if (!hasLimit) {
            // Unlimited: read at most maxDocs (skipped ones included) and one more.
            if (s.window.skip > maxDocs) return std::nullopt;
            s.bound = maxDocs + 1 - s.window.skip;
            s.window.limit = s.bound;
        }
        s.window.skip = 0;
    }
    BSON_APPEND_INT64(f, "limit", counting ? s.bound : s.window.limit);
    return s;
}

/// Appends the distinct values of `key` in `docs` (arrays unwound one level,
/// equal values once, in the order first met) as `values`.
void appendDistinctValues(bson_t* out, const std::vector<bson::Doc>& docs, std::string_view key) {
    std::vector<bson_value_t> distinct;
    for (const auto& d : docs)
        bson::forEachValueAtPath(d.get(), key, [&](const bson_value_t& v) {
            for (const auto& x : distinct)
                if (bson::compareValues(x, v, nullptr) == 0) return;
            distinct.push_back(v);
        });
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(out, "values", &arr);
    ArrayKey k;
    for (size_t i = 0; i < distinct.size(); ++i) bson_append_value(&arr, k(i), -1, &distinct[i]);
    bson_append_array_end(out, &arr);
}

void appendCursor(bson_t* out, const std::string& ns, const std::vector<bson::Doc>& docs) {
    bson_t cursor, batch;
    BSON_APPEND_DOCUMENT_BEGIN(out, "cursor", &cursor);
    BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &batch);
    ArrayKey key;
    for (size_t i = 0; i < docs.size(); ++i)
        bson_append_document(&batch, key(i), -1, docs[i].get());
    bson_append_array_end(&cursor, &batch);
    BSON_APPEND_INT64(&cursor, "id", 0);
    BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
    bson_append_document_end(out, &cursor);
}

/// A find with a limit is merged as it is; one without (or with `limit: 0`)
/// reads at most maxDocs (skipped ones included) and one more.
std::optional<MergedShape> findShape(const bson_t* cmd, int64_t maxDocs) {
    MergedShape s;
    int64_t skip = 0;
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        int64_t v = 0;
        if (k == "limit" && !(positiveInteger(it, &v, true) && v == 0)) return s;
        if (k == "skip" && !positiveInteger(it, &skip, true)) return s;
        // One batch of batchSize: the merged answer is one batch of everything.
        if (k == "singleBatch" && bson_iter_as_bool(&it)) return s;
    }
    if (skip > maxDocs) return s;
    s.bound = maxDocs + 1 - skip;
    bson_t* f = s.find.emplace().mut();
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it))
        if (std::string_view(bson_iter_key(&it)) != "limit") bson_append_iter(f, nullptr, 0, &it);
    BSON_APPEND_INT64(f, "limit", s.bound);
    return s;
}

}  // namespace

std::optional<MergedShape> mergedShape(std::string_view name, const bson_t* cmd, int64_t maxDocs) {
    if (maxDocs <= 0) return std::nullopt;
    if (name == "find") return findShape(cmd, maxDocs);
    if (name == "count" || name == "distinct") return countOrDistinct(name, cmd, maxDocs);
    if (name == "aggregate") return aggregateShape(cmd, maxDocs);
    return std::nullopt;
}

void MergedShape::appendReply(bson_t* out, const std::string& ns,
                              const std::vector<bson::Doc>& docs) const {
    if (answer == Answer::Documents) return appendCursor(out, ns, docs);
    if (answer == Answer::Distinct) return appendDistinctValues(out, docs, field);
    const int64_t n = window.apply(static_cast<int64_t>(docs.size()));
    if (!cursor) return appendCount(out, "n", n);
    // An aggregate's count: one document, none when nothing matched (as $group and $count).
    std::vector<bson::Doc> one;
    if (n > 0) {
        bson::Doc d = groupId ? groupId->copy() : bson::Doc();
        appendCount(d.mut(), field.c_str(), n);
        one.push_back(std::move(d));
    }
    appendCursor(out, ns, one);
}

asio::awaitable<StatusWith<std::vector<bson::Doc>>> runMergedFind(Tiers& t, const MergedFind& q) {
    const std::string ns = q.db + "." + q.coll;
    const int64_t want = q.skip + q.limit;
    for (int attempt = 0; attempt < kEpochAttempts; ++attempt) {
        // The epoch first: a document that leaves the fast tier after it was
        // read there and before its archive copy is judged moves it.
        // (One round trip: the fast tier reads the epoch, then the matches.)
        const auto readAt = std::chrono::steady_clock::now();
        bson::Doc ec = epochCommand(t.meta, ns);
        bson::Doc fc = findCommand(q, want, true);
        std::vector<const bson_t*> first{ec.get(), fc.get()};
        auto got = co_await collectAll(t.fast, first);
        if (!got.isOK()) co_return got.getStatus();
        const Epoch e1 = epochFrom(got.getValue()[0], ns, readAt);
        std::vector<bson::Doc>& fast = got.getValue()[1];
        std::unordered_set<std::string> inFast;
        for (auto& d : fast) {
            Id id;
            if (idOf(d.get(), &id)) inFast.insert(idKey(id));
        }

        std::vector<bson::Doc> fromArchive;  // the archive's versions that stand
        std::vector<bson::Doc> movedUp;      // fast versions of archive matches
        bool complete = false;
        int64_t reach = want;
        std::optional<Epoch> e2;  // read after the last round's checks, when it made any
        for (int round = 0; round < kArchiveRounds && !complete; ++round) {
            fromArchive.clear();
            movedUp.clear();
            bson::Doc ac = findCommand(q, reach, false);
            auto archive = co_await t.archive.collect(ac.get());
            if (!archive.isOK()) co_return archive.getStatus();
            // The archive's matches the fast tier did not return: it may hold
            // them (a newer version that no longer matches or ranks lower, or
            // one copied up since) or have tombstoned them.
            std::vector<Id> others;
            std::vector<const bson::Doc*> candidates;
            for (auto& d : archive.getValue()) {
                Id id;
                if (!idOf(d.get(), &id) || inFast.count(idKey(id))) continue;
                others.push_back(std::move(id));
                candidates.push_back(&d);
            }
            std::unordered_set<std::string> held;
            e2.reset();
            if (!others.empty()) {
                // One round trip: which the fast tier holds, then which are
                // tombstoned (only the ones it does not hold count).
                bson::Doc hc;
                BSON_APPEND_UTF8(hc.mut(), "find", q.coll.c_str());
                appendIdIn(hc.mut(), "filter", others);
                BSON_APPEND_INT64(hc.mut(), "batchSize", static_cast<int64_t>(others.size()));
                BSON_APPEND_UTF8(hc.mut(), "$db", q.db.c_str());
                bson::Doc kc = keyStatesCommand(t.meta, ns, others);
                bson::Doc ec2 = epochCommand(t.meta, ns);
                std::vector<const bson_t*> checks{hc.get(), kc.get(), ec2.get()};
                auto h = co_await collectAll(t.fast, checks);
                if (!h.isOK()) co_return h.getStatus();
                // After the checks, as the end of the read needs (the loop may end here).
                e2 = epochFrom(h.getValue()[2], ns, readAt);
                for (auto& d : h.getValue()[0]) {
                    Id id;
                    if (!idOf(d.get(), &id)) continue;
                    held.insert(idKey(id));
                    if (q.matcher->matches(d.get())) movedUp.push_back(std::move(d));
                }
                const KeyStates keys = keyStatesFrom(h.getValue()[1], others);
                for (size_t i = 0; i < others.size(); ++i)
                    if (!held.count(idKey(others[i])) && !keys.dead[i])
                        fromArchive.push_back(bson::Doc::copyOf(candidates[i]->get()));
            }
            const auto got = static_cast<int64_t>(archive.getValue().size());
            // Enough archive versions stand, or the archive has no more matches.
            complete = static_cast<int64_t>(fromArchive.size()) >= want || got < reach;
            reach += std::max<int64_t>(want, got - static_cast<int64_t>(fromArchive.size()));
        }
        if (!complete) co_return fallback();
        if (!e2) {
            auto now = co_await readEpoch(t, ns);
            if (!now.isOK()) co_return now.getStatus();
            e2 = now.getValue();
        }
        if (e2->departures != e1.departures) continue;  // a document left the fast tier: again

        std::vector<bson::Doc> merged;
        merged.reserve(fast.size() + movedUp.size() + fromArchive.size());
        for (auto* part : {&fast, &movedUp, &fromArchive})
            for (auto& d : *part) merged.push_back(std::move(d));
        if (q.sort) {
            std::vector<std::pair<query::SortKey, size_t>> keys;
            keys.reserve(merged.size());
            for (size_t i = 0; i < merged.size(); ++i)
                keys.emplace_back(q.sort->sortKey(merged[i].get()), i);
            std::stable_sort(keys.begin(), keys.end(), [&q](const auto& a, const auto& b) {
                return q.sort->compareKeys(a.first, b.first) < 0;
            });
            std::vector<bson::Doc> sorted;
            sorted.reserve(merged.size());
            for (auto& k : keys) sorted.push_back(std::move(merged[k.second]));
            merged = std::move(sorted);
        }
        std::vector<bson::Doc> out;
        size_t bytes = 0;
        for (size_t i = static_cast<size_t>(q.skip);
             i < merged.size() && static_cast<int64_t>(out.size()) < q.limit; ++i) {
            bson::Doc d;
            if (q.projection) {
                try {
                    query::MatchDetails details;
                    if (q.projection->requiresMatchDetails())
                        q.matcher->matches(merged[i].get(), &details);
                    d = q.projection->apply(merged[i].get(), &details);
                } catch (const DBException&) {
                    co_return fallback();  // the tier reports the projection's error
                }
            } else {
                d = std::move(merged[i]);
            }
            bytes += d.get()->len;
            if (bytes > kMaxMergedBytes) co_return fallback();
            out.push_back(std::move(d));
        }
        co_return out;
    }
    co_return fallback();
}

}  // namespace halo::tiering
