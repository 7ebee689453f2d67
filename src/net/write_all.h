#pragma once
// Writes a whole message to a stream. On a plain socket in non-blocking mode
// (both ends of every connection set it: the listeners' accepted sockets and
// the proxy's connections to its tiers) it first sends directly: a message
// that fits in the socket's send buffer, nearly every one, is then written
// with one system call and no trip through the io_context. Asio's async_write
// completes a send that succeeded at once by posting its handler, and the
// thread, finding a handler queued, polls epoll once more before running it:
// an extra system call per message. What the direct send left over (a full
// send buffer) goes through async_write. A TLS stream always does.
#include <asio.hpp>
#include <type_traits>
#include <vector>

namespace halo::net {

template <typename Stream, typename ConstBufferSequence>
asio::awaitable<asio::error_code> writeAll(Stream& stream, const ConstBufferSequence& buffers) {
    asio::error_code ec;
    if constexpr (std::is_same_v<Stream, asio::ip::tcp::socket>) {
        if (stream.non_blocking()) {
            const size_t total = asio::buffer_size(buffers);
            size_t sent = stream.write_some(buffers, ec);
            if (!ec && sent == total) co_return ec;
            if (ec && ec != asio::error::would_block && ec != asio::error::try_again) co_return ec;
            ec = {};
            std::vector<asio::const_buffer> rest;
            for (auto it = asio::buffer_sequence_begin(buffers);
                 it != asio::buffer_sequence_end(buffers); ++it) {
                asio::const_buffer b = *it;
                if (sent >= b.size()) {
                    sent -= b.size();
                    continue;
                }
                rest.push_back(b + sent);
                sent = 0;
            }
            co_await asio::async_write(stream, rest, asio::redirect_error(asio::use_awaitable, ec));
            co_return ec;
        }
    }
    co_await asio::async_write(stream, buffers, asio::redirect_error(asio::use_awaitable, ec));
    co_return ec;
}

}  // namespace halo::net
