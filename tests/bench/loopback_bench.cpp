// Loopback point-read benchmark: find-by-_id through libmongoc against a
// running store, beside the same client against a minimal echo server built on
// the same network stack (which answers every command with a canned reply: the
// physical limit of this path on this machine). Prints ops/s, p50 and p99 for
// both and their ratio.
//
//   loopback_bench --uri mongodb://127.0.0.1:PORT [--threads 8] [--seconds 5] [--docs 10000]
//                  [--store-pid PID]
//
// With no --uri it starts nothing and measures only the echo server. With
// --store-pid (the store's process, on this machine) it also prints the CPU
// time and the context switches the store used per operation, from /proc.
#include <mongoc/mongoc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "net/listener.h"
#include "wire/message.h"

namespace {

using Clock = std::chrono::steady_clock;

/// Answers hello/isMaster like a standalone server, everything else with one
/// canned document in a closed cursor. No storage, no parsing beyond the name.
class EchoHandler : public halo::net::FrameHandler {
  public:
    asio::awaitable<halo::net::HandlerResult> onFrame(halo::net::Frame frame) override {
        co_return handle(frame);
    }

  private:
    halo::net::HandlerResult handle(const halo::net::Frame& frame) {
        auto h = halo::wire::parseHeader(frame).getValue();
        bool hello = false;
        halo::bson::Doc reply;
        if (h.opCode == static_cast<int32_t>(halo::wire::OpCode::Query)) {
            hello = true;
        } else {
            auto msg = halo::wire::parseOpMsg(frame);
            if (msg.isOK()) {
                bson_iter_t it;
                halo::bson::View body(msg.getValue().body.data(), msg.getValue().body.size());
                if (bson_iter_init(&it, body.get()) && bson_iter_next(&it)) {
                    std::string_view name = bson_iter_key(&it);
                    hello = name == "hello" || name == "isMaster" || name == "ismaster";
                }
            }
        }
        if (hello) {
            BSON_APPEND_BOOL(reply.mut(), "ismaster", true);
            BSON_APPEND_BOOL(reply.mut(), "isWritablePrimary", true);
            BSON_APPEND_INT32(reply.mut(), "maxBsonObjectSize", 16 * 1024 * 1024);
            BSON_APPEND_INT32(reply.mut(), "maxMessageSizeBytes", 48000000);
            BSON_APPEND_INT32(reply.mut(), "maxWriteBatchSize", 100000);
            BSON_APPEND_INT32(reply.mut(), "minWireVersion", 0);
            BSON_APPEND_INT32(reply.mut(), "maxWireVersion", 21);
            BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
        } else {
            bson_t cursor, batch, doc;
            BSON_APPEND_DOCUMENT_BEGIN(reply.mut(), "cursor", &cursor);
            BSON_APPEND_ARRAY_BEGIN(&cursor, "firstBatch", &batch);
            BSON_APPEND_DOCUMENT_BEGIN(&batch, "0", &doc);
            BSON_APPEND_INT32(&doc, "_id", 1);
            BSON_APPEND_UTF8(&doc, "field0", std::string(100, 'x').c_str());
            bson_append_document_end(&batch, &doc);
            bson_append_array_end(&cursor, &batch);
            BSON_APPEND_INT64(&cursor, "id", 0);
            BSON_APPEND_UTF8(&cursor, "ns", "bench.echo");
            bson_append_document_end(reply.mut(), &cursor);
            BSON_APPEND_DOUBLE(reply.mut(), "ok", 1.0);
        }
        auto out = h.opCode == static_cast<int32_t>(halo::wire::OpCode::Query)
                       ? halo::wire::buildOpReply(1, h.requestId, reply.get())
                       : halo::wire::buildOpMsg(1, h.requestId, reply.get());
        return {std::move(out), false};
    }
};

struct Result {
    double opsPerSec = 0;
    double p50us = 0, p99us = 0;
    int64_t errors = 0;
};

Result run(const std::string& uri, int threads, double seconds, int docs) {
    mongoc_client_pool_t* pool;
    {
        bson_error_t err;
        mongoc_uri_t* u = mongoc_uri_new_with_error(uri.c_str(), &err);
        if (!u) {
            std::fprintf(stderr, "bad uri: %s\n", err.message);
            std::exit(2);
        }
        mongoc_uri_set_option_as_int32(u, MONGOC_URI_MAXPOOLSIZE, threads + 1);
        pool = mongoc_client_pool_new(u);
        mongoc_uri_destroy(u);
    }
    std::vector<std::vector<double>> lat(static_cast<size_t>(threads));
    std::atomic<int64_t> errors{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
            mongoc_client_t* c = mongoc_client_pool_pop(pool);
            mongoc_collection_t* coll = mongoc_client_get_collection(c, "bench", "loopback");
            uint64_t x = 88172645463325252ull + static_cast<uint64_t>(t);
            auto& my = lat[static_cast<size_t>(t)];
            while (!stop.load(std::memory_order_relaxed)) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bson_t filter = BSON_INITIALIZER;
                BSON_APPEND_INT32(&filter, "_id",
                                  static_cast<int32_t>(x % static_cast<uint64_t>(docs)));
                auto t0 = Clock::now();
                mongoc_cursor_t* cur =
                    mongoc_collection_find_with_opts(coll, &filter, nullptr, nullptr);
                const bson_t* doc;
                int found = 0;
                while (mongoc_cursor_next(cur, &doc)) ++found;
                bson_error_t err;
                if (mongoc_cursor_error(cur, &err) || found != 1) errors++;
                mongoc_cursor_destroy(cur);
                my.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
                bson_destroy(&filter);
            }
            mongoc_collection_destroy(coll);
            mongoc_client_pool_push(pool, c);
        });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));  // the measurement window
    stop = true;
    for (auto& t : ts) t.join();
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    Result r;
    r.errors = errors;
    if (!all.empty()) {
        r.opsPerSec = static_cast<double>(all.size()) / elapsed;
        r.p50us = all[all.size() / 2];
        r.p99us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
    }
    mongoc_client_pool_destroy(pool);
    return r;
}

/// A process's CPU time (user + system) and context switches (every thread's,
/// voluntary or not), from /proc.
struct ProcessUsage {
    double cpuSeconds = 0;
    int64_t contextSwitches = 0;
};

ProcessUsage usageOf(int pid) {
    ProcessUsage u;
    std::string base = "/proc/" + std::to_string(pid);
    std::ifstream stat(base + "/stat");
    std::string line;
    std::getline(stat, line);
    auto close = line.rfind(')');  // the name may hold spaces
    if (close != std::string::npos) {
        std::istringstream rest(line.substr(close + 2));
        std::string field;
        double ticks = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i)
            if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
        u.cpuSeconds = ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(base + "/task", ec)) {
        std::ifstream status(task.path() / "status");
        while (std::getline(status, line)) {
            if (line.find("ctxt_switches:") != std::string::npos)
                u.contextSwitches += std::stoll(line.substr(line.find(':') + 1));
        }
    }
    return u;
}

void load(const std::string& uri, int docs) {
    mongoc_client_t* c = mongoc_client_new(uri.c_str());
    mongoc_collection_t* coll = mongoc_client_get_collection(c, "bench", "loopback");
    mongoc_collection_drop(coll, nullptr);
    std::string pad(100, 'x');
    for (int base = 0; base < docs; base += 1000) {
        std::vector<bson_t*> batch;
        for (int i = base; i < std::min(docs, base + 1000); ++i) {
            bson_t* d = bson_new();
            BSON_APPEND_INT32(d, "_id", i);
            BSON_APPEND_UTF8(d, "field0", pad.c_str());
            batch.push_back(d);
        }
        bson_error_t err;
        if (!mongoc_collection_insert_many(coll, const_cast<const bson_t**>(batch.data()),
                                           batch.size(), nullptr, nullptr, &err)) {
            std::fprintf(stderr, "load failed: %s\n", err.message);
            std::exit(1);
        }
        for (auto* d : batch) bson_destroy(d);
    }
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Loopback point-read benchmark: store vs echo server"};
    std::string uri;
    int threads = 8, docs = 10000, storePid = 0;
    double seconds = 5;
    app.add_option("--uri", uri, "Store to measure (empty: echo server only)");
    app.add_option("--threads", threads)->capture_default_str();
    app.add_option("--seconds", seconds)->capture_default_str();
    app.add_option("--docs", docs)->capture_default_str();
    app.add_option("--store-pid", storePid, "The store's process id: print its CPU per operation");
    CLI11_PARSE(app, argc, argv);
    mongoc_init();

    asio::io_context io;
    halo::net::Listener echo(io, "127.0.0.1", 0, [](const halo::net::ConnectionInfo&) {
        return std::make_unique<EchoHandler>();
    });
    if (!echo.start().isOK()) return 1;
    std::thread ioThread([&] { io.run(); });
    std::string echoUri =
        "mongodb://127.0.0.1:" + std::to_string(echo.port()) + "/?directConnection=true";
    Result e = run(echoUri, threads, seconds, docs);
    std::printf("echo server : %10.0f ops/s  p50 %7.1f us  p99 %7.1f us  errors %lld\n",
                e.opsPerSec, e.p50us, e.p99us, static_cast<long long>(e.errors));
    if (!uri.empty()) {
        load(uri, docs);
        ProcessUsage before = storePid ? usageOf(storePid) : ProcessUsage{};
        auto t0 = Clock::now();
        Result s = run(uri, threads, seconds, docs);
        double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("store       : %10.0f ops/s  p50 %7.1f us  p99 %7.1f us  errors %lld\n",
                    s.opsPerSec, s.p50us, s.p99us, static_cast<long long>(s.errors));
        if (storePid && s.opsPerSec > 0) {
            ProcessUsage after = usageOf(storePid);
            double ops = s.opsPerSec * elapsed;
            std::printf("store CPU   : %10.1f us per op, %.2f context switches per op\n",
                        (after.cpuSeconds - before.cpuSeconds) * 1e6 / ops,
                        static_cast<double>(after.contextSwitches - before.contextSwitches) / ops);
        }
        std::printf("store/echo  : %10.2f x throughput, p50 +%.1f us, p99 +%.1f us\n",
                    s.opsPerSec / e.opsPerSec, s.p50us - e.p50us, s.p99us - e.p99us);
    }
    echo.stop();
    io.stop();
    ioThread.join();
    mongoc_cleanup();
    return 0;
}
