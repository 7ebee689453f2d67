#pragma once
// Reads length-prefixed wire frames from a stream through a buffer. Each read
// takes whatever the socket holds (up to the buffer's size), so a small
// message costs one receive system call instead of two (its length, then the
// rest), and back-to-back messages already buffered cost none. A frame larger
// than the buffer is read straight into its own storage after the buffered
// part. Used by both ends of every connection: the store's and the proxy's
// listeners, and the proxy's connections to its tiers.
#include <asio.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

namespace halo::net {

class FrameReader {
  public:
    static constexpr size_t kBufferSize = 16 * 1024;

    FrameReader() : buf_(kBufferSize) {}

    /// Puts bytes already read from the stream (a sniffed header) in front.
    void prepend(const uint8_t* data, size_t n) {
        compact();
        std::memcpy(buf_.data() + end_, data, n);
        end_ += n;
    }

    /// Waits until at least `n` (at most kBufferSize) bytes are buffered.
    template <typename Stream>
    asio::awaitable<asio::error_code> fill(Stream& stream, size_t n) {
        asio::error_code ec;
        if (end_ - begin_ >= n) co_return ec;
        compact();
        while (end_ - begin_ < n) {
            size_t got = co_await stream.async_read_some(
                asio::buffer(buf_.data() + end_, buf_.size() - end_),
                asio::redirect_error(asio::use_awaitable, ec));
            if (ec) co_return ec;
            end_ += got;
        }
        co_return ec;
    }

    /// The buffered bytes (after fill()).
    const uint8_t* data() const { return buf_.data() + begin_; }

    /// The frame's 4-byte little-endian length (after fill(stream, 4)).
    int32_t frameLength() const {
        int32_t len;
        std::memcpy(&len, data(), 4);
        return len;
    }

    /// Moves the next `len` bytes (a whole frame whose length the caller has
    /// checked) into `out`, reading what is not buffered yet.
    template <typename Stream>
    asio::awaitable<asio::error_code> take(Stream& stream, size_t len, std::vector<uint8_t>* out) {
        asio::error_code ec;
        out->resize(len);
        size_t have = std::min(len, end_ - begin_);
        std::memcpy(out->data(), data(), have);
        begin_ += have;
        if (begin_ == end_) begin_ = end_ = 0;
        if (have < len) {
            co_await asio::async_read(stream, asio::buffer(out->data() + have, len - have),
                                      asio::redirect_error(asio::use_awaitable, ec));
        }
        co_return ec;
    }

  private:
    void compact() {
        if (begin_ == 0) return;
        std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
    }

    std::vector<uint8_t> buf_;
    size_t begin_ = 0;
    size_t end_ = 0;
};

}  // namespace halo::net
