#pragma once
// The store's protocol front end: one ServiceConnection per client connection
// turns wire frames into command runs and replies (OP_MSG, legacy OP_QUERY on
// $cmd answered with OP_REPLY, OP_COMPRESSED both ways once negotiated).
#include "net/listener.h"
#include "store/commands/command.h"
#include "store/server/store.h"

namespace halo::store {

class ServiceConnection : public net::FrameHandler {
  public:
    ServiceConnection(Store& store, const net::ConnectionInfo& info);
    ~ServiceConnection() override;
    asio::awaitable<net::HandlerResult> onFrame(net::Frame frame) override;

  private:
    /// One attempt at a frame. Sets `deferral` when the command asked to wait.
    net::HandlerResult handle(std::span<const uint8_t> frame, Deferral* deferral,
                              bool finalAttempt);
    net::HandlerResult handleMsg(std::span<const uint8_t> frame, const wire::Header& h,
                                 std::optional<wire::Compressor> replyCompressor,
                                 Deferral* deferral, bool finalAttempt);
    net::HandlerResult handleQuery(std::span<const uint8_t> frame, const wire::Header& h,
                                   std::optional<wire::Compressor> replyCompressor);
    /// An exhaust stream's next command after `reply` (an awaitable hello
    /// sent with exhaustAllowed and answered ok), or nullopt: no stream.
    static std::optional<bson::Doc> nextExhaustRequest(const bson_t* cmd, const bson_t* reply);
    net::Frame maybeCompress(net::Frame frame, std::optional<wire::Compressor> c);

    Store& store_;
    ClientState client_;
    int32_t nextResponseId_ = 1;
};

}  // namespace halo::store
