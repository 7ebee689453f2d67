#include "tiering/fast_clock.h"

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/concurrent_channel.hpp>
#include <vector>

#include "bson/doc.h"

namespace halo::tiering {

namespace {

// (A payload beside the error code: Asio 1.22 cannot instantiate void(error_code) alone.)
using Signal = asio::experimental::concurrent_channel<void(asio::error_code, int)>;

}  // namespace

FastClock::FastClock(Tier& fast) : fast_(fast) {
    BSON_APPEND_INT32(probe_.mut(), "ping", 1);
    BSON_APPEND_UTF8(probe_.mut(), "$db", "admin");
}

FastClock::FastClock(Tier& fast, const Metadata& meta) : fast_(fast) {
    bson_t arr, stmt, q, u, inc;
    BSON_APPEND_UTF8(probe_.mut(), "update", Metadata::kState);
    BSON_APPEND_ARRAY_BEGIN(probe_.mut(), "updates", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &stmt);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", Metadata::kFeederDemand);
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "u", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "$inc", &inc);
    BSON_APPEND_INT32(&inc, "n", 1);
    bson_append_document_end(&u, &inc);
    bson_append_document_end(&stmt, &u);
    BSON_APPEND_BOOL(&stmt, "upsert", true);
    bson_append_document_end(&arr, &stmt);
    bson_append_array_end(probe_.mut(), &arr);
    BSON_APPEND_UTF8(probe_.mut(), "$db", meta.db.c_str());
}

struct FastClock::Round {
    std::vector<std::shared_ptr<Signal>> waiters;  // appended only before the ping is sent
    StatusWith<OpTime> result = Status(ErrorCode::InternalError, "no ping yet");
};

asio::awaitable<StatusWith<OpTime>> FastClock::now() {
    auto signal = std::make_shared<Signal>(co_await asio::this_coro::executor, 1);
    std::shared_ptr<Round> mine, start;
    {
        std::lock_guard lk(mu_);
        if (!inFlight_) {
            inFlight_ = true;
            start = mine = std::make_shared<Round>();
        } else {
            if (!next_) next_ = std::make_shared<Round>();
            mine = next_;
        }
        mine->waiters.push_back(signal);
    }
    if (start) asio::co_spawn(co_await asio::this_coro::executor, run(start), asio::detached);
    co_await signal->async_receive(asio::experimental::as_tuple(asio::use_awaitable));
    co_return mine->result;
}

asio::awaitable<void> FastClock::run(std::shared_ptr<Round> round) {
    while (round) {
        auto r = co_await fast_.runOk(probe_.get());
        if (!r.isOK()) {
            round->result = r.getStatus();
        } else {
            bson_iter_t it;
            uint32_t t = 0, i = 0;
            if (bson_iter_init_find(&it, r.getValue().get(), "operationTime") &&
                BSON_ITER_HOLDS_TIMESTAMP(&it)) {
                bson_iter_timestamp(&it, &t, &i);
                round->result = (static_cast<OpTime>(t) << 32) | i;
            } else {
                round->result = Status(ErrorCode::ProtocolError,
                                       "halocline: the fast tier's reply carried no operationTime "
                                       "(is it a replica set?)");
            }
        }
        std::shared_ptr<Round> done = std::move(round);
        {
            // Everyone who joined `done` did so before its ping was sent; the
            // callers gathered meanwhile get a ping of their own, sent now.
            std::lock_guard lk(mu_);
            round = std::exchange(next_, nullptr);
            if (!round) inFlight_ = false;
        }
        for (auto& s : done->waiters) s->try_send(asio::error_code{}, 0);
    }
}

}  // namespace halo::tiering
