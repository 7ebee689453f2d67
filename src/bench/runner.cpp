#include "bench/runner.h"

#include <fmt/format.h>
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace halo::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t wallMillis() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

/// How one operation ended: YCSB's OK, NOT_FOUND, or an error. Ordered by severity.
enum class Outcome { Ok, NotFound, Failed };

/// `matchedCount` of an update reply (libmongoc's CRUD-spec reply); -1 if absent.
int64_t matchedCount(const bson_t* reply) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply, "matchedCount") && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return -1;
}

struct Pool {
    mongoc_client_pool_t* pool = nullptr;
    explicit Pool(const RunOptions& o, int size, bson_error_t* err) {
        mongoc_uri_t* u = mongoc_uri_new_with_error(o.uri.c_str(), err);
        if (!u) return;
        mongoc_uri_set_option_as_int32(u, MONGOC_URI_MAXPOOLSIZE, size);
        pool = mongoc_client_pool_new(u);
        mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
        mongoc_uri_destroy(u);
    }
    ~Pool() {
        if (pool) mongoc_client_pool_destroy(pool);
    }
};

void appendRecord(bson_t* doc, int64_t record, const WorkloadSpec& spec, int64_t now,
                  std::mt19937_64& rng) {
    std::string key = keyFor(record);
    BSON_APPEND_UTF8(doc, "_id", key.c_str());
    BSON_APPEND_DATE_TIME(doc, "date", dateFor(record, spec.recordCount, now, spec.dateSpanMillis));
    std::string value(static_cast<size_t>(spec.fieldLength), 'a');
    for (int f = 0; f < spec.fieldCount; ++f) {
        for (auto& c : value) c = static_cast<char>('a' + rng() % 26);
        std::string name = fmt::format("field{}", f);
        bson_append_utf8(doc, name.c_str(), -1, value.c_str(), static_cast<int>(value.size()));
    }
}

/// True when the server is a replica set member (so it takes multi-document transactions).
bool isReplicaSet(mongoc_client_t* c) {
    bson_t* cmd = BCON_NEW("hello", BCON_INT32(1));
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_client_command_simple(c, "admin", cmd, nullptr, &reply, &e);
    bool rs = ok && bson_has_field(&reply, "setName");
    bson_destroy(&reply);
    bson_destroy(cmd);
    return rs;
}

/// Inserts one batch as a single transaction. False (and `e`) when the server refused.
bool insertInTransaction(mongoc_client_t* cl, mongoc_collection_t* co, const bson_t** docs,
                         size_t n, bson_error_t* e) {
    mongoc_client_session_t* cs = mongoc_client_start_session(cl, nullptr, e);
    if (!cs) return false;
    bson_t o = BSON_INITIALIZER;
    bool ok = mongoc_client_session_append(cs, &o, e) &&
              mongoc_client_session_start_transaction(cs, nullptr, e);
    if (ok) {
        bson_t reply;
        ok = mongoc_collection_insert_many(co, docs, n, &o, &reply, e);
        bson_destroy(&reply);
        if (ok) {
            bson_t creply;
            ok = mongoc_client_session_commit_transaction(cs, &creply, e);
            bson_destroy(&creply);
        } else {
            bson_error_t ignored;
            mongoc_client_session_abort_transaction(cs, &ignored);
        }
    }
    bson_destroy(&o);
    mongoc_client_session_destroy(cs);
    return ok;
}

}  // namespace

double percentile(const std::vector<uint32_t>& sorted, double p) {
    if (sorted.empty()) return 0;
    auto i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1));
    return sorted[i];
}

Status load(const WorkloadSpec& spec, const RunOptions& opts, bool progress) {
    mongoc_init();
    bson_error_t err;
    Pool pool(opts, opts.threads + 1, &err);
    if (!pool.pool) return Status(ErrorCode::BadValue, fmt::format("bad uri: {}", err.message));
    mongoc_client_t* c = mongoc_client_pool_pop(pool.pool);
    mongoc_collection_t* coll =
        mongoc_client_get_collection(c, opts.db.c_str(), opts.collection.c_str());
    int64_t existing =
        mongoc_collection_estimated_document_count(coll, nullptr, nullptr, nullptr, &err);
    if (existing < 0) existing = 0;
    const bool useTxn = isReplicaSet(c);
    int workers = std::max(1, std::min(opts.threads, 8));
    // Batches are claimed in order but commit out of order: after an interrupted load
    // every record below (count - workers batches) is present, so resume from there.
    const int64_t resumeFrom = std::max<int64_t>(0, (existing / 1000 - workers) * 1000);
    // Index the tiering age field.
    bson_t* cmd =
        BCON_NEW("createIndexes", BCON_UTF8(opts.collection.c_str()), "indexes", "[", "{", "key",
                 "{", "date", BCON_INT32(1), "}", "name", BCON_UTF8("date_1"), "}", "]");
    bool indexed = mongoc_collection_write_command_with_opts(coll, cmd, nullptr, nullptr, &err);
    bson_destroy(cmd);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(pool.pool, c);
    if (!indexed)
        return Status(ErrorCode::OperationFailed, fmt::format("createIndexes: {}", err.message));

    std::atomic<int64_t> next{resumeFrom};
    std::atomic<int64_t> done{resumeFrom};
    std::mutex errMu;
    std::string firstError;
    const int64_t now = wallMillis();
    const bool tty = ::isatty(2) != 0;
    int lastDecile = -1;  // touched by worker 0 only
    std::vector<std::thread> ts;
    for (int t = 0; t < workers; ++t) {
        ts.emplace_back([&, t] {
            mongoc_client_t* cl = mongoc_client_pool_pop(pool.pool);
            mongoc_collection_t* co =
                mongoc_client_get_collection(cl, opts.db.c_str(), opts.collection.c_str());
            std::mt19937_64 rng(opts.seed + static_cast<uint64_t>(t));
            while (true) {
                int64_t start = next.fetch_add(1000);
                if (start >= spec.recordCount) break;
                int64_t end = std::min(spec.recordCount, start + 1000);
                std::vector<bson_t*> docs;
                for (int64_t r = start; r < end; ++r) {
                    bson_t* d = bson_new();
                    appendRecord(d, r, spec, now, rng);
                    docs.push_back(d);
                }
                bson_error_t e;
                bool ok =
                    useTxn && insertInTransaction(cl, co, const_cast<const bson_t**>(docs.data()),
                                                  docs.size(), &e);
                if (!ok) {
                    // Standalone, or a resumed batch that partly exists (a duplicate aborts
                    // the transaction): unordered inserts, duplicates are fine.
                    bson_t* o = BCON_NEW("ordered", BCON_BOOL(false));
                    bson_t reply;
                    ok = mongoc_collection_insert_many(co, const_cast<const bson_t**>(docs.data()),
                                                       docs.size(), o, &reply, &e);
                    if (!ok && e.code != 11000) {
                        std::lock_guard lk(errMu);
                        if (firstError.empty()) firstError = e.message;
                    }
                    bson_destroy(&reply);
                    bson_destroy(o);
                }
                for (auto* d : docs) bson_destroy(d);
                int64_t total = done.fetch_add(end - start) + (end - start);
                int pct = static_cast<int>(100 * total / std::max<int64_t>(1, spec.recordCount));
                if (progress && t == 0 && (tty || pct / 10 > lastDecile)) {
                    // A progress bar on a terminal; a line per 10% in logs.
                    fmt::print(stderr, "{}loading {:>12}/{} ({}%){}", tty ? "\r" : "", total,
                               spec.recordCount, pct, tty ? "" : "\n");
                    lastDecile = pct / 10;
                }
            }
            mongoc_collection_destroy(co);
            mongoc_client_pool_push(pool.pool, cl);
        });
    }
    for (auto& t : ts) t.join();
    if (progress && tty) fmt::print(stderr, "\n");
    if (!firstError.empty())
        return Status(ErrorCode::OperationFailed, "load failed: " + firstError);
    return Status::OK();
}

StatusWith<RunReport> run(const WorkloadSpec& spec, const RunOptions& opts) {
    mongoc_init();
    bson_error_t err;
    Pool pool(opts, opts.threads + 1, &err);
    if (!pool.pool) return Status(ErrorCode::BadValue, fmt::format("bad uri: {}", err.message));
    constexpr int kOps = 5;
    struct ThreadStats {
        std::vector<uint32_t> lat[kOps];
        int64_t failed[kOps] = {};
        int64_t notFound[kOps] = {};
    };
    std::vector<ThreadStats> stats(static_cast<size_t>(opts.threads));
    std::atomic<int64_t> remaining{spec.operationCount};
    InsertSequence inserted(opts.insertStart >= 0 ? opts.insertStart : spec.recordCount);
    std::vector<std::atomic<int64_t>> perSecond(3600 * 4);
    std::mutex errMu;
    std::string firstError;
    auto secs = [](double s) {
        return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
    };
    // Operations that complete before `start` are the warm-up: run, never measured.
    const auto start = Clock::now() + secs(std::max(0.0, opts.warmupSeconds));
    const auto deadline = opts.seconds > 0 ? start + secs(opts.seconds) : Clock::time_point::max();
    std::atomic<bool> measuring{opts.warmupSeconds <= 0};
    const int64_t lastSecond =
        opts.seconds > 0 ? static_cast<int64_t>(std::ceil(opts.seconds)) - 1 : -1;
    const int64_t now = wallMillis();
    if (opts.onMeasureStart && opts.warmupSeconds <= 0) opts.onMeasureStart();
    std::vector<std::thread> ts;
    for (int t = 0; t < opts.threads; ++t) {
        ts.emplace_back([&, t] {
            ThreadStats& my = stats[static_cast<size_t>(t)];
            mongoc_client_t* cl = mongoc_client_pool_pop(pool.pool);
            mongoc_collection_t* co =
                mongoc_client_get_collection(cl, opts.db.c_str(), opts.collection.c_str());
            KeyChooser keys(spec, opts.seed * 7919 + static_cast<uint64_t>(t));
            OpChooser opsChooser(spec, opts.seed * 104729 + static_cast<uint64_t>(t));
            std::mt19937_64 rng(opts.seed + 31 * static_cast<uint64_t>(t));
            double perThreadRate =
                opts.targetOpsPerSec > 0 ? opts.targetOpsPerSec / opts.threads : 0;
            auto intended = Clock::now();
            std::string value(static_cast<size_t>(spec.fieldLength), 'b');
            while (Clock::now() < deadline) {
                if (!measuring.load(std::memory_order_relaxed) && Clock::now() >= start)
                    measuring.store(true, std::memory_order_relaxed);
                const bool measured = measuring.load(std::memory_order_relaxed);
                if (opts.seconds <= 0 && measured && remaining.fetch_sub(1) <= 0) break;
                if (perThreadRate > 0) {
                    intended += std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(1.0 / perThreadRate));
                    std::this_thread::sleep_until(intended);  // pacing, not synchronisation
                }
                auto t0 = perThreadRate > 0 ? intended : Clock::now();
                Op op = opsChooser.next();
                bson_error_t e;
                Outcome outcome = Outcome::Ok;
                auto readOne = [&](int64_t record) {
                    std::string key = keyFor(record);
                    bson_t* filter = BCON_NEW("_id", BCON_UTF8(key.c_str()));
                    bson_t* fo = BCON_NEW("limit", BCON_INT64(1));
                    mongoc_cursor_t* cur =
                        mongoc_collection_find_with_opts(co, filter, fo, nullptr);
                    const bson_t* d;
                    int64_t found = 0;
                    while (mongoc_cursor_next(cur, &d)) ++found;
                    Outcome out = mongoc_cursor_error(cur, &e) ? Outcome::Failed
                                  : found == 0                 ? Outcome::NotFound
                                                               : Outcome::Ok;
                    mongoc_cursor_destroy(cur);
                    bson_destroy(fo);
                    bson_destroy(filter);
                    return out;
                };
                auto updateOne = [&](int64_t record) {
                    std::string key = keyFor(record);
                    for (auto& c : value) c = static_cast<char>('a' + rng() % 26);
                    std::string field = fmt::format(
                        "field{}", rng() % static_cast<uint64_t>(std::max(1, spec.fieldCount)));
                    bson_t* filter = BCON_NEW("_id", BCON_UTF8(key.c_str()));
                    bson_t* upd =
                        BCON_NEW("$set", "{", field.c_str(), BCON_UTF8(value.c_str()), "}");
                    bson_t reply;
                    Outcome out = Outcome::Failed;
                    if (mongoc_collection_update_one(co, filter, upd, nullptr, &reply, &e))
                        out = matchedCount(&reply) == 0 ? Outcome::NotFound : Outcome::Ok;
                    bson_destroy(&reply);
                    bson_destroy(upd);
                    bson_destroy(filter);
                    return out;
                };
                switch (op) {
                    case Op::Read:
                        outcome = readOne(keys.next(inserted.acknowledged()));
                        break;
                    case Op::Update:
                        outcome = updateOne(keys.next(inserted.acknowledged()));
                        break;
                    case Op::ReadModifyWrite: {
                        // As YCSB: the update runs even when the read found nothing.
                        int64_t r = keys.next(inserted.acknowledged());
                        outcome = readOne(r);
                        if (outcome != Outcome::Failed) outcome = std::max(outcome, updateOne(r));
                        break;
                    }
                    case Op::Insert: {
                        int64_t r = inserted.claim();
                        bson_t* d = bson_new();
                        appendRecord(d, r, spec, now, rng);
                        if (!mongoc_collection_insert_one(co, d, nullptr, nullptr, &e))
                            outcome = Outcome::Failed;
                        bson_destroy(d);
                        inserted.acknowledge(r);
                        break;
                    }
                    case Op::Scan: {
                        std::string key = keyFor(keys.next(inserted.acknowledged()));
                        bson_t* filter = BCON_NEW("_id", "{", "$gte", BCON_UTF8(key.c_str()), "}");
                        int64_t len =
                            1 + static_cast<int64_t>(
                                    rng() % static_cast<uint64_t>(std::max(1, spec.maxScanLength)));
                        bson_t* fo = BCON_NEW("limit", BCON_INT64(len), "sort", "{", "_id",
                                              BCON_INT32(1), "}");
                        mongoc_cursor_t* cur =
                            mongoc_collection_find_with_opts(co, filter, fo, nullptr);
                        const bson_t* d;
                        while (mongoc_cursor_next(cur, &d)) {
                        }
                        if (mongoc_cursor_error(cur, &e)) outcome = Outcome::Failed;
                        mongoc_cursor_destroy(cur);
                        bson_destroy(fo);
                        bson_destroy(filter);
                        break;
                    }
                }
                auto t1 = Clock::now();
                if (t1 < start) continue;  // warm-up
                int idx = static_cast<int>(op);
                if (outcome == Outcome::Ok) {
                    my.lat[idx].push_back(static_cast<uint32_t>(std::min<int64_t>(
                        UINT32_MAX,
                        std::chrono::duration_cast<std::chrono::microseconds>(t1 - t0).count())));
                } else if (outcome == Outcome::NotFound) {
                    my.notFound[idx]++;
                } else {
                    my.failed[idx]++;
                    std::lock_guard lk(errMu);
                    if (firstError.empty()) firstError = e.message;
                }
                auto sec = std::chrono::duration_cast<std::chrono::seconds>(t1 - start).count();
                // A timed run's operations still in flight at the deadline count in its last
                // second rather than in a nearly empty extra one.
                if (lastSecond >= 0) sec = std::min<int64_t>(sec, lastSecond);
                if (sec >= 0 && static_cast<size_t>(sec) < perSecond.size())
                    perSecond[static_cast<size_t>(sec)]++;
            }
            mongoc_collection_destroy(co);
            mongoc_client_pool_push(pool.pool, cl);
        });
    }
    if (opts.onMeasureStart && opts.warmupSeconds > 0) {
        // The measured phase starts at a moment on the clock (the workers decide by the
        // same clock which operations count); nothing here waits for another thread.
        std::this_thread::sleep_until(start);
        opts.onMeasureStart();
    }
    for (auto& t : ts) t.join();
    if (opts.onMeasureEnd) opts.onMeasureEnd();
    RunReport r;
    r.elapsedSec = std::max(0.0, std::chrono::duration<double>(Clock::now() - start).count());
    r.firstError = firstError;
    r.nextInsert = inserted.claimed();
    auto summarize = [](std::vector<uint32_t>& all, int64_t failed, int64_t notFound) {
        std::sort(all.begin(), all.end());
        OpReport rep;
        rep.ok = static_cast<int64_t>(all.size());
        rep.failed = failed;
        rep.notFound = notFound;
        rep.p50us = percentile(all, 50);
        rep.p95us = percentile(all, 95);
        rep.p99us = percentile(all, 99);
        rep.p999us = percentile(all, 99.9);
        rep.maxus = all.empty() ? 0 : all.back();
        double sum = 0;
        for (auto v : all) sum += v;
        rep.meanus = all.empty() ? 0 : sum / static_cast<double>(all.size());
        return rep;
    };
    std::vector<uint32_t> everything;
    for (int o = 0; o < kOps; ++o) {
        std::vector<uint32_t> all;
        int64_t failed = 0, notFound = 0;
        for (auto& s : stats) {
            all.insert(all.end(), s.lat[o].begin(), s.lat[o].end());
            failed += s.failed[o];
            notFound += s.notFound[o];
        }
        if (all.empty() && failed == 0 && notFound == 0) continue;
        everything.insert(everything.end(), all.begin(), all.end());
        OpReport rep = summarize(all, failed, notFound);
        r.failed += failed;
        r.notFound += notFound;
        r.ops[opName(static_cast<Op>(o))] = rep;
    }
    r.overall = summarize(everything, r.failed, r.notFound);
    r.opsPerSec = r.elapsedSec > 0 ? static_cast<double>(r.overall.ok) / r.elapsedSec : 0;
    auto nsecs = lastSecond >= 0 ? static_cast<size_t>(lastSecond + 1)
                                 : static_cast<size_t>(std::ceil(r.elapsedSec));
    for (size_t i = 0; i < nsecs && i < perSecond.size(); ++i)
        r.perSecond.push_back(perSecond[i].load());
    return r;
}

std::string toJson(const RunReport& r, const WorkloadSpec& spec, const RunOptions& opts,
                   std::string_view extraFields) {
    auto opJson = [](const OpReport& o) {
        return fmt::format(
            R"({{"ok":{},"failed":{},"not_found":{},"p50_us":{},"p95_us":{},"p99_us":{},"p999_us":{},"max_us":{},"mean_us":{:.1f}}})",
            o.ok, o.failed, o.notFound, o.p50us, o.p95us, o.p99us, o.p999us, o.maxus, o.meanus);
    };
    std::string ops;
    for (const auto& [name, o] : r.ops) {
        if (!ops.empty()) ops += ",";
        ops += fmt::format(R"("{}":{})", name, opJson(o));
    }
    std::string timeline;
    for (size_t i = 0; i < r.perSecond.size(); ++i)
        timeline += (i ? "," : "") + std::to_string(r.perSecond[i]);
    return fmt::format(
        R"({{"label":{},"workload":{},"threads":{},"target_ops_per_sec":{},"recordcount":{},"requestdistribution":"{}","warmup_sec":{},"elapsed_sec":{:.3f},"ops_per_sec":{:.1f},"failed":{},"not_found":{},"expect_misses":{},"overall":{},"operations":{{{}}},{}{}"per_second":[{}]}})",
        jsonString(opts.label), jsonString(spec.name), opts.threads, opts.targetOpsPerSec,
        spec.recordCount, spec.requestDistribution, opts.warmupSeconds, r.elapsedSec, r.opsPerSec,
        r.failed, r.notFound, opts.expectMisses, opJson(r.overall), ops, extraFields,
        extraFields.empty() ? "" : ",", timeline);
}

int exitStatus(const RunReport& r, bool expectMisses) {
    if (r.failed > 0) return kExitFailedOperations;
    if (r.notFound > 0 && !expectMisses) return kExitNotFound;
    return 0;
}

std::string notFoundByOperation(const RunReport& r) {
    std::string out;
    for (const auto& [name, o] : r.ops)
        if (o.notFound > 0)
            out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, o.notFound);
    return out;
}

std::string jsonString(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
        auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\')
            (out += '\\') += c;
        else if (c == '<')  // keeps "</script>" out of reports that embed this JSON in HTML
            out += "\\u003c";
        else if (u < 0x20)
            out += fmt::format("\\u{:04x}", u);
        else
            out += c;
    }
    return out + "\"";
}

std::string toTable(const RunReport& r, bool expectMisses) {
    std::string out =
        fmt::format("{:<18} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "operation", "ok",
                    "failed", "NOT_FOUND", "p50 us", "p95 us", "p99 us", "p99.9 us");
    for (const auto& [name, o] : r.ops)
        out += fmt::format("{:<18} {:>10} {:>8} {:>10} {:>10.0f} {:>10.0f} {:>10.0f} {:>10.0f}\n",
                           name, o.ok, o.failed, o.notFound, o.p50us, o.p95us, o.p99us, o.p999us);
    out += fmt::format("throughput {:.0f} ops/s over {:.1f} s, {} failed, {} NOT_FOUND\n",
                       r.opsPerSec, r.elapsedSec, r.failed, r.notFound);
    if (!r.firstError.empty()) out += "first error: " + r.firstError + "\n";
    if (r.notFound > 0)
        out += expectMisses
                   ? fmt::format("NOT_FOUND ({}): expected (--expect-misses)\n",
                                 notFoundByOperation(r))
                   : fmt::format(
                         "NOT_FOUND ({}): these operations found no document. The keys do not "
                         "match the data (is recordcount what was loaded?); exit status {}. "
                         "Pass --expect-misses if the workload means to miss.\n",
                         notFoundByOperation(r), kExitNotFound);
    return out;
}

}  // namespace halo::bench
