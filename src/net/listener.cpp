#include "net/listener.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "net/frame_reader.h"
#include "net/tls.h"
#include "net/write_all.h"

namespace halo::net {

namespace {

/// A client that vanished without closing (power loss, a dropped route) is
/// found by TCP keepalive, as mongod finds it: probes after 300 s idle, every
/// 30 s, 9 unanswered ones close the connection (at most 570 s in all).
void setKeepAlive(asio::ip::tcp::socket& sock) {
    asio::error_code ec;
    sock.set_option(asio::socket_base::keep_alive(true), ec);
    if (ec) return;
    int fd = sock.native_handle();
    int idle = Listener::kKeepAliveIdleSecs, interval = Listener::kKeepAliveIntervalSecs,
        count = Listener::kKeepAliveProbes;
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

constexpr int32_t kMinFrame = 16;
constexpr int32_t kMaxFrame = 48'000'000;
}  // namespace

Listener::Listener(asio::io_context& io, std::string bindIp, uint16_t port, HandlerFactory factory,
                   std::shared_ptr<TlsServerContext> tls,
                   std::vector<asio::io_context*> connectionContexts)
    : io_(io),
      bindIp_(std::move(bindIp)),
      port_(port),
      factory_(std::move(factory)),
      tls_(std::move(tls)),
      connectionContexts_(std::move(connectionContexts)) {}

Listener::~Listener() {
    stop();
}

Status Listener::start() {
    // --bind_ip takes a comma-separated list, as mongod's does.
    std::vector<std::string> ips;
    size_t start = 0;
    while (start <= bindIp_.size()) {
        size_t comma = bindIp_.find(',', start);
        std::string ip =
            bindIp_.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!ip.empty()) ips.push_back(ip == "localhost" ? "127.0.0.1" : ip);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (ips.empty()) ips.push_back("127.0.0.1");
    for (const auto& ip : ips) {
        asio::error_code ec;
        auto addr = asio::ip::make_address(ip, ec);
        if (ec) return {ErrorCode::BadValue, fmt::format("invalid bind_ip address '{}'", ip)};
        auto acc = std::make_unique<asio::ip::tcp::acceptor>(io_);
        asio::ip::tcp::endpoint ep(addr, port_);
        acc->open(ep.protocol(), ec);
        if (!ec) acc->set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
        if (!ec) acc->bind(ep, ec);
        if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
        if (ec) {
            return {ErrorCode::InternalError,
                    fmt::format("cannot listen on {}:{}: {}", ip, port_, ec.message())};
        }
        port_ = acc->local_endpoint().port();  // the same port on every address
        acceptors_.push_back(std::move(acc));
    }
    for (size_t i = 0; i < acceptors_.size(); ++i) {
        asio::co_spawn(io_, acceptLoop(), asio::detached);
    }
    return Status::OK();
}

void Listener::stop() {
    if (stopped_.exchange(true)) return;
    for (auto& acc : acceptors_) {
        asio::post(io_, [a = acc.get()] {
            asio::error_code ec;
            a->close(ec);
        });
    }
    // A socket is touched only from its own io_context, never from the
    // caller's thread. A connection ending meanwhile leaves the map (under the
    // lock) before its socket is destroyed, so the lookup finds it or nothing.
    std::lock_guard lk(mu_);
    for (auto& [id, sock] : sockets_) {
        asio::post(sock->get_executor(), [this, id = id] {
            std::lock_guard lk2(mu_);
            auto it = sockets_.find(id);
            if (it == sockets_.end()) return;
            asio::error_code ec;
            it->second->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
        });
    }
}

size_t Listener::openConnections() const {
    std::lock_guard lk(mu_);
    return sockets_.size();
}

asio::awaitable<void> Listener::acceptLoop() {
    static std::atomic<size_t> next{0};
    auto& acc = *acceptors_[next++ % acceptors_.size()];
    while (!stopped_) {
        asio::error_code ec;
        asio::io_context& home =
            connectionContexts_.empty()
                ? io_
                : *connectionContexts_[nextContext_++ % connectionContexts_.size()];
        // Accepted on the acceptor's own context, then handed to `home`: a pending
        // accept never holds a socket of another context (which may go first at shutdown).
        auto accepted = co_await acc.async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            if (stopped_ || ec == asio::error::operation_aborted) co_return;
            continue;
        }
        if (active_->load() >= maxConnections_) {
            ++rejected_;
            auto rep = accepted.remote_endpoint(ec);
            std::string remote =
                ec ? "" : fmt::format("{}:{}", rep.address().to_string(), rep.port());
            log::info("network", 22942,
                      "Connection refused because there are too many open connections",
                      fmt::format(R"({{"remote":{},"connectionCount":{}}})", log::quote(remote),
                                  active_->load()));
            accepted.close(ec);
            continue;
        }
        ++*active_;
        asio::ip::tcp::socket sock(home);
        if (&home == &io_) {
            sock = std::move(accepted);
        } else {
            auto protocol = accepted.local_endpoint(ec).protocol();
            if (!ec) {
                auto fd = accepted.release(ec);
                if (!ec) {
                    sock.assign(protocol, fd, ec);
                    if (ec) ::close(fd);
                }
            }
            if (ec) {  // the peer left already; its descriptor is closed
                --*active_;
                continue;
            }
        }
        sock.set_option(asio::ip::tcp::no_delay(true), ec);
        sock.non_blocking(true, ec);  // replies are sent directly first (write_all.h)
        setKeepAlive(sock);
        uint64_t id = nextId_++;
        asio::co_spawn(home, serve(std::move(sock), id), asio::detached);
    }
}

asio::awaitable<void> Listener::serve(asio::ip::tcp::socket socket, uint64_t id) {
    // Counted from the accept on; uncounted however this ends (also when its
    // context is destroyed with the coroutine suspended).
    struct Active {
        std::shared_ptr<std::atomic<size_t>> n;
        ~Active() { --*n; }
    } active{active_};
    ConnectionInfo info;
    info.id = id;
    asio::error_code ec;
    auto rep = socket.remote_endpoint(ec);
    if (!ec) info.remote = fmt::format("{}:{}", rep.address().to_string(), rep.port());
    auto lep = socket.local_endpoint(ec);
    if (!ec) info.local = fmt::format("{}:{}", lep.address().to_string(), lep.port());
    {
        std::lock_guard lk(mu_);
        if (stopped_) co_return;
        sockets_[id] = &socket;
    }
    log::info("network", 22943, "Connection accepted",
              fmt::format(R"({{"remote":{},"connectionId":{}}})", log::quote(info.remote), id));
    std::unique_ptr<FrameHandler> handler;
    if (!tls_) {
        handler = factory_(info);
        co_await frameLoop(socket, *handler, id, nullptr);
    } else {
        // The first four bytes decide: a TLS ClientHello, or a plain message's length.
        uint8_t first[4];
        co_await asio::async_read(socket, asio::buffer(first, 4),
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            // Closed before sending anything.
        } else if (looksLikeTlsHandshake(first)) {
            asio::ssl::stream<asio::ip::tcp::socket&> stream(socket, tls_->context());
            co_await stream.async_handshake(asio::ssl::stream_base::server, asio::buffer(first, 4),
                                            asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                log::warning("network", 22988, "TLS handshake failed; closing connection",
                             fmt::format(R"({{"remote":{},"connectionId":{},"error":{}}})",
                                         log::quote(info.remote), id, log::quote(ec.message())));
            } else {
                info.tls = true;
                info.peerSubject = peerSubject(stream.native_handle());
                handler = factory_(info);
                co_await frameLoop(stream, *handler, id, nullptr);
            }
        } else if (tls_->requireTls()) {
            log::warning(
                "network", 22988,
                "Plain connection refused: net.tls.mode is requireTLS; the client must "
                "use TLS",
                fmt::format(R"({{"remote":{},"connectionId":{}}})", log::quote(info.remote), id));
        } else {
            handler = factory_(info);
            co_await frameLoop(socket, *handler, id, first);
        }
    }
    handler.reset();
    {
        // (Not in a destructor: a coroutine still suspended when its io_context is
        // destroyed outlives this listener.)
        std::lock_guard lk(mu_);
        sockets_.erase(id);
    }
    socket.close(ec);
    log::info("network", 22944, "Connection ended",
              fmt::format(R"({{"remote":{},"connectionId":{}}})", log::quote(info.remote), id));
}

template <typename Stream>
asio::awaitable<void> Listener::frameLoop(Stream& stream, FrameHandler& handler, uint64_t id,
                                          const uint8_t* firstHeader) {
    FrameReader reader;
    if (firstHeader) reader.prepend(firstHeader, 4);
    bool first = true;
    std::optional<Frame> next;  // an exhaust stream's next request
    while (true) {
        Frame frame;
        asio::error_code ec;
        if (next) {
            frame = std::move(*next);
            next.reset();
        } else {
            ec = co_await reader.fill(stream, 4);
            if (ec) break;
            if (first && !tls_ && looksLikeTlsHandshake(reader.data())) {
                // As mongod does: say why a TLS client gets nowhere here.
                log::warning("network", 23007,
                             "TLS handshake received but net.tls.mode is disabled; closing "
                             "connection",
                             fmt::format(R"({{"connectionId":{}}})", id));
                break;
            }
            first = false;
            int32_t len = reader.frameLength();
            if (len < kMinFrame || len > kMaxFrame) {
                log::warning("network", 22988, "Invalid message length; closing connection",
                             fmt::format(R"({{"connectionId":{},"length":{}}})", id, len));
                break;
            }
            ec = co_await reader.take(stream, static_cast<size_t>(len), &frame);
            if (ec) break;
        }
        HandlerResult r;
        try {
            r = co_await handler.onFrame(std::move(frame));
        } catch (const std::exception& e) {
            // A handler answers every error itself; one that escapes leaves the
            // connection's state unknown, so it ends here, said out loud.
            log::error(
                "network", 9140020, "Unhandled error while serving a message; closing connection",
                fmt::format(R"({{"connectionId":{},"error":{}}})", id, log::quote(e.what())));
            break;
        }
        if (r.reply) {
            ec = co_await writeAll(stream, asio::buffer(*r.reply));
            if (ec) break;
        }
        if (r.closeConnection) break;
        next = std::move(r.next);
    }
}

}  // namespace halo::net
