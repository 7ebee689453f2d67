// Fuzz target for the SCRAM messages the store and the proxy read from
// unauthenticated clients (client-first and client-final, through ScramServer
// and the proxy's SaslConversation, empty last step included) and the base64
// and SASL-name decoders beneath them. The input is split at the first NUL:
// client-first before it, client-final after. Built as a libFuzzer target under
// clang (-DHALO_LIBFUZZER=ON); otherwise scram_fuzz_driver.cpp replays seeded
// mutations of valid conversations on every test run.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "auth/sasl.h"
#include "auth/scram.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace halo::auth;
    std::string_view in(reinterpret_cast<const char*>(data), size);
    auto nul = in.find('\0');
    std::string_view first = in.substr(0, nul);
    std::string_view final =
        nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
    (void)base64Decode(first);
    (void)decodeSaslName(first);
    static const ScramCredentials creds =
        deriveCredentials(ScramMechanism::Sha256, "pencil", Bytes{1, 2, 3, 4}, 4096);
    for (auto mech : {ScramMechanism::Sha1, ScramMechanism::Sha256}) {
        ScramServer server(mech);
        if (!server.start(first).isOK()) continue;
        server.serverFirst(creds, "srv");
        (void)server.finish(final);
    }
    for (bool skip : {false, true}) {
        SaslConversation conv;
        if (!conv.start(skip ? "SCRAM-SHA-1" : "SCRAM-SHA-256", first, "admin", skip).isOK())
            continue;
        conv.serverFirst(creds);
        auto step = conv.step(final);
        if (step.isOK() && !step.getValue().done) (void)conv.step("");
        (void)conv.step(final);  // after the end: refused, never a crash
    }
    return 0;
}
