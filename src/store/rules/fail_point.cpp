#include "store/rules/fail_point.h"

#include <fmt/format.h>

#include <limits>

namespace halo::store {

namespace {

StatusWith<int64_t> modeCount(const bson_t* mode, const char* field) {
    bson_iter_t it;
    bson::find(mode, field, &it);
    const bson_value_t* v = bson_iter_value(&it);
    int64_t n = 0;
    if (!bson::isNumber(v->value_type))
        return Status(ErrorCode::TypeMismatch,
                      fmt::format("Expected field \"{}\" to have numeric type, but found {}", field,
                                  bson::typeName(v->value_type)));
    if (!bson::toInt64Exact(*v, &n))
        return Status(ErrorCode::BadValue,
                      fmt::format("Expected field \"{}\" to have a value exactly representable "
                                  "as a 64-bit integer, but found {}",
                                  field, bson::valueToString(*v)));
    if (n < 0)
        return Status(ErrorCode::BadValue,
                      fmt::format("'{}' option to 'mode' must be positive", field));
    if (n > std::numeric_limits<int32_t>::max())
        return Status(ErrorCode::BadValue,
                      fmt::format("'{}' option to 'mode' is too large", field));
    return n;
}

}  // namespace

StatusWith<FailPoint::Settings> FailPoint::parse(const bson_t* cmd) {
    Settings s;
    bson_iter_t it;
    if (!bson::find(cmd, "mode", &it))
        return Status(ErrorCode::IllegalOperation,
                      "When setting a failpoint, you must supply a 'mode'");
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        std::string_view m = bson_iter_utf8(&it, nullptr);
        if (m == "off")
            s.mode = Mode::Off;
        else if (m == "alwaysOn")
            s.mode = Mode::AlwaysOn;
        else
            return Status(ErrorCode::BadValue, fmt::format("unknown mode: {}", m));
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t mode;
        bson::subDocumentAt(it, &mode);
        bson_iter_t f;
        if (bson::find(&mode, "times", &f)) {
            auto n = modeCount(&mode, "times");
            if (!n.isOK()) return n.getStatus();
            s.mode = Mode::Times;
            s.count = n.getValue();
        } else if (bson::find(&mode, "skip", &f)) {
            auto n = modeCount(&mode, "skip");
            if (!n.isOK()) return n.getStatus();
            s.mode = Mode::Skip;
            s.count = n.getValue();
        } else if (bson::find(&mode, "activationProbability", &f)) {
            if (!bson::isNumber(bson_iter_type(&f)))
                return Status(ErrorCode::TypeMismatch,
                              "the 'activationProbability' option to 'mode' must be a double "
                              "between 0 and 1");
            double p = bson::toDouble(*bson_iter_value(&f));
            if (!(p >= 0 && p <= 1))
                return Status(ErrorCode::BadValue,
                              fmt::format("activationProbability must be between 0.0 and 1.0; "
                                          "found {}",
                                          p));
            s.mode = Mode::Random;
            s.probability = p;
        } else {
            return Status(ErrorCode::BadValue,
                          "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or "
                          "'{activationProbability:p}'");
        }
    } else {
        return Status(ErrorCode::TypeMismatch, "'mode' must be a string or JSON object");
    }
    if (bson::find(cmd, "data", &it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return Status(ErrorCode::TypeMismatch, "the 'data' option must be a JSON object");
        bson_t data;
        bson::subDocumentAt(it, &data);
        s.data = std::make_shared<const bson::Doc>(bson::Doc::copyOf(&data));
    }
    return s;
}

int64_t FailPoint::configure(Settings settings) {
    std::lock_guard lk(mu_);
    // As in mongod, {times: 0} still fires once: the count is checked after an activation.
    bool on = settings.mode != Mode::Off;
    settings_ = std::move(settings);
    on_.store(on);
    return timesEntered_.load();
}

std::shared_ptr<const bson::Doc> FailPoint::fire(
    const std::function<bool(const bson_t*)>& applies) {
    if (!maybeOn()) return nullptr;
    std::shared_ptr<const bson::Doc> data;
    {
        std::lock_guard lk(mu_);
        if (!on_.load()) return nullptr;
        data = settings_.data;
    }
    // The predicate runs unlocked (it may be slow); the mode is checked again after.
    if (!applies(data->get())) return nullptr;
    std::lock_guard lk(mu_);
    if (!on_.load() || settings_.data != data) return nullptr;  // changed meanwhile
    switch (settings_.mode) {
        case Mode::Off:
            return nullptr;
        case Mode::AlwaysOn:
            break;
        case Mode::Times:
            if (--settings_.count <= 0) on_.store(false);
            break;
        case Mode::Skip:
            if (settings_.count > 0) {
                --settings_.count;
                return nullptr;
            }
            break;
        case Mode::Random:
            if (std::uniform_real_distribution<double>(0.0, 1.0)(rng_) >= settings_.probability)
                return nullptr;
            break;
    }
    ++timesEntered_;
    return data;
}

void FailPoint::append(bson_t* out) const {
    std::lock_guard lk(mu_);
    // mongod shows its internal mode number: 0 off, 1 alwaysOn, 2 random, 3 nTimes, 4 skip.
    int mode = 0;
    if (on_.load()) {
        switch (settings_.mode) {
            case Mode::Off:
                mode = 0;
                break;
            case Mode::AlwaysOn:
                mode = 1;
                break;
            case Mode::Random:
                mode = 2;
                break;
            case Mode::Times:
                mode = 3;
                break;
            case Mode::Skip:
                mode = 4;
                break;
        }
    }
    BSON_APPEND_INT32(out, "mode", mode);
    BSON_APPEND_DOCUMENT(out, "data", settings_.data->get());
    BSON_APPEND_INT64(out, "timesEntered", timesEntered_.load());
}

FailPoint* FailPoints::find(std::string_view name) {
    if (name == "failCommand") return &failCommand;
    if (name == "onPrimaryTransactionalWrite") return &onPrimaryTransactionalWrite;
    if (name == "failGetMoreAfterCursorCheckout") return &failGetMoreAfterCursorCheckout;
    return nullptr;
}

}  // namespace halo::store
