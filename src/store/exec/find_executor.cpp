#include "store/exec/find_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "store/exec/interrupt.h"
#include "store/query/collator.h"
#include "store/query/matcher.h"
#include "store/query/projection.h"
#include "store/query/sort.h"
#include "store/storage/key_string.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

WT_ITEM item(const std::string& s) {
    WT_ITEM it{};
    it.data = s.data();
    it.size = s.size();
    return it;
}

/// The smallest string greater than every string that starts with `p`;
/// empty means "no upper limit".
std::string prefixSuccessor(std::string p) {
    while (!p.empty()) {
        auto& c = reinterpret_cast<unsigned char&>(p.back());
        if (c != 0xFF) {
            ++c;
            return p;
        }
        p.pop_back();
    }
    return p;
}

/// Raw key range [lo, hi) of an interval; hi empty = unbounded.
std::pair<std::string, std::string> rawRange(const KeyInterval& iv) {
    std::string lo = iv.startInclusive ? iv.start : prefixSuccessor(iv.start);
    if (!iv.startInclusive && lo.empty()) lo = std::string(1, '\xFF') + std::string(64, '\xFF');
    std::string hi = iv.endInclusive ? prefixSuccessor(iv.end) : iv.end;
    if (!iv.endInclusive && iv.end.empty()) hi = std::string();  // exclusive nothing: unbounded
    return {lo, hi};
}

bool below(std::string_view k, const std::string& hi) {
    return hi.empty() || k < std::string_view(hi);
}

bool hasPositional(const bson_t* proj) {
    bson_iter_t it;
    if (!bson_iter_init(&it, proj)) return false;
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k.size() >= 2 && k.substr(k.size() - 2) == ".$") return true;
    }
    return false;
}

}  // namespace

ScanStage::ScanStage(std::shared_ptr<const CollectionEntry> coll, QueryPlan plan,
                     std::shared_ptr<const query::Matcher> matcher)
    : coll_(std::move(coll)), plan_(std::move(plan)), matcher_(std::move(matcher)) {
    dedupe_ = plan_.index && (plan_.index->multikey.load() || plan_.intervals.size() > 1);
    if (!plan_.index && coll_) ++coll_->collectionScans;
}

std::optional<bson::Doc> ScanStage::next(Session& s, int64_t* ridOut) {
    while (auto r = nextRaw(s)) {
        checkForInterrupt();  // a long scan stops at killOp
        ++docs_;
        if (!matcher_ || matcher_->matches(r->second.get())) {
            if (ridOut) *ridOut = r->first;
            return std::move(r->second);
        }
    }
    return std::nullopt;
}

std::optional<std::pair<int64_t, bson::Doc>> ScanStage::nextRaw(Session& s) {
    if (done_) return std::nullopt;
    return plan_.index ? nextIndexScan(s) : nextCollScan(s);
}

std::optional<std::pair<int64_t, bson::Doc>> ScanStage::nextCollScan(Session& s) {
    if (aheadPos_ == ahead_.size()) {
        ahead_.clear();
        aheadPos_ = 0;
        if (!scanEnded_) readAhead(s);
        if (ahead_.empty()) {
            done_ = true;
            return std::nullopt;
        }
    }
    auto r = std::move(ahead_[aheadPos_++]);
    started_ = true;
    lastRid_ = r.first;
    return r;
}

void ScanStage::readAhead(Session& s) {
    // One cursor positioning per refill instead of one per document; the refill
    // grows (1, 2, 4 .. 128) so a point operation reads no more than it needs.
    Cursor c = s.open(coll_->uri);
    int ret;
    if (!started_) {
        ret = plan_.reverse ? c->prev(c.get()) : c->next(c.get());
    } else {
        c->set_key(c.get(), lastRid_);
        int exact = 0;
        ret = c->search_near(c.get(), &exact);
        if (ret == 0) {
            if (plan_.reverse) {
                if (exact >= 0) ret = c->prev(c.get());
            } else {
                if (exact <= 0) ret = c->next(c.get());
            }
        }
    }
    const size_t want = readAheadSize_;
    readAheadSize_ = std::min<size_t>(readAheadSize_ * 2, 128);
    while (ret == 0 && ahead_.size() < want) {
        int64_t rid;
        WT_ITEM v;
        c->get_key(c.get(), &rid);
        c->get_value(c.get(), &v);
        ahead_.emplace_back(rid, bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size));
        ret = plan_.reverse ? c->prev(c.get()) : c->next(c.get());
    }
    if (ret == WT_NOTFOUND) {
        scanEnded_ = true;
    } else if (ret != 0) {
        wtCheck(ret, "collection scan");
    }
}

void ScanStage::saveState() {
    // Documents read ahead belong to this batch's snapshot: drop them, and
    // resume after the last one returned in the next batch's snapshot.
    ahead_.clear();
    aheadPos_ = 0;
    scanEnded_ = false;
}

std::optional<std::pair<int64_t, bson::Doc>> ScanStage::nextIndexScan(Session& s) {
    const bool rev = plan_.reverse;
    const size_t n = plan_.intervals.size();
    if (plan_.exactKeys) return nextExactKey(s);
    if (interval_ >= n) {
        done_ = true;
        return std::nullopt;
    }
    Cursor ic = s.open(plan_.index->uri);
    Cursor rc;
    while (interval_ < n) {
        const KeyInterval& iv = plan_.intervals[rev ? n - 1 - interval_ : interval_];
        auto [lo, hi] = rawRange(iv);
        int ret;
        if (!started_) {
            started_ = true;
            int exact = 0;
            if (!rev && lo.empty()) {
                ret = ic->next(ic.get());  // WiredTiger rejects empty search keys
            } else if (!rev) {
                WT_ITEM k = item(lo);
                ic->set_key(ic.get(), &k);
                ret = ic->search_near(ic.get(), &exact);
                if (ret == 0 && exact < 0) ret = ic->next(ic.get());
            } else if (hi.empty()) {
                ret = ic->prev(ic.get());
            } else {
                WT_ITEM k = item(hi);
                ic->set_key(ic.get(), &k);
                ret = ic->search_near(ic.get(), &exact);
                if (ret == 0 && exact >= 0) ret = ic->prev(ic.get());
            }
        } else {
            WT_ITEM k = item(lastKey_);
            ic->set_key(ic.get(), &k);
            int exact = 0;
            ret = ic->search_near(ic.get(), &exact);
            if (ret == 0) {
                if (!rev && exact <= 0) ret = ic->next(ic.get());
                if (rev && exact >= 0) ret = ic->prev(ic.get());
            }
        }
        while (ret == 0) {
            WT_ITEM kItem;
            ic->get_key(ic.get(), &kItem);
            std::string_view key(static_cast<const char*>(kItem.data), kItem.size);
            bool inside = rev ? key >= std::string_view(lo) : below(key, hi);
            if (!inside) break;
            if (rev && !below(key, hi)) {  // can happen only on resume
                ret = ic->prev(ic.get());
                continue;
            }
            lastKey_.assign(key);
            ++keys_;
            int64_t rid;
            if (plan_.index->unique) {
                WT_ITEM v;
                ic->get_value(ic.get(), &v);
                rid = keystring::readRecordIdSuffix(
                    std::string_view(static_cast<const char*>(v.data), v.size));
            } else {
                rid = keystring::readRecordIdSuffix(key);
            }
            if (dedupe_ && !seen_.insert(rid).second) {
                ret = rev ? ic->prev(ic.get()) : ic->next(ic.get());
                continue;
            }
            if (!rc) rc = s.open(coll_->uri);
            rc->set_key(rc.get(), rid);
            int r = rc->search(rc.get());
            if (r == WT_NOTFOUND) {  // index entry without record: concurrent delete
                ret = rev ? ic->prev(ic.get()) : ic->next(ic.get());
                continue;
            }
            wtCheck(r, "fetch");
            WT_ITEM v;
            rc->get_value(rc.get(), &v);
            return std::make_pair(rid,
                                  bson::Doc::copyOf(static_cast<const uint8_t*>(v.data), v.size));
        }
        if (ret != 0 && ret != WT_NOTFOUND) wtCheck(ret, "index scan");
        ++interval_;
        started_ = false;
        lastKey_.clear();
    }
    done_ = true;
    return std::nullopt;
}

std::optional<std::pair<int64_t, bson::Doc>> ScanStage::nextExactKey(Session& s) {
    // Each interval is one whole key of a unique index: one exact search finds
    // its entry or proves there is none; no scan, nothing to resume from.
    const size_t n = plan_.intervals.size();
    while (interval_ < n) {
        const KeyInterval& iv = plan_.intervals[plan_.reverse ? n - 1 - interval_ : interval_];
        ++interval_;
        Cursor ic = s.open(plan_.index->uri);
        WT_ITEM k = item(iv.start);
        ic->set_key(ic.get(), &k);
        int ret = ic->search(ic.get());
        if (ret == WT_NOTFOUND) continue;
        wtCheck(ret, "index search");
        ++keys_;
        WT_ITEM v;
        wtCheck(ic->get_value(ic.get(), &v), "index value");
        int64_t rid = keystring::readRecordIdSuffix(
            std::string_view(static_cast<const char*>(v.data), v.size));
        ic.close();
        if (dedupe_ && !seen_.insert(rid).second) continue;
        if (auto doc = rs::fetch(s, *coll_, rid)) return std::make_pair(rid, std::move(*doc));
        // An index entry without its record: a concurrent delete.
    }
    done_ = true;
    return std::nullopt;
}

std::shared_ptr<const query::Collator> effectiveCollator(const bson_t* requested,
                                                         const CollectionEntry* coll) {
    if (requested) return uassertStatusOK(query::Collator::parse(requested));
    return coll ? coll->collator : nullptr;
}

FindExecutor::FindExecutor(std::shared_ptr<const CollectionEntry> coll, FindSpec spec)
    : spec_(std::move(spec)) {
    if (!spec_.filter.empty()) {
        query::MatcherParseOptions mo;
        mo.collator = spec_.collator;
        matcher_ = uassertStatusOK(query::Matcher::parse(spec_.filter.get(), mo));
    }
    if (!spec_.sort.empty()) {
        bson_iter_t it;
        bool natural = bson::find(spec_.sort.get(), "$natural", &it);
        if (!natural)
            sort_ = std::make_unique<query::SortPattern>(
                uassertStatusOK(query::SortPattern::parse(spec_.sort.get(), spec_.collator)));
    }
    if (!spec_.projection.empty()) {
        positionalProjection_ = hasPositional(spec_.projection.get());
        projection_ = std::make_unique<query::Projection>(uassertStatusOK(
            query::Projection::parse(spec_.projection.get(), matcher_.get(), spec_.collator)));
    }
    QueryPlan plan =
        coll ? planQuery(*coll, spec_.filter.get(), spec_.sort.empty() ? nullptr : spec_.sort.get(),
                         spec_.hint.empty() ? nullptr : spec_.hint.get(), spec_.collator.get())
             : QueryPlan{};
    blockingSort_ = sort_ && !plan.providesSort;
    scan_ = std::make_unique<ScanStage>(std::move(coll), std::move(plan), matcher_);
}

FindExecutor::~FindExecutor() = default;

void FindExecutor::saveState() {
    scan_->saveState();
}

std::optional<bson::Doc> FindExecutor::nextSorted(Session& s) {
    if (!sorted_) {
        sorted_ = true;
        size_t bytes = 0;
        // With a limit only the first skip+limit documents can ever be returned.
        size_t keep = spec_.limit > 0 ? static_cast<size_t>(spec_.skip + spec_.limit) : 0;
        std::vector<std::pair<query::SortKey, bson::Doc>> rows;
        auto less = [this](const auto& a, const auto& b) {
            return sort_->compareKeys(a.first, b.first) < 0;
        };
        while (auto d = scan_->next(s)) {
            bytes += d->size();
            if (bytes > kMaxBlockingSortBytes && keep == 0)
                uasserted(ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                          "Executor error during find command :: caused by :: Sort exceeded memory "
                          "limit of "
                          "104857600 bytes, but did not opt in to external sorting.");
            auto key = sort_->sortKey(d->get());
            rows.emplace_back(std::move(key), std::move(*d));
            if (keep > 0 && rows.size() >= keep * 2 + 64) {
                std::stable_sort(rows.begin(), rows.end(), less);
                rows.resize(keep);
                bytes = 0;
                for (const auto& r : rows) bytes += r.second.size();
            }
        }
        std::stable_sort(rows.begin(), rows.end(), less);
        if (keep > 0 && rows.size() > keep) rows.resize(keep);
        buffer_.reserve(rows.size());
        for (auto& r : rows) buffer_.push_back(std::move(r.second));
    }
    if (bufferPos_ >= buffer_.size()) {
        buffer_.clear();
        return std::nullopt;
    }
    return std::move(buffer_[bufferPos_++]);
}

std::optional<bson::Doc> FindExecutor::next(Session& s) {
    if (spec_.limit > 0 && returned_ >= spec_.limit) return std::nullopt;
    while (true) {
        std::optional<bson::Doc> d = blockingSort_ ? nextSorted(s) : scan_->next(s);
        if (!d) return std::nullopt;
        if (skipped_ < spec_.skip) {
            ++skipped_;
            continue;
        }
        ++returned_;
        if (projection_) {
            query::MatchDetails details;
            const query::MatchDetails* dp = nullptr;
            if (matcher_ && positionalProjection_) {
                matcher_->matches(d->get(), &details);
                dp = &details;
            }
            return projection_->apply(d->get(), dp);
        }
        return d;
    }
}

void FindExecutor::explain(bson_t* out) const {
    const QueryPlan& p = scan_->plan();
    bson_t* cur = out;
    bson_t proj, sortSt, fetch, input;
    // Outermost first: PROJECTION -> SORT -> FETCH -> IXSCAN / COLLSCAN
    std::vector<bson_t*> open;
    if (projection_) {
        BSON_APPEND_UTF8(cur, "stage", "PROJECTION_DEFAULT");
        BSON_APPEND_DOCUMENT(cur, "transformBy", spec_.projection.get());
        BSON_APPEND_DOCUMENT_BEGIN(cur, "inputStage", &proj);
        open.push_back(cur);
        cur = &proj;
    }
    if (blockingSort_) {
        BSON_APPEND_UTF8(cur, "stage", "SORT");
        BSON_APPEND_DOCUMENT(cur, "sortPattern", spec_.sort.get());
        BSON_APPEND_UTF8(cur, "type", "default");
        if (spec_.limit > 0) BSON_APPEND_INT64(cur, "limitAmount", spec_.limit + spec_.skip);
        BSON_APPEND_DOCUMENT_BEGIN(cur, "inputStage", &sortSt);
        open.push_back(cur);
        cur = &sortSt;
    }
    if (p.index) {
        BSON_APPEND_UTF8(cur, "stage", "FETCH");
        if (!spec_.filter.empty()) BSON_APPEND_DOCUMENT(cur, "filter", spec_.filter.get());
        BSON_APPEND_DOCUMENT_BEGIN(cur, "inputStage", &fetch);
        open.push_back(cur);
        cur = &fetch;
        BSON_APPEND_UTF8(cur, "stage", "IXSCAN");
        BSON_APPEND_DOCUMENT(cur, "keyPattern", p.index->keyPattern.get());
        BSON_APPEND_UTF8(cur, "indexName", p.index->name.c_str());
        BSON_APPEND_BOOL(cur, "isMultiKey", p.index->multikey.load());
        BSON_APPEND_BOOL(cur, "isUnique", p.index->unique);
        BSON_APPEND_UTF8(cur, "direction", p.reverse ? "backward" : "forward");
        BSON_APPEND_UTF8(cur, "indexBounds", p.boundsSummary.c_str());
        BSON_APPEND_INT32(cur, "intervals", static_cast<int32_t>(p.intervals.size()));
        if (p.index->collator) p.index->collator->appendTo(cur, "collation");
    } else {
        BSON_APPEND_UTF8(cur, "stage", "COLLSCAN");
        if (!spec_.filter.empty()) BSON_APPEND_DOCUMENT(cur, "filter", spec_.filter.get());
        BSON_APPEND_UTF8(cur, "direction", p.reverse ? "backward" : "forward");
    }
    bson_t* child = cur;
    while (!open.empty()) {
        bson_t* parent = open.back();
        open.pop_back();
        bson_append_document_end(parent, child);
        child = parent;
    }
    (void)input;
}

}  // namespace halo::store
