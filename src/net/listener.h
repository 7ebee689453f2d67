#pragma once
// Async TCP listener and connections on standalone Asio (C++20 coroutines).
// Moves length-prefixed wire frames; knows no commands. Each connection reads a
// frame, hands it to its FrameHandler, writes back what the handler returns,
// in order (one request at a time per connection, as the protocol requires).
// With a TlsServerContext a connection may run over TLS (src/net/tls.h): the
// first four bytes tell a ClientHello from a plain message, and the same frame
// loop then runs over the TLS stream instead of the socket.
#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace halo::net {

using Frame = std::vector<uint8_t>;

struct ConnectionInfo {
    uint64_t id = 0;
    std::string remote;  // "ip:port"
    std::string local;
    bool tls = false;         // the connection runs over TLS
    std::string peerSubject;  // the client certificate's subject (RFC 2253), when one was sent
};

struct HandlerResult {
    std::optional<Frame> reply;  // nothing for moreToCome requests
    bool closeConnection = false;
    /// A request the handler made itself, served next instead of reading one
    /// (an exhaust stream: the reply said moreToCome, so the client sends
    /// nothing until the stream ends).
    std::optional<Frame> next = std::nullopt;
};

/// Per-connection protocol logic. Called from one coroutine at a time.
class FrameHandler {
  public:
    virtual ~FrameHandler() = default;
    /// `frame` is a whole message, header included, already bounded to
    /// [16, maxMessageSizeBytes]. Must not throw.
    virtual asio::awaitable<HandlerResult> onFrame(Frame frame) = 0;
};

using HandlerFactory = std::function<std::unique_ptr<FrameHandler>(const ConnectionInfo&)>;

class TlsServerContext;

/// Accepts connections on one address. start() binds (port 0 picks a free
/// port, read it back with port()); stop() closes the acceptor and every open
/// connection. Thread-safe: the io_context may be run by several threads.
/// Without `tls` every connection is plain; in allowTLS/preferTLS both TLS and
/// plain clients are served; in requireTLS a plain connection is logged and
/// closed.
///
/// The acceptors run on `io`. Each accepted connection lives on `io` too, or,
/// when `connectionContexts` is given, on the next of those in turn: a
/// connection then stays on one context (one thread, when each is run by
/// one), so its reads, command and reply never hand over between threads.
class Listener {
  public:
    Listener(asio::io_context& io, std::string bindIp, uint16_t port, HandlerFactory factory,
             std::shared_ptr<TlsServerContext> tls = nullptr,
             std::vector<asio::io_context*> connectionContexts = {});
    ~Listener();
    Status start();
    void stop();
    uint16_t port() const { return port_; }
    size_t openConnections() const;
    uint64_t totalConnections() const { return nextId_.load() - 1; }

    /// mongod's net.maxIncomingConnections: a connection beyond this many open
    /// ones is logged (22942) and closed at once. Set before start().
    static constexpr size_t kDefaultMaxConnections = 1'000'000;
    /// TCP keepalive on every accepted connection (see setKeepAlive).
    static constexpr int kKeepAliveIdleSecs = 300;
    static constexpr int kKeepAliveIntervalSecs = 30;
    static constexpr int kKeepAliveProbes = 9;
    void setMaxConnections(size_t n) { maxConnections_ = n; }
    size_t maxConnections() const { return maxConnections_; }
    uint64_t rejectedConnections() const { return rejected_.load(); }

  private:
    asio::awaitable<void> acceptLoop();
    asio::awaitable<void> serve(asio::ip::tcp::socket socket, uint64_t id);
    template <typename Stream>
    asio::awaitable<void> frameLoop(Stream& stream, FrameHandler& handler, uint64_t id,
                                    const uint8_t* firstHeader);

    asio::io_context& io_;
    std::string bindIp_;
    uint16_t port_;
    HandlerFactory factory_;
    std::shared_ptr<TlsServerContext> tls_;
    std::vector<asio::io_context*> connectionContexts_;
    std::atomic<size_t> nextContext_{0};
    std::vector<std::unique_ptr<asio::ip::tcp::acceptor>> acceptors_;
    std::atomic<uint64_t> nextId_{1};
    size_t maxConnections_ = kDefaultMaxConnections;
    // Accepted and not yet ended. Shared with the connections' coroutines, whose
    // frames may be destroyed with their io_context after this listener.
    std::shared_ptr<std::atomic<size_t>> active_ = std::make_shared<std::atomic<size_t>>(0);
    std::atomic<uint64_t> rejected_{0};
    mutable std::mutex mu_;
    std::unordered_map<uint64_t, asio::ip::tcp::socket*> sockets_;
    std::atomic<bool> stopped_{false};
};

}  // namespace halo::net
