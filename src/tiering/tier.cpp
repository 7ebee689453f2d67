#include "tiering/tier.h"

#include <fmt/format.h>
#include <mongoc/mongoc.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <asio/ssl.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "auth/scram.h"
#include "common/log.h"
#include "net/frame_reader.h"
#include "net/write_all.h"
#include "tiering/op_deadline.h"
#include "wire/message.h"

namespace halo::tiering {

struct Tier::Conn {
    explicit Conn(const asio::any_io_executor& ex) : sock(ex), timer(ex), context(&ex.context()) {}
    ~Conn() { watch->armed = false; }
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;

    /// Closes the socket if `limit` passes before disarm(): whatever waits on it
    /// then fails, and the connection is never reused. (Each io_context runs on
    /// one thread, so the timer's handler never races the coroutine using it.)
    void arm(std::chrono::milliseconds limit) {
        watch->armed = limit.count() > 0;
        watch->fired = false;
        if (!watch->armed) return;
        const uint64_t gen = ++watch->gen;
        timer.expires_after(limit);
        timer.async_wait([w = watch, gen, s = &sock](const asio::error_code& ec) {
            if (ec || !w->armed || w->gen != gen) return;
            w->fired = true;
            asio::error_code ignored;
            s->close(ignored);
        });
    }
    /// Whether the limit passed (the socket is closed then).
    bool disarm() {
        const bool fired = watch->fired;
        if (watch->armed) {
            watch->armed = false;
            timer.cancel();
        }
        return fired;
    }

    struct Watch {
        bool armed = false;
        bool fired = false;
        uint64_t gen = 0;
    };
    asio::ip::tcp::socket sock;
    asio::steady_timer timer;
    std::shared_ptr<Watch> watch = std::make_shared<Watch>();
    // The execution context the socket belongs to: its pool (Tier::idle_).
    asio::execution_context* context;
    // TLS over `sock` when the tier's URI asks for it (declared after `sock`,
    // so destroyed before it).
    std::unique_ptr<asio::ssl::stream<asio::ip::tcp::socket&>> tls;
    net::FrameReader reader;
};

namespace {

/// The client side of tls=true in a tier's URI, as drivers read it: trust
/// tlsCAFile (else the system's CAs), present tlsCertificateKeyFile when given,
/// and skip checks only when tlsAllowInvalidCertificates, tlsAllowInvalidHostnames
/// or tlsInsecure say so. Errors name `key` (tiers.<name>.uri).
StatusWith<std::unique_ptr<asio::ssl::context>> clientTlsContext(const mongoc_uri_t* u,
                                                                 const std::string& key,
                                                                 bool* checkHostname) {
    auto invalid = [&](std::string msg) {
        return Status(ErrorCode::InvalidSSLConfiguration, fmt::format("{}: {}", key, msg));
    };
    auto readable = [&](const char* option, const char* path) {
        std::FILE* f = std::fopen(path, "rb");
        if (!f)
            return invalid(
                fmt::format("{} cannot read '{}': {}", option, path, std::strerror(errno)));
        std::fclose(f);
        return Status::OK();
    };
    const bool insecure = mongoc_uri_get_option_as_bool(u, MONGOC_URI_TLSINSECURE, false);
    const bool anyCertificate =
        insecure || mongoc_uri_get_option_as_bool(u, MONGOC_URI_TLSALLOWINVALIDCERTIFICATES, false);
    *checkHostname =
        !insecure && !mongoc_uri_get_option_as_bool(u, MONGOC_URI_TLSALLOWINVALIDHOSTNAMES, false);

    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    const char* pw =
        mongoc_uri_get_option_as_utf8(u, MONGOC_URI_TLSCERTIFICATEKEYFILEPASSWORD, nullptr);
    // Always a callback: OpenSSL's default would prompt on the terminal.
    ctx->set_password_callback(
        [password = std::string(pw ? pw : "")](std::size_t, asio::ssl::context::password_purpose) {
            return password;
        });
    asio::error_code ec;
    if (const char* ca = mongoc_uri_get_option_as_utf8(u, MONGOC_URI_TLSCAFILE, nullptr)) {
        Status s = readable("tlsCAFile", ca);
        if (!s.isOK()) return s;
        ctx->load_verify_file(ca, ec);
        if (ec)
            return invalid(fmt::format("tlsCAFile '{}' holds no usable PEM certificate: {}", ca,
                                       ec.message()));
    } else {
        ctx->set_default_verify_paths(ec);
        if (ec) return invalid("cannot load the system's CA certificates: " + ec.message());
    }
    if (const char* cert =
            mongoc_uri_get_option_as_utf8(u, MONGOC_URI_TLSCERTIFICATEKEYFILE, nullptr)) {
        Status s = readable("tlsCertificateKeyFile", cert);
        if (!s.isOK()) return s;
        ctx->use_certificate_chain_file(cert, ec);
        if (!ec) ctx->use_private_key_file(cert, asio::ssl::context::pem, ec);
        if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1)
            return invalid(fmt::format(
                "tlsCertificateKeyFile '{}' must hold a PEM certificate and its private key "
                "(encrypted keys need tlsCertificateKeyFilePassword): {}",
                cert, ec ? ec.message() : "the key does not match the certificate"));
    }
    ctx->set_verify_mode(anyCertificate ? asio::ssl::verify_none : asio::ssl::verify_peer);
    return ctx;
}

}  // namespace

Tier::Tier(std::string name, std::string uri) : name_(std::move(name)), uri_(std::move(uri)) {}

Tier::~Tier() = default;

namespace {

struct UriCredentials {
    std::string user, password, source, mechanism;
};

/// The URI's credentials (empty user: none), refusing what SCRAM cannot do.
StatusWith<UriCredentials> credentialsFrom(const mongoc_uri_t* u, const std::string& tier) {
    UriCredentials c;
    const char* user = mongoc_uri_get_username(u);
    if (!user) return c;
    c.user = user;
    const char* pwd = mongoc_uri_get_password(u);
    c.password = pwd ? pwd : "";
    const char* source = mongoc_uri_get_auth_source(u);
    c.source = source && *source ? source : "admin";
    const char* mech = mongoc_uri_get_auth_mechanism(u);
    c.mechanism = mech ? mech : "";
    if (!c.mechanism.empty() && !auth::mechanismFromName(c.mechanism))
        return Status(ErrorCode::InvalidOptions,
                      fmt::format("tiers.{}.uri: authMechanism={} is not supported; the proxy "
                                  "authenticates to the tiers with SCRAM-SHA-256 or SCRAM-SHA-1",
                                  tier, c.mechanism));
    if (c.password.empty())
        return Status(ErrorCode::InvalidOptions,
                      fmt::format("tiers.{}.uri: user '{}' has no password", tier, c.user));
    if (c.mechanism == "SCRAM-SHA-256") {
        auto prepped = auth::saslPrep(c.password);
        if (!prepped.isOK())
            return Status(ErrorCode::InvalidOptions,
                          fmt::format("tiers.{}.uri: {}", tier, prepped.getStatus().reason()));
    }
    return c;
}

}  // namespace

Status Tier::init() {
    bson_error_t err;
    mongoc_uri_t* u = mongoc_uri_new_with_error(uri_.c_str(), &err);
    if (!u)
        return Status(ErrorCode::FailedToParse,
                      fmt::format("tiers.{}.uri: {}", name_, err.message));
    auto creds = credentialsFrom(u, name_);
    Status st = creds.getStatus();
    if (st.isOK()) {
        user_ = creds.getValue().user;
        password_ = creds.getValue().password;
        authSource_ = creds.getValue().source;
        mechanism_ = creds.getValue().mechanism;
    }
    if (st.isOK()) {
        for (const mongoc_host_list_t* h = mongoc_uri_get_hosts(u); h; h = h->next)
            seeds_.emplace_back(h->host, h->port);
        if (const char* rs = mongoc_uri_get_replica_set(u)) replicaSet_ = rs;
        if (seeds_.empty())
            st = Status(
                ErrorCode::FailedToParse,
                fmt::format("tiers.{}.uri: no hosts (SRV records are not supported)", name_));
    }
    if (st.isOK()) {
        // The standard options: connectTimeoutMS (drivers' 10 s) bounds opening a
        // connection (TCP, TLS, hello, authentication); socketTimeoutMS (none by
        // default) bounds every round trip.
        connectTimeout_ = std::chrono::milliseconds(
            mongoc_uri_get_option_as_int32(u, MONGOC_URI_CONNECTTIMEOUTMS, 10'000));
        socketTimeout_ = std::chrono::milliseconds(
            mongoc_uri_get_option_as_int32(u, MONGOC_URI_SOCKETTIMEOUTMS, 0));
    }
    if (st.isOK() && mongoc_uri_get_tls(u)) {
        auto ctx = clientTlsContext(u, fmt::format("tiers.{}.uri", name_), &tlsCheckHostname_);
        if (ctx.isOK())
            tls_ = std::move(ctx.getValue());
        else
            st = ctx.getStatus();
    }
    mongoc_uri_destroy(u);
    return st;
}

TierInfo Tier::info() const {
    std::lock_guard lk(mu_);
    return info_;
}

namespace {

bool readInt(const bson_t* d, const char* k, int64_t* out) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, d, k)) return false;
    if (!BSON_ITER_HOLDS_NUMBER(&it)) return false;
    *out = bson_iter_as_int64(&it);
    return true;
}

std::string readString(const bson_t* d, const char* k) {
    bson_iter_t it;
    if (bson_iter_init_find(&it, d, k) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

bool readBool(const bson_t* d, const char* k) {
    bson_iter_t it;
    return bson_iter_init_find(&it, d, k) && bson_iter_as_bool(&it);
}

StatusWith<bson::Doc> replyBody(const Frame& f) {
    auto h = wire::parseHeader(f);
    if (!h.isOK()) return h.getStatus();
    if (h.getValue().opCode == static_cast<int32_t>(wire::OpCode::Msg)) {
        auto m = wire::parseOpMsg(f, wire::Validation::Bounds);
        if (!m.isOK()) return m.getStatus();
        return bson::Doc::copyOf(m.getValue().body.data(), m.getValue().body.size());
    }
    return Status(ErrorCode::ProtocolError, "unexpected reply opcode from tier");
}

std::pair<std::string, uint16_t> splitHost(const std::string& hp) {
    auto colon = hp.rfind(':');
    if (colon == std::string::npos) return {hp, 27017};
    return {hp.substr(0, colon), static_cast<uint16_t>(std::stoi(hp.substr(colon + 1)))};
}

}  // namespace

asio::awaitable<StatusWith<std::unique_ptr<Tier::Conn>>> Tier::connect(
    const std::string& host, uint16_t port, std::chrono::milliseconds limit) {
    // On the caller's executor: a client connection's tier round trips stay on
    // its own thread (an io_context per proxy thread).
    auto ex = co_await asio::this_coro::executor;
    auto c = std::make_unique<Conn>(ex);
    ++created_;
    // Armed until the caller has its hello and authentication answered.
    c->arm(limit);
    auto r = co_await open(*c, host, port);
    if (!r.isOK() && c->watch->fired) co_return noAnswer(host, port, limit);
    if (!r.isOK()) co_return r;
    co_return std::move(c);
}

Status Tier::noAnswer(const std::string& host, uint16_t port,
                      std::chrono::milliseconds limit) const {
    return Status(ErrorCode::HostUnreachable,
                  fmt::format("{} tier: {}:{} did not complete a new connection within {} ms "
                              "(connectTimeoutMS, or the operation's maxTimeMS)",
                              name_, host, port, limit.count()));
}

asio::awaitable<Status> Tier::open(Conn& conn, const std::string& host, uint16_t port) {
    auto ex = co_await asio::this_coro::executor;
    Conn* c = &conn;
    asio::error_code ec;
    asio::ip::tcp::resolver resolver(ex);
    auto eps = co_await resolver.async_resolve(host, std::to_string(port),
                                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
        co_return Status(ErrorCode::HostNotFound,
                         fmt::format("{} tier: cannot resolve {}: {}", name_, host, ec.message()));
    co_await asio::async_connect(c->sock, eps, asio::redirect_error(asio::use_awaitable, ec));
    if (ec)
        co_return Status(
            ErrorCode::HostUnreachable,
            fmt::format("{} tier: cannot connect to {}:{}: {}", name_, host, port, ec.message()));
    c->sock.set_option(asio::ip::tcp::no_delay(true), ec);
    c->sock.set_option(asio::socket_base::keep_alive(true), ec);
    c->sock.non_blocking(true, ec);  // requests are sent directly first (net/write_all.h)
    if (tls_) {
        c->tls = std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(c->sock, *tls_);
        SSL* ssl = c->tls->native_handle();
        asio::error_code notIp;
        (void)asio::ip::make_address(host, notIp);
        if (notIp) SSL_set_tlsext_host_name(ssl, host.c_str());  // SNI: names only
        if (tlsCheckHostname_) {
            // Checked by OpenSSL during the handshake, against subjectAltName.
            X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
            if (notIp) {
                X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
            } else {
                X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
            }
        }
        co_await c->tls->async_handshake(asio::ssl::stream_base::client,
                                         asio::redirect_error(asio::use_awaitable, ec));
        if (ec) {
            // A certificate either side rejects fails the same way every time
            // (SSLHandshakeFailed); a dropped connection may be transient.
            long verify = SSL_get_verify_result(ssl);
            bool rejected = verify != X509_V_OK || ec.category() == asio::error::get_ssl_category();
            std::string why = verify != X509_V_OK
                                  ? fmt::format("certificate verify failed: {}",
                                                X509_verify_cert_error_string(verify))
                                  : ec.message();
            co_return Status(rejected ? ErrorCode::SSLHandshakeFailed : ErrorCode::HostUnreachable,
                             fmt::format("tiers.{}.uri: TLS handshake with {}:{} failed: {}", name_,
                                         host, port, why));
        }
    }
    co_return Status::OK();
}

asio::awaitable<Status> Tier::discoverPrimary(std::chrono::milliseconds limit) {
    std::vector<std::pair<std::string, uint16_t>> candidates = seeds_;
    Status last(ErrorCode::HostUnreachable, name_ + " tier: no reachable primary");
    for (size_t i = 0; i < candidates.size() && i < 16; ++i) {
        auto [host, port] = candidates[i];
        auto c = co_await connect(host, port, limit);
        if (!c.isOK()) {
            last = c.getStatus();
            continue;
        }
        bson::Doc hello;
        BSON_APPEND_INT32(hello.mut(), "hello", 1);
        if (!user_.empty() && mechanism_.empty())
            BSON_APPEND_UTF8(hello.mut(), "saslSupportedMechs",
                             fmt::format("{}.{}", authSource_, user_).c_str());
        BSON_APPEND_UTF8(hello.mut(), "$db", "admin");
        Frame req = wire::buildOpMsg(0, 0, hello.get());
        Frame reply;
        Status r = co_await exchange(*c.getValue(), &req, &reply, 1);
        if (!r.isOK()) {
            last = c.getValue()->watch->fired ? noAnswer(host, port, limit) : r;
            continue;
        }
        auto body = replyBody(reply);
        if (!body.isOK()) {
            last = body.getStatus();
            continue;
        }
        const bson_t* b = body.getValue().get();
        std::string setName = readString(b, "setName");
        if (!replicaSet_.empty() && setName != replicaSet_) {
            last = Status(ErrorCode::HostUnreachable,
                          fmt::format("{} tier: {}:{} is in replica set '{}', not '{}'", name_,
                                      host, port, setName, replicaSet_));
            continue;
        }
        if (readBool(b, "isWritablePrimary") || readBool(b, "ismaster")) {
            TierInfo info;
            int64_t v;
            if (readInt(b, "minWireVersion", &v)) info.minWireVersion = static_cast<int32_t>(v);
            if (readInt(b, "maxWireVersion", &v)) info.maxWireVersion = static_cast<int32_t>(v);
            if (readInt(b, "maxBsonObjectSize", &v))
                info.maxBsonObjectSize = static_cast<int32_t>(v);
            if (readInt(b, "maxMessageSizeBytes", &v))
                info.maxMessageSizeBytes = static_cast<int32_t>(v);
            if (readInt(b, "maxWriteBatchSize", &v))
                info.maxWriteBatchSize = static_cast<int32_t>(v);
            if (readInt(b, "logicalSessionTimeoutMinutes", &v))
                info.logicalSessionTimeoutMinutes = v;
            info.setName = setName;
            info.primary = fmt::format("{}:{}", host, port);
            Status authed = co_await authenticate(*c.getValue(), b);
            if (authed.code() == ErrorCode::AuthenticationFailed) {
                // A wrong credential does not heal by trying other members.
                reachable_ = false;
                co_return authed;
            }
            if (c.getValue()->disarm()) authed = noAnswer(host, port, limit);
            if (!authed.isOK()) {
                last = authed;  // the connection broke: try the next candidate
                continue;
            }
            {
                std::lock_guard lk(mu_);
                primary_ = std::make_pair(host, port);
                info_ = info;
                auto& pool = idle_[c.getValue()->context];
                pool.push_back(std::move(c.getValue()));
            }
            if (!reachable_.exchange(true))
                log::info("tiering", 8200001, "Tier primary found",
                          fmt::format(R"({{"tier":{},"primary":{}}})", log::quote(name_),
                                      log::quote(info.primary)));
            co_return Status::OK();
        }
        std::string p = readString(b, "primary");
        if (!p.empty()) {
            auto hp = splitHost(p);
            bool seen = false;
            for (auto& cand : candidates) seen |= cand == hp;
            if (!seen) candidates.push_back(hp);
        }
        last = Status(ErrorCode::NotWritablePrimary,
                      fmt::format("{} tier: {}:{} is not the primary", name_, host, port));
    }
    reachable_ = false;
    co_return last;
}

std::unique_ptr<Tier::Conn> Tier::takeIdle(asio::execution_context* context) {
    std::lock_guard lk(mu_);
    auto it = idle_.find(context);
    if (it == idle_.end() || it->second.empty()) return nullptr;
    auto c = std::move(it->second.back());
    it->second.pop_back();
    return c;
}

asio::awaitable<StatusWith<std::unique_ptr<Tier::Conn>>> Tier::acquire(
    std::chrono::milliseconds limit) {
    asio::execution_context* context = &(co_await asio::this_coro::executor).context();
    if (auto c = takeIdle(context)) co_return std::move(c);
    std::optional<std::pair<std::string, uint16_t>> p;
    {
        std::lock_guard lk(mu_);
        p = primary_;
    }
    if (!p) {
        Status s = co_await discoverPrimary(limit);
        if (!s.isOK()) co_return s;
        if (auto c = takeIdle(context)) co_return std::move(c);
        std::lock_guard lk(mu_);
        p = primary_;
    }
    auto c = co_await connect(p->first, p->second, limit);
    if (!c.isOK()) {
        std::lock_guard lk(mu_);
        primary_.reset();
        reachable_ = false;
        co_return c;
    }
    Status authed = co_await authenticate(*c.getValue(), nullptr);
    if (c.getValue()->disarm()) authed = noAnswer(p->first, p->second, limit);
    if (!authed.isOK()) {
        // Rediscover (hello, mechanisms, authentication) on the next attempt.
        std::lock_guard lk(mu_);
        primary_.reset();
        reachable_ = false;
        co_return authed;
    }
    co_return c;
}

namespace {

/// The SASL payload of a reply (BinData, or a string from old servers).
std::string saslPayload(const bson_t* reply) {
    bson_iter_t it;
    if (!bson_iter_init_find(&it, reply, "payload")) return {};
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_subtype_t st;
        uint32_t len;
        const uint8_t* data;
        bson_iter_binary(&it, &st, &len, &data);
        return std::string(reinterpret_cast<const char*>(data), len);
    }
    return BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, nullptr) : std::string();
}

void appendPayload(bson_t* cmd, std::string_view payload) {
    bson_append_binary(cmd, "payload", 7, BSON_SUBTYPE_BINARY,
                       reinterpret_cast<const uint8_t*>(payload.data()),
                       static_cast<uint32_t>(payload.size()));
}

}  // namespace

asio::awaitable<Status> Tier::authenticate(Conn& c, const bson_t* hello) {
    if (user_.empty()) co_return Status::OK();
    std::string mechName = mechanism_;
    if (mechName.empty() && hello) {
        // Drivers' negotiation: SCRAM-SHA-256 when the user has it, else SCRAM-SHA-1.
        bson_t mechs;
        bson_iter_t it;
        bool sha256 = false, any = false;
        if (bson::subDocument(hello, "saslSupportedMechs", &mechs) && bson_iter_init(&it, &mechs))
            while (bson_iter_next(&it)) {
                any = true;
                sha256 |= BSON_ITER_HOLDS_UTF8(&it) &&
                          std::string_view(bson_iter_utf8(&it, nullptr)) == "SCRAM-SHA-256";
            }
        mechName = sha256 || !any ? "SCRAM-SHA-256" : "SCRAM-SHA-1";
        std::lock_guard lk(mu_);
        negotiated_ = mechName;
    } else if (mechName.empty()) {
        std::lock_guard lk(mu_);
        mechName = negotiated_.empty() ? "SCRAM-SHA-256" : negotiated_;
    }
    auth::ScramMechanism mech = *auth::mechanismFromName(mechName);
    auto fail = [&](const std::string& why) {
        Status s(ErrorCode::AuthenticationFailed,
                 fmt::format("tiers.{}.uri: Authentication failed for user '{}' (authSource {}, "
                             "{}): {}",
                             name_, user_, authSource_, mechName, why));
        log::error(
            "tiering", 8200010, "Tier authentication failed",
            fmt::format(R"({{"tier":{},"error":{}}})", log::quote(name_), log::quote(s.reason())));
        return s;
    };
    auto pwd = auth::scramPassword(mech, user_, password_);
    if (!pwd.isOK()) co_return fail(pwd.getStatus().reason());
    auth::ScramClient scram(mech, user_, pwd.getValue());

    // One SASL step: the reply body, or the failure (server errors are as sent).
    auto step = [&](const bson_t* cmd) -> asio::awaitable<StatusWith<bson::Doc>> {
        Frame req = wire::buildOpMsg(0, 0, cmd);
        Frame reply;
        Status r = co_await exchange(c, &req, &reply, 1);
        if (!r.isOK()) co_return r;
        auto body = replyBody(reply);
        if (!body.isOK()) co_return body.getStatus();
        Status s = replyStatus(body.getValue().get());
        if (!s.isOK()) co_return s;
        co_return std::move(body.getValue());
    };
    auto serverError = [&](const Status& s) {
        // Transport failures stay what they are (the tier is unreachable);
        // refusals by the server are authentication failures.
        if (s.code() == ErrorCode::HostUnreachable || s.code() == ErrorCode::ProtocolError)
            return s;
        return fail(fmt::format("{} ({})", s.reason(), s.codeNumber()));
    };

    bson::Doc start;
    BSON_APPEND_INT32(start.mut(), "saslStart", 1);
    BSON_APPEND_UTF8(start.mut(), "mechanism", mechName.c_str());
    appendPayload(start.mut(), scram.first());
    BSON_APPEND_INT32(start.mut(), "autoAuthorize", 1);
    bson_t opts;
    BSON_APPEND_DOCUMENT_BEGIN(start.mut(), "options", &opts);
    BSON_APPEND_BOOL(&opts, "skipEmptyExchange", true);
    bson_append_document_end(start.mut(), &opts);
    BSON_APPEND_UTF8(start.mut(), "$db", authSource_.c_str());
    auto first = co_await step(start.get());
    if (!first.isOK()) co_return serverError(first.getStatus());
    int64_t convId = 1;
    readInt(first.getValue().get(), "conversationId", &convId);
    auto final = scram.finalMessage(saslPayload(first.getValue().get()));
    if (!final.isOK()) co_return fail(final.getStatus().reason());

    auto cont = [&](std::string_view payload) {
        bson::Doc d;
        BSON_APPEND_INT32(d.mut(), "saslContinue", 1);
        BSON_APPEND_INT32(d.mut(), "conversationId", static_cast<int32_t>(convId));
        appendPayload(d.mut(), payload);
        BSON_APPEND_UTF8(d.mut(), "$db", authSource_.c_str());
        return d;
    };
    bson::Doc second = cont(final.getValue());
    auto r2 = co_await step(second.get());
    if (!r2.isOK()) co_return serverError(r2.getStatus());
    Status verified = scram.verify(saslPayload(r2.getValue().get()));
    if (!verified.isOK()) co_return fail(verified.reason());
    if (!readBool(r2.getValue().get(), "done")) {
        bson::Doc third = cont("");
        auto r3 = co_await step(third.get());
        if (!r3.isOK()) co_return serverError(r3.getStatus());
        if (!readBool(r3.getValue().get(), "done"))
            co_return fail("the server did not finish the SASL conversation");
    }
    co_return Status::OK();
}

void Tier::release(std::unique_ptr<Conn> c) {
    std::lock_guard lk(mu_);
    auto& pool = idle_[c->context];
    if (pool.size() < 256) pool.push_back(std::move(c));
}

namespace {

/// Writes `request` and reads the reply to request id `rid`, over a socket or a TLS stream.
/// A failed read or write. An error from OpenSSL itself (an alert: the tier
/// refused our certificate, say) will recur on every connection, so it is
/// SSLHandshakeFailed naming the URI; anything else may be transient.
Status connectionLost(const asio::error_code& ec, const std::string& name) {
    if (ec.category() == asio::error::get_ssl_category())
        return Status(ErrorCode::SSLHandshakeFailed,
                      fmt::format("tiers.{}.uri: TLS connection to the {} tier failed: {}", name,
                                  name, ec.message()));
    return Status(ErrorCode::HostUnreachable,
                  fmt::format("{} tier: connection lost: {}", name, ec.message()));
}

/// Writes `n` requests at once (their request ids `rid`, `rid` + 1, ...) and
/// reads their `n` replies, in order, over a socket or a TLS stream.
template <typename Stream>
asio::awaitable<Status> exchangeOver(Stream& stream, net::FrameReader& reader,
                                     const Frame* requests, Frame* replies, size_t n, int32_t rid,
                                     const std::string& name) {
    asio::error_code ec;
    if (n == 1) {
        ec = co_await net::writeAll(stream, asio::buffer(requests[0]));
    } else {
        std::vector<asio::const_buffer> all;
        all.reserve(n);
        for (size_t i = 0; i < n; ++i) all.push_back(asio::buffer(requests[i]));
        ec = co_await net::writeAll(stream, all);
    }
    if (ec) co_return connectionLost(ec, name);
    for (size_t i = 0; i < n; ++i) {
        ec = co_await reader.fill(stream, 4);
        if (ec) co_return connectionLost(ec, name);
        int32_t len = reader.frameLength();
        if (len < wire::kHeaderSize || len > wire::kMaxMessageSizeBytes)
            co_return Status(ErrorCode::ProtocolError,
                             fmt::format("{} tier: invalid reply length {}", name, len));
        ec = co_await reader.take(stream, static_cast<size_t>(len), &replies[i]);
        if (ec) co_return connectionLost(ec, name);
        int32_t responseTo;
        std::memcpy(&responseTo, replies[i].data() + 8, 4);
        const int32_t expected = rid + static_cast<int32_t>(i);
        if (responseTo != expected)
            co_return Status(ErrorCode::ProtocolError,
                             fmt::format("{} tier: reply to request {} while waiting for {}", name,
                                         responseTo, expected));
    }
    co_return Status::OK();
}

}  // namespace

// Errors that say nothing about whether a command ran: the connection failed,
// or the server went away (a reply refusing it, such as NoSuchTransaction, is
// an answer).
bool unanswered(const Status& s) {
    switch (s.code()) {
        case ErrorCode::HostUnreachable:
        case ErrorCode::NotWritablePrimary:
        case ErrorCode::InterruptedAtShutdown:
        case ErrorCode::ShutdownInProgress:
            return true;
        default:
            return false;
    }
}

asio::awaitable<Status> Tier::exchange(Conn& c, Frame* requests, Frame* replies, size_t n) {
    const int32_t rid = nextRequestId_.fetch_add(static_cast<int32_t>(n));
    for (size_t i = 0; i < n; ++i) {
        const int32_t id = rid + static_cast<int32_t>(i);
        std::memcpy(requests[i].data() + 4, &id, 4);
    }
    if (c.tls) co_return co_await exchangeOver(*c.tls, c.reader, requests, replies, n, rid, name_);
    co_return co_await exchangeOver(c.sock, c.reader, requests, replies, n, rid, name_);
}

Tier::PoolStats Tier::poolStats() const {
    PoolStats s;
    s.inUse = inUse_.load();
    s.created = created_.load();
    s.roundTrips = roundTrips_.load();
    std::lock_guard lk(mu_);
    for (auto& [context, pool] : idle_) s.available += static_cast<int64_t>(pool.size());
    return s;
}

asio::awaitable<StatusWith<Frame>> Tier::roundTrip(Frame request) {
    Frame reply;
    Status st = co_await roundTripsInto(&request, &reply, 1);
    if (!st.isOK()) co_return st;
    co_return std::move(reply);
}

asio::awaitable<StatusWith<std::vector<Frame>>> Tier::roundTrips(std::vector<Frame> requests) {
    std::vector<Frame> replies(requests.size());
    if (requests.empty()) co_return replies;
    Status st = co_await roundTripsInto(requests.data(), replies.data(), requests.size());
    if (!st.isOK()) co_return st;
    co_return replies;
}

asio::awaitable<Status> Tier::roundTripsInto(Frame* requests, Frame* replies, size_t n) {
    // How long to wait for the tier: what is left of the client operation's
    // maxTimeMS (op_deadline.h), else socketTimeoutMS, else no limit. A tier that
    // accepts connections but never answers (a network partition) then fails the
    // operation within its time instead of hanging it.
    std::chrono::milliseconds limit = socketTimeout_;
    bool byMaxTime = false;
    auto bound = [&](std::chrono::milliseconds m) {
        if (limit.count() == 0 || m < limit) {
            limit = m;
            byMaxTime = true;
        }
    };
    // The client operation this round trip is part of (op_deadline.h).
    if (const SteadyTime* d = currentOpDeadline()) {
        auto left =
            std::chrono::ceil<std::chrono::milliseconds>(*d - std::chrono::steady_clock::now());
        if (left.count() <= 0)
            co_return Status(ErrorCode::MaxTimeMSExpired,
                             fmt::format("{} tier: the operation's maxTimeMS expired", name_));
        bound(left);
    }
    std::chrono::milliseconds connectLimit = connectTimeout_;
    if (limit.count() > 0 && (connectLimit.count() <= 0 || limit < connectLimit))
        connectLimit = limit;
    std::chrono::steady_clock::time_point started;
    if (byMaxTime) started = std::chrono::steady_clock::now();
    auto c = co_await acquire(connectLimit);
    if (!c.isOK()) {
        // A new connection that ran out of the operation's time, not of connectTimeoutMS.
        if (byMaxTime && connectLimit == limit &&
            std::chrono::steady_clock::now() - started >= limit)
            co_return Status(
                ErrorCode::MaxTimeMSExpired,
                fmt::format("{} (the operation's maxTimeMS expired)", c.getStatus().reason()));
        co_return c.getStatus();
    }
    ++inUse_;
    roundTrips_.fetch_add(1, std::memory_order_relaxed);
    c.getValue()->arm(limit);
    Status r = co_await exchange(*c.getValue(), requests, replies, n);
    if (c.getValue()->disarm() && !r.isOK())
        r = Status(byMaxTime ? ErrorCode::MaxTimeMSExpired : ErrorCode::NetworkTimeout,
                   fmt::format("{} tier: no reply within {} ms ({}); the connection was closed",
                               name_, limit.count(),
                               byMaxTime ? "the operation's maxTimeMS" : "socketTimeoutMS"));
    --inUse_;
    if (r.isOK()) {
        release(std::move(c.getValue()));
    } else {
        // The connection is in an unknown state; the primary may have changed.
        {
            std::lock_guard lk(mu_);
            primary_.reset();
            reachable_ = false;
        }
        closeIdle();
    }
    co_return r;
}

void Tier::closeIdle() {
    std::lock_guard lk(mu_);
    for (auto& [context, pool] : idle_)
        for (auto& idle : pool) {
            asio::error_code ec;
            idle->sock.close(ec);
        }
    idle_.clear();
}

asio::awaitable<StatusWith<bson::Doc>> Tier::run(const bson_t* cmd) {
    auto r = co_await roundTrip(wire::buildOpMsg(0, 0, cmd));
    if (!r.isOK()) co_return r.getStatus();
    co_return replyBody(r.getValue());
}

asio::awaitable<StatusWith<std::vector<bson::Doc>>> Tier::runAll(
    const std::vector<const bson_t*>& cmds) {
    std::vector<Frame> requests;
    requests.reserve(cmds.size());
    for (const bson_t* c : cmds) requests.push_back(wire::buildOpMsg(0, 0, c));
    auto r = co_await roundTrips(std::move(requests));
    if (!r.isOK()) co_return r.getStatus();
    std::vector<bson::Doc> out;
    out.reserve(cmds.size());
    for (auto& f : r.getValue()) {
        auto body = replyBody(f);
        if (!body.isOK()) co_return body.getStatus();
        out.push_back(std::move(body.getValue()));
    }
    co_return out;
}

std::vector<bson::Doc> batchOf(const bson_t* reply) {
    std::vector<bson::Doc> out;
    bson_t cursor, arr;
    if (!bson::subDocument(reply, "cursor", &cursor)) return out;
    if (!bson::subDocument(&cursor, "firstBatch", &arr) &&
        !bson::subDocument(&cursor, "nextBatch", &arr))
        return out;
    bson_iter_t it;
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        out.push_back(bson::Doc::copyOf(data, len));
    }
    return out;
}

Status replyStatus(const bson_t* reply) {
    bson_iter_t it;
    auto statusFrom = [](const bson_t* d) {
        int64_t code = 8;
        readInt(d, "code", &code);
        std::string msg = readString(d, "errmsg");
        return Status(static_cast<ErrorCode>(code), msg.empty() ? "unknown error" : msg);
    };
    // One pass over the reply for the three fields that can carry an error.
    bool failed = false;
    std::optional<bson_iter_t> writeErrors, writeConcernError;
    if (bson_iter_init(&it, reply)) {
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "ok")
                failed = !bson_iter_as_bool(&it);
            else if (k == "writeErrors" && !writeErrors)
                writeErrors = it;
            else if (k == "writeConcernError" && !writeConcernError)
                writeConcernError = it;
        }
    }
    if (failed) return statusFrom(reply);
    bson_t sub;
    if (writeErrors && bson::subDocumentAt(*writeErrors, &sub)) {
        bson_iter_t e;
        if (bson_iter_init(&e, &sub) && bson_iter_next(&e) && BSON_ITER_HOLDS_DOCUMENT(&e)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&e, &len, &data);
            bson::View v(data, len);
            return statusFrom(v.get());
        }
    }
    if (writeConcernError && bson::subDocumentAt(*writeConcernError, &sub)) return statusFrom(&sub);
    return Status::OK();
}

asio::awaitable<StatusWith<bson::Doc>> Tier::runOk(const bson_t* cmd) {
    auto r = co_await run(cmd);
    if (!r.isOK()) co_return r;
    Status s = replyStatus(r.getValue().get());
    if (!s.isOK()) co_return s;
    co_return r;
}

asio::awaitable<StatusWith<std::vector<bson::Doc>>> Tier::collect(const bson_t* cmd) {
    co_return co_await collectWith([this](const bson_t* c) { return runOk(c); }, cmd);
}

namespace {

/// Appends the documents of the cursor `r` (the reply to `cmd`) and of its
/// getMores, through `run`, to `out`.
asio::awaitable<Status> drainCursor(const CommandRunner& run, const bson_t* cmd,
                                    StatusWith<bson::Doc> r, std::vector<bson::Doc>* out) {
    while (true) {
        if (!r.isOK()) co_return r.getStatus();
        bson_t cursor;
        if (!bson::subDocument(r.getValue().get(), "cursor", &cursor))
            co_return Status(ErrorCode::ProtocolError, "tier reply without a cursor");
        // One pass over {firstBatch | nextBatch, id, ns}.
        bson_iter_t it, batch;
        int64_t id = 0;
        std::string ns;
        bson_iter_init(&it, &cursor);
        while (bson_iter_next(&it)) {
            std::string_view k = bson_iter_key(&it);
            if (k == "id" && BSON_ITER_HOLDS_NUMBER(&it)) {
                id = bson_iter_as_int64(&it);
            } else if (k == "ns" && BSON_ITER_HOLDS_UTF8(&it)) {
                ns = bson_iter_utf8(&it, nullptr);
            } else if ((k == "firstBatch" || k == "nextBatch") && BSON_ITER_HOLDS_ARRAY(&it) &&
                       bson_iter_recurse(&it, &batch)) {
                while (bson_iter_next(&batch)) {
                    if (!BSON_ITER_HOLDS_DOCUMENT(&batch)) continue;
                    uint32_t len;
                    const uint8_t* data;
                    bson_iter_document(&batch, &len, &data);
                    out->push_back(bson::Doc::copyOf(data, len));
                }
            }
        }
        if (id == 0) co_return Status::OK();
        bson::Doc more;
        BSON_APPEND_INT64(more.mut(), "getMore", id);
        auto dot = ns.find('.');
        BSON_APPEND_UTF8(more.mut(), "collection",
                         dot == std::string::npos ? ns.c_str() : ns.c_str() + dot + 1);
        const std::string db = readString(cmd, "$db");
        BSON_APPEND_UTF8(more.mut(), "$db", db.c_str());
        r = co_await run(more.get());
    }
}

}  // namespace

asio::awaitable<StatusWith<std::vector<bson::Doc>>> collectWith(CommandRunner run,
                                                                const bson_t* cmd) {
    std::vector<bson::Doc> out;
    auto first = co_await run(cmd);
    Status s = co_await drainCursor(run, cmd, std::move(first), &out);
    if (!s.isOK()) co_return s;
    co_return out;
}

asio::awaitable<StatusWith<std::vector<std::vector<bson::Doc>>>> collectAll(
    Tier& tier, const std::vector<const bson_t*>& cmds) {
    auto replies = co_await tier.runAll(cmds);
    if (!replies.isOK()) co_return replies.getStatus();
    CommandRunner run = [&tier](const bson_t* c) { return tier.runOk(c); };
    std::vector<std::vector<bson::Doc>> out(cmds.size());
    for (size_t i = 0; i < cmds.size(); ++i) {
        bson::Doc& reply = replies.getValue()[i];
        Status s = replyStatus(reply.get());
        if (s.isOK()) s = co_await drainCursor(run, cmds[i], std::move(reply), &out[i]);
        if (!s.isOK()) co_return s;
    }
    co_return out;
}

bson::Doc Tier::newSessionId(SessionKind kind) {
    uint8_t uuid[16];
    RAND_bytes(uuid, sizeof uuid);
    if (kind == SessionKind::Internal)
        std::memcpy(uuid, kInternalSessionPrefix, sizeof kInternalSessionPrefix);
    if (kind == SessionKind::App) std::memcpy(uuid, kAppSessionPrefix, sizeof kAppSessionPrefix);
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    bson::Doc d;
    bson_append_binary(d.mut(), "id", 2, BSON_SUBTYPE_UUID, uuid, sizeof uuid);
    return d;
}

bool sessionIdHasPrefix(std::string_view id, const uint8_t (&prefix)[8]) {
    return id.size() >= sizeof prefix && std::memcmp(id.data(), prefix, sizeof prefix) == 0;
}

bool sessionHasPrefix(const bson_t* doc, const uint8_t (&prefix)[8]) {
    bson_iter_t it, id;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, "lsid.id", &id) ||
        !BSON_ITER_HOLDS_BINARY(&id))
        return false;
    bson_subtype_t st;
    uint32_t len;
    const uint8_t* data;
    bson_iter_binary(&id, &st, &len, &data);
    return sessionIdHasPrefix(std::string_view(reinterpret_cast<const char*>(data), len), prefix);
}

void appendUserEventsOnly(bson_t* pipeline, const char* key) {
    // UUIDs compare by their bytes (same length and subtype): the internal
    // ones lie between prefix + 00.. and prefix + ff...
    uint8_t low[16] = {}, high[16];
    std::memset(high, 0xff, sizeof high);
    std::memcpy(low, kInternalSessionPrefix, sizeof kInternalSessionPrefix);
    std::memcpy(high, kInternalSessionPrefix, sizeof kInternalSessionPrefix);
    bson_t stage, match, any, c0, c1, c2, lt, gt, ex;
    bson_append_document_begin(pipeline, key, -1, &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$match", &match);
    BSON_APPEND_ARRAY_BEGIN(&match, "$or", &any);
    BSON_APPEND_DOCUMENT_BEGIN(&any, "0", &c0);
    BSON_APPEND_DOCUMENT_BEGIN(&c0, "lsid", &ex);
    BSON_APPEND_BOOL(&ex, "$exists", false);
    bson_append_document_end(&c0, &ex);
    bson_append_document_end(&any, &c0);
    BSON_APPEND_DOCUMENT_BEGIN(&any, "1", &c1);
    BSON_APPEND_DOCUMENT_BEGIN(&c1, "lsid.id", &lt);
    bson_append_binary(&lt, "$lt", 3, BSON_SUBTYPE_UUID, low, sizeof low);
    bson_append_document_end(&c1, &lt);
    bson_append_document_end(&any, &c1);
    BSON_APPEND_DOCUMENT_BEGIN(&any, "2", &c2);
    BSON_APPEND_DOCUMENT_BEGIN(&c2, "lsid.id", &gt);
    bson_append_binary(&gt, "$gt", 3, BSON_SUBTYPE_UUID, high, sizeof high);
    bson_append_document_end(&c2, &gt);
    bson_append_document_end(&any, &c2);
    bson_append_array_end(&match, &any);
    bson_append_document_end(&stage, &match);
    bson_append_document_end(pipeline, &stage);
}

Transaction::Transaction(Tier& tier, const bson_t* lsid, int64_t txnNumber)
    : tier_(tier), lsid_(bson::Doc::copyOf(lsid)), txnNumber_(txnNumber) {}

bson::Doc Transaction::statement(const bson_t* cmd) {
    bson::Doc c = bson::Doc::copyOf(cmd);
    BSON_APPEND_DOCUMENT(c.mut(), "lsid", lsid_.get());
    BSON_APPEND_INT64(c.mut(), "txnNumber", txnNumber_);
    BSON_APPEND_BOOL(c.mut(), "autocommit", false);
    if (!started_) {
        BSON_APPEND_BOOL(c.mut(), "startTransaction", true);
        started_ = true;
    }
    return c;
}

asio::awaitable<StatusWith<bson::Doc>> Transaction::run(const bson_t* cmd) {
    bson::Doc c = statement(cmd);
    co_return co_await tier_.runOk(c.get());
}

asio::awaitable<std::vector<StatusWith<bson::Doc>>> Transaction::runAll(
    const std::vector<const bson_t*>& cmds) {
    std::vector<bson::Doc> stmts;
    std::vector<const bson_t*> sent;
    for (const bson_t* c : cmds) stmts.push_back(statement(c));
    for (auto& d : stmts) sent.push_back(d.get());
    auto r = co_await tier_.runAll(sent);
    std::vector<StatusWith<bson::Doc>> out;
    for (size_t i = 0; i < cmds.size(); ++i) {
        if (!r.isOK()) {
            out.emplace_back(r.getStatus());
            continue;
        }
        bson::Doc& reply = r.getValue()[i];
        Status s = replyStatus(reply.get());
        if (s.isOK())
            out.emplace_back(std::move(reply));
        else
            out.emplace_back(s);
    }
    co_return out;
}

asio::awaitable<StatusWith<bson::Doc>> Transaction::commit() {
    if (!started_) co_return bson::Doc();
    bson::Doc c;
    BSON_APPEND_INT32(c.mut(), "commitTransaction", 1);
    BSON_APPEND_DOCUMENT(c.mut(), "lsid", lsid_.get());
    BSON_APPEND_INT64(c.mut(), "txnNumber", txnNumber_);
    BSON_APPEND_BOOL(c.mut(), "autocommit", false);
    bson_t wc;
    BSON_APPEND_DOCUMENT_BEGIN(c.mut(), "writeConcern", &wc);
    BSON_APPEND_UTF8(&wc, "w", "majority");
    BSON_APPEND_BOOL(&wc, "j", true);
    bson_append_document_end(c.mut(), &wc);
    BSON_APPEND_UTF8(c.mut(), "$db", "admin");
    auto deadline = std::chrono::steady_clock::now() + kCommitRetryWindow;
    auto pause = std::chrono::milliseconds(10);
    while (true) {
        auto r = co_await tier_.runOk(c.get());
        if (r.isOK() || !unanswered(r.getStatus())) {
            commitUnknown_ = false;
            co_return r;
        }
        commitUnknown_ = true;
        if (std::chrono::steady_clock::now() + pause > deadline) co_return r;
        asio::steady_timer timer(co_await asio::this_coro::executor);
        timer.expires_after(pause);
        asio::error_code ec;
        co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
}

asio::awaitable<void> Transaction::abort() {
    if (!started_) co_return;
    bson::Doc c;
    BSON_APPEND_INT32(c.mut(), "abortTransaction", 1);
    BSON_APPEND_DOCUMENT(c.mut(), "lsid", lsid_.get());
    BSON_APPEND_INT64(c.mut(), "txnNumber", txnNumber_);
    BSON_APPEND_BOOL(c.mut(), "autocommit", false);
    BSON_APPEND_UTF8(c.mut(), "$db", "admin");
    (void)co_await tier_.run(c.get());
}

SessionPool::Lease SessionPool::take() {
    std::lock_guard lk(mu_);
    if (free_.empty()) return Lease{Tier::newSessionId(kind_), 1};
    Lease l = std::move(free_.back());
    free_.pop_back();
    return l;
}

void SessionPool::give(Lease l) {
    ++l.txnNumber;
    std::lock_guard lk(mu_);
    free_.push_back(std::move(l));
}

bool isTransient(const Status& s) {
    if (unanswered(s)) return true;
    switch (s.code()) {
        case ErrorCode::WriteConflict:
        case ErrorCode::NoSuchTransaction:
            return true;
        default:
            return static_cast<int>(s.code()) == 244;  // TransactionAborted
    }
}

}  // namespace halo::tiering
