#include "store/exec/change_stream.h"

#include <fmt/format.h>

#include <cinttypes>
#include <cstdio>

#include "store/repl/doc_diff.h"
#include "store/repl/oplog.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

constexpr uint8_t kEvent = 0, kHighWaterMark = 1, kInvalidate = 2;

bool startsWith(std::string_view s, std::string_view p) {
    return s.substr(0, p.size()) == p;
}

std::string getStr(const bson_t* d, const char* f) {
    bson_iter_t it;
    if (bson::find(d, f, &it) && BSON_ITER_HOLDS_UTF8(&it)) return bson_iter_utf8(&it, nullptr);
    return {};
}

void appendNs(bson_t* out, const char* key, const std::string& ns) {
    auto [db, coll] = splitNs(ns);
    bson_t n;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &n);
    BSON_APPEND_UTF8(&n, "db", db.c_str());
    if (!coll.empty()) BSON_APPEND_UTF8(&n, "coll", coll.c_str());
    bson_append_document_end(out, &n);
}

bool isInternalDb(std::string_view db) {
    return db == "admin" || db == "config" || db == "local";
}

}  // namespace

bson::Doc ResumePoint::toToken() const {
    char buf[64];
    std::snprintf(buf, sizeof buf, "82%016" PRIx64 "%08x%02x", ts.asU64(), index, kind);
    bson::Doc d;
    BSON_APPEND_UTF8(d.mut(), "_data", buf);
    return d;
}

ResumePoint ResumePoint::fromToken(const bson_t* token) {
    std::string data = getStr(token, "_data");
    if (data.size() != 28 || data.substr(0, 2) != "82")
        uasserted(ErrorCode::InvalidResumeToken,
                  "Invalid resume token: the _data field is not a Halocline resume token");
    ResumePoint p;
    try {
        p.ts = Timestamp::fromU64(std::stoull(data.substr(2, 16), nullptr, 16));
        p.index = static_cast<uint32_t>(std::stoul(data.substr(18, 8), nullptr, 16));
        p.kind = static_cast<uint8_t>(std::stoul(data.substr(26, 2), nullptr, 16));
    } catch (const std::exception&) {
        uasserted(ErrorCode::InvalidResumeToken, "Invalid resume token: malformed _data");
    }
    if (p.kind > kInvalidate)
        uasserted(ErrorCode::InvalidResumeToken, "Invalid resume token: unknown kind");
    return p;
}

ChangeStreamSpec ChangeStreamSpec::parse(const bson_t* arg, const std::string& db,
                                         const std::string& coll) {
    ChangeStreamSpec spec;
    spec.db = db;
    spec.coll = coll;
    spec.scope = coll.empty() ? Scope::Database : Scope::Collection;
    bson_iter_t it;
    bson_iter_init(&it, arg);
    int starts = 0;
    while (bson_iter_next(&it)) {
        std::string_view k = bson_iter_key(&it);
        if (k == "fullDocument") {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                uasserted(ErrorCode::TypeMismatch, "fullDocument must be a string");
            spec.fullDocument = bson_iter_utf8(&it, nullptr);
            if (spec.fullDocument != "default" && spec.fullDocument != "updateLookup" &&
                spec.fullDocument != "whenAvailable" && spec.fullDocument != "required")
                uasserted(
                    ErrorCode::BadValue,
                    fmt::format(
                        "Enumeration value '{}' for field 'fullDocument' is not a valid value.",
                        spec.fullDocument));
        } else if (k == "fullDocumentBeforeChange") {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                uasserted(ErrorCode::TypeMismatch, "fullDocumentBeforeChange must be a string");
            spec.fullDocumentBeforeChange = bson_iter_utf8(&it, nullptr);
            if (spec.fullDocumentBeforeChange != "off" &&
                spec.fullDocumentBeforeChange != "whenAvailable" &&
                spec.fullDocumentBeforeChange != "required")
                uasserted(ErrorCode::BadValue,
                          fmt::format("Enumeration value '{}' for field 'fullDocumentBeforeChange' "
                                      "is not a valid value.",
                                      spec.fullDocumentBeforeChange));
        } else if (k == "resumeAfter" || k == "startAfter") {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                uasserted(ErrorCode::TypeMismatch, std::string(k) + " must be an object");
            bson_t tok;
            bson::subDocument(arg, k, &tok);
            ResumePoint p = ResumePoint::fromToken(&tok);
            if (k == "resumeAfter") {
                if (p.kind == kInvalidate)
                    uasserted(ErrorCode::InvalidResumeToken,
                              "Attempting to resume a change stream using 'resumeAfter' is not "
                              "allowed from an invalidate notification.");
                spec.resumeAfter = p;
            } else {
                spec.startAfter = p;
            }
            ++starts;
        } else if (k == "startAtOperationTime") {
            if (!BSON_ITER_HOLDS_TIMESTAMP(&it))
                uasserted(ErrorCode::TypeMismatch, "startAtOperationTime must be a timestamp");
            Timestamp t;
            bson_iter_timestamp(&it, &t.secs, &t.inc);
            spec.startAtOperationTime = t;
            ++starts;
        } else if (k == "allChangesForCluster") {
            if (bson::isTruthy(*bson_iter_value(&it))) {
                if (db != "admin" || !coll.empty())
                    uasserted(ErrorCode::BadValue,
                              "A change stream with 'allChangesForCluster:true' may only be opened "
                              "on the 'admin' database, and with no collection name");
                spec.scope = Scope::Cluster;
            }
        } else if (k == "showExpandedEvents") {
            spec.showExpandedEvents = bson::isTruthy(*bson_iter_value(&it));
        } else if (k == "allowToRunOnConfigDB" || k == "allowToRunOnSystemNS" ||
                   k == "showMigrationEvents" || k == "showSystemEvents" ||
                   k == "showRawUpdateDescription") {
            continue;
        } else {
            uasserted(ErrorCode::Location40415,
                      fmt::format("BSON field '$changeStream.{}' is an unknown field.", k));
        }
    }
    if (starts > 1)
        uasserted(ErrorCode::Location40674,
                  "Only one type of resume option is allowed, but multiple were found.");
    if (spec.scope == Scope::Database && db == "admin")
        uasserted(ErrorCode::InvalidNamespace,
                  "$changeStream may not be opened on the internal admin database");
    if (spec.scope != Scope::Cluster && isInternalDb(db) && db != "admin")
        uasserted(ErrorCode::InvalidNamespace,
                  fmt::format("$changeStream may not be opened on the internal {} database", db));
    return spec;
}

ChangeStream::ChangeStream(Oplog& oplog, Catalog& catalog, ChangeStreamSpec spec, Session& s)
    : oplog_(oplog), catalog_(catalog), spec_(std::move(spec)) {
    auto checkHistory = [&](Timestamp t) {
        if (t < oplog_.truncatedThrough())
            uasserted(ErrorCode::ChangeStreamHistoryLost,
                      "Resume of change stream was not possible, as the resume point may no longer "
                      "be in the oplog.");
    };
    if (spec_.resumeAfter || spec_.startAfter) {
        position_ = spec_.resumeAfter ? *spec_.resumeAfter : *spec_.startAfter;
        checkHistory(position_.ts);
        // Re-read the token's own entry to find the events after it.
        scannedUpTo_ =
            Timestamp::fromU64(position_.ts.asU64() - (position_.kind == kHighWaterMark ? 0 : 1));
    } else if (spec_.startAtOperationTime) {
        Timestamp t = *spec_.startAtOperationTime;
        checkHistory(t);
        uint64_t before = t.asU64() == 0 ? 0 : t.asU64() - 1;
        position_ = {Timestamp::fromU64(before), UINT32_MAX, kHighWaterMark};
        scannedUpTo_ = Timestamp::fromU64(before);
    } else {
        Timestamp now = oplog_.visibleUpTo();
        position_ = {now, UINT32_MAX, kHighWaterMark};
        scannedUpTo_ = now;
    }
}

bool ChangeStream::matchesNs(const std::string& ns) const {
    auto [db, coll] = splitNs(ns);
    switch (spec_.scope) {
        case ChangeStreamSpec::Scope::Collection:
            return db == spec_.db && coll == spec_.coll;
        case ChangeStreamSpec::Scope::Database:
            return db == spec_.db && !startsWith(coll, "system.");
        case ChangeStreamSpec::Scope::Cluster:
            return !isInternalDb(db) && !startsWith(coll, "system.");
    }
    return false;
}

std::optional<bson::Doc> ChangeStream::next(Session& s) {
    while (true) {
        if (pendingPos_ < pending_.size()) {
            auto& [point, ev] = pending_[pendingPos_++];
            position_ = point;
            if (point.kind == kInvalidate) closed_ = true;
            return std::move(ev);
        }
        pending_.clear();
        pendingPos_ = 0;
        if (invalidated_) return std::nullopt;
        Timestamp visible = oplog_.visibleUpTo();
        if (!(scannedUpTo_ < visible)) return std::nullopt;
        // Entries are only ever removed from the front: if any entry after our
        // scan point was removed, events were lost to us.
        if (scannedUpTo_ < oplog_.truncatedThrough())
            uasserted(ErrorCode::ChangeStreamHistoryLost,
                      "Resume of change stream was not possible, as the resume point may no longer "
                      "be in the oplog.");
        // Scan in a read transaction of our own, begun after `visible` was
        // read, so it sees every entry up to `visible`. The caller's snapshot
        // (taken when its batch began, or by an earlier scan in this batch)
        // can predate commits that `visible` already counts: scanning with it
        // would step over those entries and lose their events for good.
        PooledSession fresh(catalog_.sessions());
        Txn readTxn(*fresh);
        Session& scan = *fresh;
        Cursor c = scan.open(oplog_.collection()->uri);
        c->set_key(c.get(), static_cast<int64_t>(scannedUpTo_.asU64() + 1));
        int exact = 0;
        int ret = c->search_near(c.get(), &exact);
        if (ret == 0 && exact < 0) ret = c->next(c.get());
        while (ret == 0) {
            int64_t rid;
            c->get_key(c.get(), &rid);
            Timestamp ts = Timestamp::fromU64(static_cast<uint64_t>(rid));
            if (visible < ts) break;
            WT_ITEM v;
            c->get_value(c.get(), &v);
            bson::View entry(static_cast<const uint8_t*>(v.data), v.size);
            scannedUpTo_ = ts;
            expand(scan, entry.get(), ts);
            if (!pending_.empty()) break;
            ret = c->next(c.get());
        }
        if (ret != 0 && ret != WT_NOTFOUND) wtCheck(ret, "oplog scan");
        c.close();
        readTxn.commit(false);
        if (pending_.empty()) {
            scannedUpTo_ = visible;
            ResumePoint hwm{visible, UINT32_MAX, kHighWaterMark};
            if (position_ < hwm) position_ = hwm;
            return std::nullopt;
        }
    }
}

std::optional<bson::Doc> ChangeStream::postBatchResumeToken() const {
    return position_.toToken();
}

void ChangeStream::expand(Session& s, const bson_t* entry, Timestamp ts) {
    std::string op = getStr(entry, "op");
    std::string ns = getStr(entry, "ns");
    bson_iter_t it;
    int64_t wall = 0;
    if (bson::find(entry, "wall", &it) && BSON_ITER_HOLDS_DATE_TIME(&it))
        wall = bson_iter_date_time(&it);
    bson_t lsid;
    bool haveLsid = bson::subDocument(entry, "lsid", &lsid);
    int64_t txnNumber = 0;
    if (bson::find(entry, "txnNumber", &it)) txnNumber = bson_iter_as_int64(&it);

    uint32_t index = 0;
    auto queue = [&](const std::function<void(bson_t*)>& body, uint8_t kind = kEvent) {
        ResumePoint p{ts, index++, kind};
        if (!(position_ < p)) return;  // at or before the resume point
        bson::Doc ev;
        bson::Doc tok = p.toToken();
        BSON_APPEND_DOCUMENT(ev.mut(), "_id", tok.get());
        body(ev.mut());
        pending_.emplace_back(p, std::move(ev));
    };
    auto header = [&](bson_t* ev, const char* type) {
        BSON_APPEND_UTF8(ev, "operationType", type);
        appendTimestamp(ev, "clusterTime", ts);
        BSON_APPEND_DATE_TIME(ev, "wallTime", wall);
    };
    bson_iter_t uiIt;
    bool haveUi = bson::find(entry, "ui", &uiIt) && BSON_ITER_HOLDS_BINARY(&uiIt);
    auto appendUuid = [&](bson_t* ev) {
        if (spec_.showExpandedEvents && haveUi) bson::appendIter(ev, "collectionUUID", uiIt);
    };
    auto sessionInfo = [&](bson_t* ev) {
        if (haveLsid) {
            BSON_APPEND_DOCUMENT(ev, "lsid", &lsid);
            BSON_APPEND_INT64(ev, "txnNumber", txnNumber);
        }
    };

    std::function<void(const bson_t*)> crud = [&](const bson_t* e) {
        std::string eop = getStr(e, "op");
        std::string ens = getStr(e, "ns");
        if (!matchesNs(ens)) {
            ++index;
            return;
        }
        bson_t o, o2, post, pre;
        bson::subDocument(e, "o", &o);
        bool haveO2 = bson::subDocument(e, "o2", &o2);
        bool havePost = bson::subDocument(e, "postImage", &post);
        bool havePre = bson::subDocument(e, "preImage", &pre);
        bson_iter_t eui;
        bool haveEui = bson::find(e, "ui", &eui) && BSON_ITER_HOLDS_BINARY(&eui);
        auto crudUuid = [&](bson_t* ev) {
            if (spec_.showExpandedEvents && haveEui) bson::appendIter(ev, "collectionUUID", eui);
        };
        auto preImage = [&](bson_t* ev) {
            if (spec_.fullDocumentBeforeChange == "off") return;
            if (havePre)
                BSON_APPEND_DOCUMENT(ev, "fullDocumentBeforeChange", &pre);
            else if (spec_.fullDocumentBeforeChange == "required")
                uasserted(ErrorCode::NoMatchingDocument,
                          fmt::format("Change stream was configured to require a pre-image for all "
                                      "update, delete and replace events, but the pre-image was "
                                      "not found for the event at {}",
                                      ts.asU64()));
            else
                BSON_APPEND_NULL(ev, "fullDocumentBeforeChange");
        };
        if (eop == "i") {
            queue([&](bson_t* ev) {
                header(ev, "insert");
                crudUuid(ev);
                BSON_APPEND_DOCUMENT(ev, "fullDocument", &o);
                appendNs(ev, "ns", ens);
                if (haveO2) BSON_APPEND_DOCUMENT(ev, "documentKey", &o2);
                sessionInfo(ev);
            });
        } else if (eop == "u") {
            bool isUpdate = bson_has_field(&o, "$v");
            queue([&](bson_t* ev) {
                header(ev, isUpdate ? "update" : "replace");
                crudUuid(ev);
                if (!isUpdate) {
                    BSON_APPEND_DOCUMENT(ev, "fullDocument", &o);
                } else if (spec_.fullDocument == "updateLookup") {
                    auto coll = catalog_.lookup(ens);
                    std::optional<bson::Doc> cur;
                    bson_iter_t idIt;
                    if (coll && haveO2 && bson::find(&o2, "_id", &idIt))
                        if (auto rid = rs::findById(s, *coll, *bson_iter_value(&idIt)))
                            cur = rs::fetch(s, *coll, *rid);
                    if (cur)
                        BSON_APPEND_DOCUMENT(ev, "fullDocument", cur->get());
                    else
                        BSON_APPEND_NULL(ev, "fullDocument");
                } else if (spec_.fullDocument == "whenAvailable" ||
                           spec_.fullDocument == "required") {
                    if (havePost)
                        BSON_APPEND_DOCUMENT(ev, "fullDocument", &post);
                    else if (spec_.fullDocument == "required")
                        uasserted(
                            ErrorCode::NoMatchingDocument,
                            fmt::format("Change stream was configured to require a post-image for "
                                        "all update, delete and replace events, but the post-image "
                                        "was not found for the event at {}",
                                        ts.asU64()));
                    else
                        BSON_APPEND_NULL(ev, "fullDocument");
                }
                appendNs(ev, "ns", ens);
                if (haveO2) BSON_APPEND_DOCUMENT(ev, "documentKey", &o2);
                if (isUpdate) {
                    bson_t diff;
                    if (!bson::subDocument(&o, "diff", &diff)) bson_init(&diff);
                    appendUpdateDescription(ev, &diff, spec_.showExpandedEvents);
                }
                preImage(ev);
                sessionInfo(ev);
            });
        } else if (eop == "d") {
            queue([&](bson_t* ev) {
                header(ev, "delete");
                crudUuid(ev);
                appendNs(ev, "ns", ens);
                BSON_APPEND_DOCUMENT(ev, "documentKey", &o);
                preImage(ev);
                sessionInfo(ev);
            });
        } else {
            ++index;
        }
    };

    if (op == "i" || op == "u" || op == "d") {
        crud(entry);
        return;
    }
    if (op != "c") return;
    bson_t o;
    if (!bson::subDocument(entry, "o", &o)) return;
    bson_iter_t first;
    if (!bson_iter_init(&first, &o) || !bson_iter_next(&first)) return;
    std::string cmd = bson_iter_key(&first);
    std::string db = splitNs(ns).first;
    if (cmd == "applyOps") {
        bson_t ops;
        bson::subDocument(&o, "applyOps", &ops);
        bson_iter_t a;
        bson_iter_init(&a, &ops);
        while (bson_iter_next(&a)) {
            bson_t e;
            uint32_t len;
            const uint8_t* data;
            if (!BSON_ITER_HOLDS_DOCUMENT(&a)) continue;
            bson_iter_document(&a, &len, &data);
            bson_init_static(&e, data, len);
            crud(&e);
        }
        return;
    }
    auto invalidate = [&]() {
        queue(
            [&](bson_t* ev) {
                BSON_APPEND_UTF8(ev, "operationType", "invalidate");
                appendTimestamp(ev, "clusterTime", ts);
                BSON_APPEND_DATE_TIME(ev, "wallTime", wall);
            },
            kInvalidate);
        invalidated_ = true;
    };
    if (cmd == "drop" && BSON_ITER_HOLDS_UTF8(&first)) {
        std::string target = db + "." + bson_iter_utf8(&first, nullptr);
        if (!matchesNs(target)) return;
        queue([&](bson_t* ev) {
            header(ev, "drop");
            appendUuid(ev);
            appendNs(ev, "ns", target);
        });
        if (spec_.scope == ChangeStreamSpec::Scope::Collection) invalidate();
    } else if (cmd == "renameCollection" && BSON_ITER_HOLDS_UTF8(&first)) {
        std::string from = bson_iter_utf8(&first, nullptr);
        std::string to = getStr(&o, "to");
        if (!matchesNs(from) &&
            !(spec_.scope != ChangeStreamSpec::Scope::Collection && matchesNs(to)))
            return;
        queue([&](bson_t* ev) {
            header(ev, "rename");
            appendUuid(ev);
            appendNs(ev, "ns", from);
            appendNs(ev, "to", to);
            if (spec_.showExpandedEvents) {
                // mongod 6.0+: the target again, and the UUID of a collection it replaced.
                bson_t desc;
                BSON_APPEND_DOCUMENT_BEGIN(ev, "operationDescription", &desc);
                appendNs(&desc, "to", to);
                bson_iter_t dropped;
                if (bson::find(&o, "dropTarget", &dropped) && BSON_ITER_HOLDS_BINARY(&dropped))
                    bson::appendIter(&desc, "dropTarget", dropped);
                bson_append_document_end(ev, &desc);
            }
        });
        if (spec_.scope == ChangeStreamSpec::Scope::Collection) invalidate();
    } else if (cmd == "dropDatabase") {
        if (spec_.scope == ChangeStreamSpec::Scope::Cluster ? isInternalDb(db) : db != spec_.db)
            return;
        queue([&](bson_t* ev) {
            header(ev, "dropDatabase");
            appendNs(ev, "ns", db);
        });
        if (spec_.scope != ChangeStreamSpec::Scope::Cluster) invalidate();
    } else if ((cmd == "create" || cmd == "createIndexes" || cmd == "dropIndexes" ||
                cmd == "collMod") &&
               spec_.showExpandedEvents && BSON_ITER_HOLDS_UTF8(&first)) {
        std::string target = db + "." + bson_iter_utf8(&first, nullptr);
        if (!matchesNs(target)) return;
        queue([&](bson_t* ev) {
            header(ev, cmd == "collMod" ? "modify" : cmd.c_str());
            appendUuid(ev);
            appendNs(ev, "ns", target);
            bson_t desc;
            BSON_APPEND_DOCUMENT_BEGIN(ev, "operationDescription", &desc);
            if (cmd == "createIndexes" || cmd == "dropIndexes") {
                bson_t spec, arr;
                BSON_APPEND_ARRAY_BEGIN(&desc, "indexes", &arr);
                if (bson::subDocument(&o, "spec", &spec)) BSON_APPEND_DOCUMENT(&arr, "0", &spec);
                bson_append_array_end(&desc, &arr);
            } else {
                bson_iter_t f;
                bson_iter_init(&f, &o);
                bson_iter_next(&f);
                while (bson_iter_next(&f)) bson::appendIter(&desc, bson_iter_key(&f), f);
            }
            bson_append_document_end(ev, &desc);
        });
    }
}

}  // namespace halo::store
